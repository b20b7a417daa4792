// Data-parallel training throughput: DistributedDataParallel over MPI, one thread per rank.
//   mpirun -np 2 ember_bench_dist --config mlp-big|cnn --batch 128 --steps 30 [--no-overlap] [--bucket-mib 25]
// Rank 0 prints one line: config ranks overlap samples_per_s (all ranks) comm_ms exposed_ms hidden_fraction
// (per step, averaged over the timed steps). The batch is per rank (random data: loading is excluded); SGD.
// bench/dist_table.sh runs it at 1 and 2 ranks, with and without overlap.
#include <ember/ember.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "models.h"

using namespace ember;

int main(int argc, char** argv) {
  std::string config = "mlp-big";
  int64_t batch = 128, steps = 30, bucket_mib = 25;
  bool overlap = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) config = argv[++i];
    else if (a == "--batch" && i + 1 < argc) batch = std::atoll(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::atoll(argv[++i]);
    else if (a == "--bucket-mib" && i + 1 < argc) bucket_mib = std::atoll(argv[++i]);
    else if (a == "--no-overlap") overlap = false;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  set_num_threads(1);
  dist::init();
  manual_seed(1);
  if (config != "cnn" && config != "mlp-big") {
    std::fprintf(stderr, "unknown config %s\n", config.c_str());
    return 2;
  }
  nn::Chain model = bench::model(config);
  dist::DistributedDataParallel ddp(model, {.bucket_bytes = bucket_mib << 20, .overlap = overlap});
  optim::SGD opt(ddp.parameters(), {.lr = 0.01, .momentum = 0.9});
  manual_seed(100 + static_cast<uint64_t>(dist::rank()));
  Tensor x = randn({batch, 1, 28, 28}), y = randint(0, 10, {batch});
  auto step = [&] {
    opt.zero_grad();
    nn::cross_entropy(ddp(x), y).backward();
    opt.step();
  };
  for (int i = 0; i < 3; ++i) step();
  dist::barrier();
  double comm = 0, exposed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    step();
    comm += ddp.last_stats().comm_s;
    exposed += ddp.last_stats().exposed_s;
  }
  dist::barrier();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (dist::rank() == 0) {
    const double n = static_cast<double>(steps);
    std::printf("%s %d %s %.1f %.2f %.2f %.2f\n", config.c_str(), dist::world_size(), overlap ? "on" : "off",
                static_cast<double>(batch * steps * dist::world_size()) / secs, 1e3 * comm / n, 1e3 * exposed / n,
                comm > 0 ? std::max(0.0, 1.0 - exposed / comm) : 0.0);
  }
  dist::finalize();
  return 0;
}
