// defines: DataLoaderOptions and DataLoader<D>, which walks a Dataset in batches: range-for yields Batch
// (`auto [x, y]`), size() is the number of batches, and each begin() starts a new epoch. With shuffle, each
// epoch's order is a permutation fixed by (seed, epoch number). With num_workers > 0, std::jthread workers
// build sequence-numbered batches ahead of the consumer (at most prefetch * num_workers at a time), the
// consumer takes them strictly in order, and an exception thrown while building a batch is carried back
// (std::exception_ptr) and rethrown by the loop at that batch. The batches are the same whatever num_workers.
//
//   ember::data::TensorDataset ds(x, y);
//   ember::data::DataLoader loader(ds, {.batch_size = 64, .shuffle = true, .num_workers = 2, .seed = 1});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (auto [xb, yb] : loader) { /* xb: [64, ...] */ }
//
// Devices: a .device other than the CPU throws DeviceError at construction when CUDA is unavailable. With
// pin_memory (and a usable CUDA device) the batches are built in pinned host memory — by the workers, when
// there are any. With a CUDA .device and pin_memory, batch k + 1 is copied to the GPU on a side stream
// (non-blocking, from pinned memory) while the caller computes on batch k; the batch handed out is ready for
// the caller's current stream (which waits on an event recorded after the copy, and is recorded on the
// batch's memory, so the memory is not reused under it). Without pin_memory, batches are moved with a plain
// .to(device). Without CUDA, pin_memory is accepted and does nothing (the batches are ordinary CPU tensors).
#pragma once
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "ember/core/device.h"
#include "ember/core/tensor.h"
#include "ember/cuda/event.h"
#include "ember/cuda/stream.h"
#include "ember/data/dataset.h"
#include "ember/data/sampler.h"

namespace ember::data {

struct DataLoaderOptions {
  int64_t batch_size = 64;        // > 0
  bool shuffle = false;           // a new permutation each epoch, from (seed, epoch)
  bool drop_last = false;         // drop a last batch smaller than batch_size
  int num_workers = 0;            // 0: batches are built on the consumer thread
  bool pin_memory = false;        // build batches in pinned memory (needs CUDA; a no-op without it)
  Device device = Device::cpu();  // where batches are delivered
  int prefetch = 2;               // ready or in-flight batches per worker (>= 1)
  uint64_t seed = 0;              // shuffle seed
  // The order of each epoch instead of shuffle / sequential (e.g. a DistributedSampler); shuffle must be false.
  std::shared_ptr<const Sampler> sampler = nullptr;
};

namespace detail {
// Throws ValueError for bad sizes and DeviceError for a device this build cannot use.
void check_loader_options(const DataLoaderOptions& o);
// Stacks one field (x or y) of the examples into a batch; all undefined gives undefined.
Tensor collate_field(const std::vector<Tensor>& ts, const char* field);
// Moves a batch to `device` (nothing to do on the CPU).
Batch deliver(Batch b, const DataLoaderOptions& o);
// The batch's tensors in pinned host memory.
Batch pin(Batch b);
// True when batches should be pinned: pin_memory is set and CUDA is usable.
bool pinning(const DataLoaderOptions& o);

// Copies one batch at a time to a CUDA device on a side stream: start() queues the copy and returns at
// once (pinned sources), finish() hands the batch over to the caller's current stream.
class DeviceFeeder {
 public:
  explicit DeviceFeeder(Device device);
  void start(const Batch& host);
  Batch finish();
  bool busy() const { return busy_; }

