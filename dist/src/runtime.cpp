// defines: the distributed runtime behind dist.h — init/finalize, the engines (the MPI and NCCL plugins, or
// a world of one), and the communication thread that runs every MPI collective (runtime.h).
//
// Note [Communication thread]: MPI makes progress only inside MPI calls, so a collective started with
// MPI_Iallreduce and left alone while backward computes would not move. One thread owns MPI: it starts the
// collectives in the order they were submitted (the same order on every rank), polls them to completion,
// answers the other ranks' failure-detection queries while it waits, and enforces the timeout (Note
// [Collective timeout] in dist.h). The caller's thread only enqueues and, in wait(), sleeps.
#include "runtime.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "ember/core/factory.h"
#include "ember/cuda/cuda.h"
#include "ember/internal/plugin_loader.h"

namespace ember::dist {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

// A world of one (no MPI): every collective is already done; all_gather and reduce_scatter copy.
class SelfComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  Request start_all_reduce(void*, int64_t, DType, CommOp) override { return nullptr; }
  Request start_broadcast(void*, int64_t, int) override { return nullptr; }
  Request start_all_gather(const void* in, void* out, int64_t bytes) override {
    if (in != out) std::memmove(out, in, static_cast<size_t>(bytes));
    return nullptr;
  }
  Request start_reduce_scatter(const void* in, void* out, int64_t count, DType d, CommOp) override {
    if (in != out) std::memmove(out, in, static_cast<size_t>(count) * itemsize(d));
    return nullptr;
  }
  Request start_barrier() override { return nullptr; }
  bool test(Request) override { return true; }
  void abort(int code) override { std::_Exit(code); }
  void finalize() override {}
};

// True when a launcher started this process as one of several (then a missing MPI is an error, not a
// world of one).
bool launched_as_many() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(var);
    if (v && std::atoi(v) > 1) return true;
  }
  return false;
}

// The entry point `entry` of the plugin `file` ($env: a path that replaces the usual places), or null with why.
template <class Entry>
Entry open_plugin(const char* file, const char* env, const char* entry, std::string* why) {
  std::string tried, opened;
  if (void* sym = ember::detail::find_plugin_entry(ember::detail::plugin_candidates(file, env), entry, &tried, &opened))
    return reinterpret_cast<Entry>(sym);
  *why = ember::detail::str(file, " could not be loaded:", tried);
  return nullptr;
}

}  // namespace

Runtime& Runtime::get() {
  static Runtime r;  // destroyed at exit, which finalises a forgotten init
  return r;
}

Runtime::~Runtime() {
  try {
    finalize();
  } catch (...) {}
}

void Runtime::init(const InitOptions& o) {
  std::lock_guard<std::mutex> lock(api_);
  if (running_) throw DistError("dist::init: already initialised (call dist::finalize() first)");
  EMBER_CHECK(o.backend == "auto" || o.backend == "mpi" || o.backend == "nccl", DistError,
              "dist::init: unknown backend \"", o.backend, "\" (expected \"mpi\", \"nccl\" or \"auto\")");
  EMBER_CHECK(o.timeout_s > 0, DistError, "dist::init: timeout_s must be positive, got ", o.timeout_s);
  timeout_s_ = o.timeout_s;
  failed_ = false;
  {
    std::lock_guard<std::mutex> l(fail_m_);
    failure_.clear();
  }
  started_ = 0;
  if (o.backend == "nccl")
    EMBER_CHECK(cuda::is_available(), DistError,
                "dist::init: backend \"nccl\" needs CUDA, which is unavailable: ", cuda::unavailable_reason());

  // MPI is initialised on the thread that will own it (Note [Communication thread]).
  std::string why;
  bool ready = false;
  std::mutex m;
  std::condition_variable cv;
  stop_ = false;
  thread_ = std::thread([&, backend = o.backend] {
    std::unique_ptr<Comm> comm;
    std::string err;
    auto entry = open_plugin<MpiEntry>("libember_dist_mpi.so", "EMBER_DIST_MPI_PLUGIN", kMpiEntryName, &err);
    if (entry) {
      comm.reset(entry(kCommVersion, &err));
      if (!comm) err = "libember_dist_mpi.so: " + err;
    }
    if (!comm && backend == "auto" && !launched_as_many()) {
      comm = std::make_unique<SelfComm>();
      self_ = true;
    }
    {
      std::lock_guard<std::mutex> l(m);
      if (comm) host_ = std::move(comm);
      why = err;
      ready = true;
      cv.notify_all();  // under the lock: init() may return, destroying cv, as soon as it sees `ready`
    }
    if (host_) loop();
  });
  {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return ready; });
  }
  if (!host_) {
    thread_.join();
    throw DistError(
        ember::detail::str("dist::init: the MPI engine could not start (backend \"", o.backend, "\"): ", why));
  }
  running_ = true;
  // Every rank takes part in the NCCL check (a rank without CUDA votes no), so the collectives stay in step.
  if (o.backend == "nccl" || (o.backend == "auto" && !self_)) {
    try {
      start_nccl(o.backend == "nccl");
    } catch (...) {
      running_ = false;
      stop_thread();
      throw;
    }
  }
}

