// defines: Runtime, the one distributed runtime of the process (runtime.cpp), and Work::State. Private to
// dist/src.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ember/dist/dist.h"
#include "ember/internal/comm.h"

namespace ember::dist {

struct Work::State {
  std::string what;              // "all_reduce" ..., for messages
  std::vector<Tensor> keep;      // buffers the engine uses, alive until done
  std::function<void()> finish;  // run once by wait(), on the caller's thread (copy back, divide)
  // Host engine: set by the communication thread.
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  double duration = 0;
  // Device engine (NCCL): polled by wait() on the caller's thread.
  detail::Comm* device_comm = nullptr;
  detail::Request device_request = nullptr;
  std::chrono::steady_clock::time_point started;
  double timeout_s = 0;

  void complete(std::exception_ptr e, double seconds);
};

namespace detail {

class Runtime {
 public:
  static Runtime& get();
  ~Runtime();

  void init(const InitOptions& o);
  void finalize();
  bool running() const { return running_; }
  Comm& host();         // MPI or the world of one; throws DistError when not initialised
  Comm* device_comm();  // NCCL, or null
  std::string backend_name();
  double timeout_s() const { return timeout_s_; }
  void set_timeout(double s) { timeout_s_ = s; }
  bool failed() const { return failed_; }
  // The first failure wins; later ones are consequences of it.
  void mark_failed(const std::string& why) {
    std::lock_guard<std::mutex> l(fail_m_);
    if (failed_) return;
    failure_ = why;
    failed_ = true;
  }
  std::string failure() const {
    std::lock_guard<std::mutex> l(fail_m_);
    return failure_;
  }

  // Queues a collective on the communication thread; `start` runs there.
  Work run_host(std::string what, std::function<Request(Comm&)> start, std::vector<Tensor> keep = {},
                std::function<void()> finish = {});
  // Starts a collective on the NCCL engine now, on the caller's thread.
  Work run_device(std::string what, const std::function<Request(Comm&)>& start, std::vector<Tensor> keep,
                  std::function<void()> finish);

 private:
  struct Task {
    uint64_t seq = 0;
    std::function<Request(Comm&)> start;
    std::shared_ptr<Work::State> state;
  };
  // A collective that timed out or failed, with its task (whose buffers the engine may still write), polled until
  // it ends or finalize gives up.
  struct Orphan {
    Request request = nullptr;
    Task task;
    void poll(Comm& host);
  };
  void loop();
  bool next_task(Task& task, Orphan& orphan);  // false: stop
  void run_task(Task& task, Orphan& orphan);
  void drain(Orphan& orphan);
  void start_nccl(bool required);
  void stop_thread();

  std::mutex api_;  // init / finalize
  std::atomic<bool> running_{false};
  bool self_ = false;
  std::unique_ptr<Comm> host_;
  std::unique_ptr<Comm> device_;
  std::atomic<double> timeout_s_{1800};
  std::atomic<bool> failed_{false};
  mutable std::mutex fail_m_;
  std::string failure_;  // under fail_m_

  std::thread thread_;
  std::mutex q_;
  std::condition_variable qcv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  uint64_t submitted_ = 0;  // collectives queued (under q_)
  uint64_t started_ = 0;    // collectives started (communication thread only)
};

}  // namespace detail
}  // namespace ember::dist