 private:
  Device device_;
  cuda::Stream side_;
  cuda::Event ready_;
  Batch batch_;
  bool busy_ = false;
};

// One epoch: the order, the batch jobs, and (with workers) the threads and the reorder buffer.
template <Dataset D>
class EpochRun {
 public:
  EpochRun(std::shared_ptr<D> ds, const DataLoaderOptions& o, std::vector<int64_t> order, int64_t num_batches)
      : ds_(std::move(ds)),
        opts_(o),
        order_(std::move(order)),
        num_batches_(num_batches),
        capacity_(static_cast<int64_t>(o.prefetch) * o.num_workers),
        pin_(pinning(o)) {
    if (pin_ && o.device.is_cuda()) feeder_ = std::make_unique<DeviceFeeder>(o.device);
    workers_.reserve(static_cast<size_t>(o.num_workers));
    for (int w = 0; w < o.num_workers; ++w) workers_.emplace_back([this](std::stop_token st) { work(st); });
  }
  EpochRun(const EpochRun&) = delete;
  EpochRun& operator=(const EpochRun&) = delete;
  // Stops and joins the workers; a worker busy in get() finishes that batch first.
  ~EpochRun() {
    for (auto& w : workers_) w.request_stop();
    for (auto& w : workers_) w.join();
  }

  int64_t num_batches() const { return num_batches_; }

  // The next batch in order, on the loader's device; rethrows what building it threw (on a worker or here).
  Batch next() {
    if (!feeder_) return deliver(take(), opts_);
    if (pending_) std::rethrow_exception(std::exchange(pending_, nullptr));
    if (!feeder_->busy()) feeder_->start(take());  // the first batch
    Batch b = feeder_->finish();
    // Start copying the next batch now, so that the copy overlaps the caller's work on this one. An error
    // building it is kept and rethrown by the call that would have returned it.
    if (taken_ < num_batches_) {
      try {
        feeder_->start(take());
      } catch (...) {
        pending_ = std::current_exception();
      }
    }
    return b;
  }

 private:
  // The next batch in order, on the host.
  Batch take() {
    const int64_t k = taken_;
    if (workers_.empty()) {
      ++taken_;
      return build(k);
    }
    Slot slot;
    {
      std::unique_lock lk(mu_);
      ready_cv_.wait(lk, [&] { return ready_.contains(k); });
      auto node = ready_.extract(k);
      slot = std::move(node.mapped());
      taken_ = k + 1;
    }
    job_cv_.notify_all();  // a place in the window opened
    if (slot.error) std::rethrow_exception(slot.error);
    return std::move(slot.batch);
  }

  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };

  // Batch k, pinned when pinning.
  Batch build(int64_t k) { return pin_ ? pin(build_plain(k)) : build_plain(k); }

  // Batch k: samples order_[k * batch_size, ...), gathered in one call when the dataset can, else collated.
  Batch build_plain(int64_t k) {
    const auto first = static_cast<size_t>(k * opts_.batch_size);
    const size_t last = std::min(order_.size(), first + static_cast<size_t>(opts_.batch_size));
    std::span<const int64_t> idx(order_.data() + first, last - first);
    if constexpr (BatchDataset<D>) {
      return static_cast<Batch>(ds_->get_batch(std::vector<int64_t>(idx.begin(), idx.end())));
    } else {
      std::vector<Tensor> xs, ys;
      xs.reserve(idx.size());
      ys.reserve(idx.size());
      for (int64_t i : idx) {
        Example e = static_cast<Example>(ds_->get(i));
        xs.push_back(std::move(e.x));
        ys.push_back(std::move(e.y));
      }
      return {collate_field(xs, "x"), collate_field(ys, "y")};
    }
  }

  void work(std::stop_token st) {
    for (;;) {
      int64_t k;
      {
        std::unique_lock lk(mu_);
        // Claim the next job only inside the window [taken_, taken_ + capacity_): bounds memory held.
        job_cv_.wait(lk, st, [&] { return next_job_ >= num_batches_ || next_job_ < taken_ + capacity_; });
        if (st.stop_requested() || next_job_ >= num_batches_) return;
        k = next_job_++;
      }
      Slot slot;
      try {
        slot.batch = build(k);
      } catch (...) {
        slot.error = std::current_exception();
      }
      {
        std::lock_guard lk(mu_);
        ready_.emplace(k, std::move(slot));
      }
      ready_cv_.notify_all();
    }
  }

