// defines: EpochPlan::job and BatchPool (ember/data/batch_pool.h): the DataLoader's worker threads, the window of
// batches they may build ahead of the consumer, and the reorder buffer that hands batches back in order.
#include "ember/data/batch_pool.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <stop_token>
#include <thread>
#include <utility>

namespace ember::data::detail {

EpochPlan::Job EpochPlan::job(int64_t k) const {
  const auto first = static_cast<size_t>(k * batch_size);
  const size_t last = std::min(order.size(), first + static_cast<size_t>(batch_size));
  return {k,
          {order.begin() + static_cast<std::ptrdiff_t>(first), order.begin() + static_cast<std::ptrdiff_t>(last)},
          epoch,
          seed,
          first_position + k * batch_size};
}

struct BatchPool::Impl {
  struct Slot {
    Erased batch;
    std::exception_ptr error;
  };

  Build build;
  int64_t capacity;
  std::mutex mu;
  std::condition_variable_any job_cv;  // _any: its wait takes the workers' stop_token
  std::condition_variable ready_cv;
  // The current epoch (replaced under mu by start(), on the consumer's thread).
  uint64_t gen = 0;
  EpochPlan plan;
  int64_t taken = 0;  // batches handed to the consumer
  int64_t next_job = 0;
  std::map<int64_t, Slot> ready;      // finished batches by number, waiting for their turn
  std::vector<std::jthread> workers;  // last: joined first, while the members they use are alive

  // Claims the next job inside the window [taken, taken + capacity), which bounds the memory held; false to stop.
  bool claim(std::stop_token st, EpochPlan::Job& job, uint64_t& job_gen) {
    std::unique_lock lk(mu);
    job_cv.wait(lk, st, [&] { return next_job < plan.num_batches && next_job < taken + capacity; });
    if (st.stop_requested()) return false;
    job = plan.job(next_job++);
    job_gen = gen;
    return true;
  }

  void work(std::stop_token st) {
    EpochPlan::Job job;
    uint64_t job_gen = 0;
    while (claim(st, job, job_gen)) {
      Slot slot;
      try {
        slot.batch = build(job);
      } catch (...) {
        slot.error = std::current_exception();  // carried to the consumer, never std::terminate on this thread
      }
      {
        std::lock_guard lk(mu);
        if (job_gen != gen) continue;  // the epoch was abandoned while this batch was built
        ready.emplace(job.index, std::move(slot));
      }
      ready_cv.notify_all();
    }
  }
};

BatchPool::BatchPool(int workers, int64_t capacity, Build build) : impl_(std::make_unique<Impl>()) {
  impl_->build = std::move(build);
  impl_->capacity = capacity;
  impl_->workers.reserve(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w)
    impl_->workers.emplace_back([impl = impl_.get()](std::stop_token st) { impl->work(st); });
}

BatchPool::~BatchPool() {
  for (auto& w : impl_->workers) w.request_stop();
  for (auto& w : impl_->workers) w.join();
}

void BatchPool::start(EpochPlan plan) {
  {
    std::lock_guard lk(impl_->mu);
    ++impl_->gen;
    impl_->plan = std::move(plan);
    impl_->taken = 0;
    impl_->next_job = 0;
    impl_->ready.clear();
  }
  impl_->job_cv.notify_all();
}

BatchPool::Erased BatchPool::take() {
  Impl& p = *impl_;
  Impl::Slot slot;
  {
    std::unique_lock lk(p.mu);
    const int64_t k = p.taken;
    p.ready_cv.wait(lk, [&] { return p.ready.contains(k); });
    auto node = p.ready.extract(k);
    slot = std::move(node.mapped());
    p.taken = k + 1;
  }
  p.job_cv.notify_all();  // a place in the window opened
  if (slot.error) std::rethrow_exception(slot.error);
  return std::move(slot.batch);
}

}  // namespace ember::data::detail