void Runtime::start_nccl(bool required) {
  std::string why = "CUDA is unavailable: " + cuda::unavailable_reason();
  NcclEntry create = nullptr;
  NcclIdEntry make_id = nullptr;
  if (cuda::is_available() && cuda::device_count() > 0) {
    create = open_plugin<NcclEntry>("libember_dist_nccl.so", "EMBER_DIST_NCCL_PLUGIN", kNcclEntryName, &why);
    if (create)
      make_id = open_plugin<NcclIdEntry>("libember_dist_nccl.so", "EMBER_DIST_NCCL_PLUGIN", kNcclIdEntryName, &why);
  }
  // Every rank must agree on whether NCCL runs: each one's vote is combined over MPI (min). The buffers are
  // tensors the Work keeps alive, so even an abandoned (timed-out) collective never writes into freed memory.
  const int32_t have = (create && make_id) ? 1 : 0;
  Tensor vote = full({1}, have, {.dtype = kInt32});
  run_host("dist::init (nccl check)",
           [vote](Comm& c) { return c.start_all_reduce(vote.data_ptr(), 1, kInt32, CommOp::Min); }, {vote})
      .wait();
  if (vote.data<int32_t>()[0] == 0) {
    EMBER_CHECK(!required, DistError, "dist::init: backend \"nccl\": the NCCL engine is unavailable on ",
                have ? std::string("another rank") : ember::detail::str("this rank: ", why));
    return;
  }
  // Rank 0 makes the id and sends it with a first byte saying whether that worked, so a failure there is an
  // error on every rank rather than a hang on the others.
  Tensor msg = zeros({1 + kNcclUniqueIdBytes}, {.dtype = kUInt8});
  if (host_->rank() == 0) msg.data<uint8_t>()[0] = make_id(msg.data<uint8_t>() + 1, &why) ? 1 : 0;
  run_host("dist::init (nccl id)", [msg](Comm& c) { return c.start_broadcast(msg.data_ptr(), msg.numel(), 0); }, {msg})
      .wait();
  EMBER_CHECK(msg.data<uint8_t>()[0] == 1, DistError, "dist::init: ncclGetUniqueId failed on rank 0",
              host_->rank() == 0 ? ": " + why : std::string());
  // One GPU per rank on each host: local rank r uses device r (mod the device count), made current here.
  const int device = host_->local_rank() % cuda::device_count();
  cuda::set_device(device);
  Comm* nccl = create(kCommVersion, host_->rank(), host_->world_size(), device, msg.data<uint8_t>() + 1, &why);
  EMBER_CHECK(nccl != nullptr, DistError, "dist::init: NCCL could not start on rank ", host_->rank(), ": ", why);
  device_.reset(nccl);
}

void Runtime::finalize() {
  std::lock_guard<std::mutex> lock(api_);
  if (!running_) return;
  running_ = false;
  // NCCL first (its work is on streams the caller synchronises). After a failure its collectives may never end,
  // and destroying the communicator would wait for them: the job ends instead, as it does for MPI.
  if (device_ && failed_) {
    std::fprintf(stderr, "ember dist: %s; ending the job\n", failure().c_str());
    device_->abort(3);
  }
  device_.reset();
  stop_thread();
}

void Runtime::stop_thread() {
  {
    std::lock_guard<std::mutex> l(q_);
    stop_ = true;
  }
  qcv_.notify_all();
  if (thread_.joinable()) thread_.join();
  host_.reset();
  self_ = false;
}

Comm& Runtime::host() {
  EMBER_CHECK(running_, DistError, "dist: not initialised (call dist::init() first)");
  return *host_;
}

Comm* Runtime::device_comm() {
  EMBER_CHECK(running_, DistError, "dist: not initialised (call dist::init() first)");
  return device_.get();
}

std::string Runtime::backend_name() {
  EMBER_CHECK(running_, DistError, "dist: not initialised (call dist::init() first)");
  return self_ ? "self" : device_ ? "mpi+nccl" : "mpi";
}

Work Runtime::run_host(std::string what, std::function<Request(Comm&)> start, std::vector<Tensor> keep,
                       std::function<void()> finish) {
  auto s = std::make_shared<Work::State>();
  s->what = std::move(what);
  s->keep = std::move(keep);
  s->finish = std::move(finish);
  {
    std::lock_guard<std::mutex> l(q_);
    EMBER_CHECK(!stop_, DistError, s->what, ": dist is shutting down");
    queue_.push_back({++submitted_, std::move(start), s});
  }
  qcv_.notify_all();
  return Work(s);
}