  std::shared_ptr<D> ds_;  // shared: an iterator may outlive its loader
  DataLoaderOptions opts_;
  std::vector<int64_t> order_;
  int64_t num_batches_;
  int64_t capacity_;
  int64_t taken_ = 0;  // batches handed to the consumer (written under mu_ when workers exist)
  std::mutex mu_;
  std::condition_variable_any job_cv_;  // _any: its wait takes the workers' stop_token
  std::condition_variable ready_cv_;
  int64_t next_job_ = 0;
  std::map<int64_t, Slot> ready_;  // finished batches by sequence number, waiting for their turn
  bool pin_;
  std::unique_ptr<DeviceFeeder> feeder_;  // with pinning and a CUDA device
  std::exception_ptr pending_;            // building the prefetched batch failed
  std::vector<std::jthread> workers_;     // last: joined first, while the members they use are alive
};
}  // namespace detail

template <Dataset D>
class DataLoader {
 public:
  using Options = DataLoaderOptions;

  // Yields the batches of one epoch. Move-only: it owns the epoch, so dropping it (a `break`, an exception,
  // the end of the loop) stops and joins that epoch's workers.
  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;

    Iterator() = default;
    Iterator(Iterator&&) noexcept = default;
    Iterator& operator=(Iterator&&) noexcept = default;

    const Batch& operator*() const { return cur_; }
    const Batch* operator->() const { return &cur_; }
    Iterator& operator++() {
      if (++index_ < run_->num_batches()) {
        cur_ = run_->next();
      } else {
        cur_ = {};
        run_.reset();  // the epoch is over: join the workers now
      }
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return !run_; }

   private:
    friend class DataLoader;
    explicit Iterator(std::unique_ptr<detail::EpochRun<D>> run) : run_(std::move(run)) {
      if (run_->num_batches() > 0) {
        cur_ = run_->next();
      } else {
        run_.reset();
      }
    }
    std::unique_ptr<detail::EpochRun<D>> run_;
    Batch cur_;
    int64_t index_ = 0;
  };

  // Holds the dataset by value (datasets are usually cheap handles; move in a big one). Throws ValueError
  // for batch_size < 1, num_workers < 0 or prefetch < 1, and DeviceError for an unusable .device.
  explicit DataLoader(D dataset, DataLoaderOptions opts = {})
      : dataset_(std::make_shared<D>(std::move(dataset))), opts_(opts) {
    detail::check_loader_options(opts_);
  }

  // Batches per epoch (the last one may be smaller unless drop_last).
  int64_t size() const {
    const int64_t n = opts_.sampler ? opts_.sampler->size(static_cast<int64_t>(dataset_->size()))
                                    : static_cast<int64_t>(dataset_->size());
    return opts_.drop_last ? n / opts_.batch_size : (n + opts_.batch_size - 1) / opts_.batch_size;
  }

  // Starts the next epoch (a fresh shuffle) and builds or awaits its first batch.
  Iterator begin() {
    const int64_t n = static_cast<int64_t>(dataset_->size());
    std::vector<int64_t> order = opts_.sampler   ? opts_.sampler->indices(n, epoch_)
                                 : opts_.shuffle ? shuffled_order(n, opts_.seed, epoch_)
                                                 : sequential_order(n);
    ++epoch_;
    return Iterator(std::make_unique<detail::EpochRun<D>>(dataset_, opts_, std::move(order), size()));
  }
  std::default_sentinel_t end() const { return {}; }

  const D& dataset() const { return *dataset_; }
  const Options& options() const { return opts_; }
  // Epochs begun so far; set_epoch(e) makes the next begin() use epoch e's order (e.g. when resuming).
  uint64_t epoch() const { return epoch_; }
  void set_epoch(uint64_t e) { epoch_ = e; }

 private:
  std::shared_ptr<D> dataset_;
  Options opts_;
  uint64_t epoch_ = 0;
};

}  // namespace ember::data
