// A rank that does not arrive: under `mpirun -np 2`, rank 1 is 4 s late for an all_reduce and rank 0's timeout
// is 1 s. Rank 0 must throw DistError naming the collective and rank 1, and refuse later collectives at once;
// then rank 1 arrives, the abandoned collective completes in the background, and both ranks end cleanly.
// Exit code 0 on success; a message and 1 otherwise.
// With the argument "die", rank 1 aborts instead while rank 0 waits in the all_reduce (timeout 300 s): mpirun
// must end the whole job at once, with a non-zero code (ctest expects the failure, and a hang is a timeout).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "ember/ember.h"

using namespace ember;

int fail(const std::string& why) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", dist::rank(), why.c_str());
  return 1;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "die") {
    dist::init({.backend = "mpi", .timeout_s = 300});
    Tensor t = ones({8});
    if (dist::rank() == 1) std::abort();
    dist::all_reduce(t);
    return 0;
  }
  dist::init({.backend = "mpi", .timeout_s = 1.0});
  if (dist::world_size() != 2) return fail("run me with mpirun -np 2");
  int rc = 0;
  Tensor t = ones({8});
  if (dist::rank() == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      dist::all_reduce(t);
      rc = fail("all_reduce returned although rank 1 had not arrived");
    } catch (const dist::DistError& e) {
      const std::string msg = e.what();
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("rank 0: caught after %.2f s: %s\n", waited, msg.c_str());
      if (msg.find("all_reduce(Sum)") == std::string::npos) rc = fail("the message does not name the collective");
      if (msg.find("ranks that did not arrive: 1") == std::string::npos) rc = fail("the message does not name rank 1");
      if (waited > 3.5) rc = fail("the timeout took far longer than 1 s");
    }
    try {
      Tensor u = ones({2});
      dist::all_reduce(u);
      rc = fail("a collective after the failure was accepted");
    } catch (const dist::DistError& e) {
      if (std::string(e.what()).find("failed earlier") == std::string::npos) rc = fail(e.what());
    }
    // Give rank 1 time to arrive (finalize would otherwise wait one more timeout, then end the job).
    std::this_thread::sleep_for(std::chrono::seconds(5));
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    dist::all_reduce(t);  // completes against rank 0's abandoned collective
    if (t.to_vector<float>()[0] != 2.0f) rc = fail("the late all_reduce gave a wrong value");
  }
  dist::finalize();
  if (rc == 0) std::printf("ok\n");
  return rc;
}