Work Runtime::run_device(std::string what, const std::function<Request(Comm&)>& start, std::vector<Tensor> keep,
                         std::function<void()> finish) {
  Comm* c = device_comm();
  EMBER_CHECK(c != nullptr, DistError, what, ": CUDA tensors need the NCCL engine (dist::init({.backend = \"nccl\"})",
              " or \"auto\" with CUDA), and this process runs backend \"", backend_name(), "\"");
  EMBER_CHECK(!failed_, DistError, what, ": the process group failed earlier: ", failure());
  auto s = std::make_shared<Work::State>();
  s->what = std::move(what);
  s->keep = std::move(keep);
  s->finish = std::move(finish);
  s->device_comm = c;
  s->device_request = start(*c);
  s->started = Clock::now();
  s->timeout_s = timeout_s_;
  return Work(s);
}

void Runtime::Orphan::poll(Comm& host) {
  try {
    if (request && host.test(request)) {
      request = nullptr;
      task = Task();
    }
  } catch (...) {  // the engine gave up on it: nothing will write its buffers any more
    request = nullptr;
  }
}

// The communication thread (Note [Communication thread]).
void Runtime::loop() {
  Orphan orphan;
  Task task;
  while (next_task(task, orphan)) run_task(task, orphan);
  drain(orphan);
  host_->finalize();
}

// The next queued collective; while none is queued, the host engine is served and an orphan polled.
bool Runtime::next_task(Task& task, Orphan& orphan) {
  for (;;) {
    std::unique_lock<std::mutex> l(q_);
    qcv_.wait_for(l, std::chrono::milliseconds(2), [&] { return stop_ || !queue_.empty(); });
    if (!queue_.empty()) {
      task = std::move(queue_.front());
      queue_.pop_front();
      return true;
    }
    if (stop_) return false;
    l.unlock();
    host_->serve(started_);
    orphan.poll(*host_);
  }
}

// Starts a collective and polls it to its end, its failure or its timeout (then it becomes the orphan).
void Runtime::run_task(Task& task, Orphan& orphan) {
  if (failed_) {
    task.state->complete(std::make_exception_ptr(DistError(
                             ember::detail::str(task.state->what, ": the process group failed earlier: ", failure()))),
                         0);
    return;
  }
  started_ = task.seq;
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration<double>(timeout_s_);
  Request r = nullptr;
  try {
    r = task.start(*host_);
  } catch (...) {  // nothing started: the group is still in step
    task.state->complete(std::current_exception(), 0);
    return;
  }
  // Poll: a short spin (small collectives finish in microseconds), then sleeps of ~50 us so that a waiting
  // rank leaves the cores to the computation.
  for (int spins = 0;; ++spins) {
    bool done = false;
    try {
      done = host_->test(r);
    } catch (const std::exception& e) {  // the engine failed mid-collective: the ranks are out of step
      mark_failed(ember::detail::str(task.state->what, " (collective #", task.seq, ") failed: ", e.what()));
      task.state->complete(std::make_exception_ptr(DistError(failure())), 0);
      return;
    }
    if (done) {
      task.state->complete(nullptr, std::chrono::duration<double>(Clock::now() - t0).count());
      return;
    }
    host_->serve(started_);
    if (Clock::now() > deadline) {
      const std::vector<int> absent = host_->absent_ranks(task.seq, 2.0);
      std::string who;
      for (int a : absent) who += (who.empty() ? "" : ", ") + std::to_string(a);
      mark_failed(ember::detail::str(task.state->what, " (collective #", task.seq, ") timed out after ", timeout_s_,
                                     " s on rank ", host_->rank(), " of ", host_->world_size(), "; ",
                                     absent.empty() ? std::string("every rank answered that it arrived (a slow "
                                                                  "network or an engine fault?)")
                                                    : "ranks that did not arrive: " + who));
      orphan.request = r;
      task.state->complete(std::make_exception_ptr(DistError(failure())), 0);
      orphan.task = std::move(task);  // keeps the buffers alive while the engine may still use them
      return;
    }
    if (spins > 200) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Shutting down. A timed-out collective still pending means a rank never arrived: waiting in MPI_Finalize would
// hang, so the job ends (Note [Collective timeout]).
void Runtime::drain(Orphan& orphan) {
  if (!orphan.request) return;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
  while (orphan.request && Clock::now() < deadline) {
    orphan.poll(*host_);
    host_->serve(started_);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (orphan.request) {
    std::fprintf(stderr, "ember dist: %s; ending the job\n", failure().c_str());
    host_->abort(3);
  }
}

}  // namespace detail

void Work::State::complete(std::exception_ptr e, double seconds) {
  {
    std::lock_guard<std::mutex> lock(m);
    error = std::move(e);
    duration = seconds;
    done = true;
  }
  cv.notify_all();
}

}  // namespace ember::dist
