// defines: DataLoaderOptions and DataLoader<D, Collate>, which walks a dataset in batches: range-for yields the
// batches (`auto [x, y]` for datasets of Examples), size() is the number of batches, and each begin() starts a new
// epoch. The order of an epoch is sequential, a permutation fixed by (seed, epoch) with .shuffle, or a Sampler's.
// With num_workers > 0, worker threads (batch_pool.h) build sequence-numbered batches ahead of the consumer (at most
// prefetch * num_workers at a time: a bounded queue), the consumer takes them strictly in order, and an exception
// thrown while building a batch is carried back (std::exception_ptr) and rethrown by the loop at that batch. The
// batches are the same whatever num_workers — random augmentation included, when get(i) draws from
// sample_rng(i) (sample_rng.h): the loader tells each get(i) its (seed, epoch, index).
//
//   ember::data::TensorDataset ds(x, y);
//   ember::data::DataLoader loader(ds, {.batch_size = 64, .shuffle = true, .num_workers = 2, .seed = 1});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (auto [xb, yb] : loader) { /* xb: [64, ...] */ }
//
// Samples and batches: a dataset is anything with size() and get(i). The collate (third constructor argument,
// DefaultCollate unless given) turns a std::vector of samples into a batch: see collate.h for what the default
// stacks and how to pad variable-length samples. For a dataset of Examples, `.collate` in the options (a
// std::function<Batch(std::vector<Example>&&)>) does the same without a template argument. A dataset of Examples with
// get_batch(indices) (BatchDataset) is gathered in one call instead, when the collate is the default.
//
// Workers: get(i) runs on the worker threads, several at once — it must be safe to call concurrently (const
// access to immutable data is). persistent_workers keeps the threads (and their place in the order) from one
// epoch to the next instead of starting new ones at each begin(); a begin() while an earlier epoch is unfinished
// abandons that epoch (its iterator then throws ValueError on ++).
//
// Resuming: state_dict() says where the loader is — the epoch under way and how many of its batches were handed
// out (or the next epoch, between epochs), plus the seed and batch size; load_state_dict() makes the next begin()
// continue from there, skipping the batches already delivered without building them. With the per-sample streams
// above, a resumed run sees exactly the batches an uninterrupted one would (nn::save_checkpoint keeps it).
//
// Devices: a .device other than the CPU throws DeviceError at construction when CUDA is unavailable. With
// pin_memory (and a usable CUDA device) the batches are built in pinned host memory — by the workers, when
// there are any. With a CUDA .device and pin_memory, batch k + 1 is copied to the GPU on a side stream (one per
// loader, non-blocking, from pinned memory) while the caller computes on batch k; the batch handed out is ready
// for the caller's current stream (which waits on an event recorded after the copy, and is recorded on the
// batch's memory, so the memory is not reused under it). Without pin_memory, batches are moved with a plain
// .to(device). Without CUDA, pin_memory is accepted and does nothing. Batch types the loader cannot look into
// (not a TensorBatch, collate.h) are delivered on the CPU; asking for another device or pinning is a ValueError.
#pragma once
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/core/device.h"
#include "ember/core/factory.h"
#include "ember/core/tensor.h"
#include "ember/cuda/event.h"
#include "ember/cuda/stream.h"
#include "ember/data/batch_pool.h"
#include "ember/data/collate.h"
#include "ember/data/dataset.h"
#include "ember/data/sample_rng.h"
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
  uint64_t seed = 0;              // shuffle seed, and the seed of every sample's stream (sample_rng.h)
  // The order of each epoch instead of shuffle / sequential (e.g. a DistributedSampler); shuffle must be false.
  std::shared_ptr<const Sampler> sampler = nullptr;
  bool persistent_workers = false;  // keep the worker threads between epochs (needs num_workers > 0)
  // Builds each batch from its Examples instead of stacking them (e.g. padding variable-length x). For datasets of
  // Examples; for other sample types pass a collate as the loader's third argument (collate.h).
  std::function<Batch(std::vector<Example>&&)> collate = nullptr;
};

// What a DataLoader can walk: size() and get(i), the sample being any type the collate takes.
template <class D>
concept SampleSource = requires(D& d, int64_t i) {
  { d.size() } -> std::convertible_to<int64_t>;
  d.get(i);
};
template <class D>
using sample_type_t = std::decay_t<decltype(std::declval<D&>().get(int64_t{}))>;

namespace detail {
// Throws ValueError for bad sizes and DeviceError for a device this build cannot use.
void check_loader_options(const DataLoaderOptions& o);
// A DataLoader's saved position (state_dict), checked.
struct LoaderState {
  uint64_t epoch = 0;
  int64_t batches = 0;
  uint64_t seed = 0;
};
LoaderState parse_loader_state(const std::vector<std::pair<std::string, Tensor>>& sd, int64_t batch_size);
Tensor u64_tensor(uint64_t v);  // a uint64 kept exactly in a 0-dim int64 tensor (bit pattern)
// True when batches should be pinned: pin_memory is set and CUDA is usable.
bool pinning(const DataLoaderOptions& o);
Tensor to_device(const Tensor& t, Device device, bool non_blocking);
Tensor pinned(const Tensor& t);
cuda::Stream current_stream(Device device);

// Moves a batch to `device` (nothing to do on the CPU).
template <class B>
B deliver(B b, const DataLoaderOptions& o) {
  if constexpr (TensorBatch<B>) {
    if (!o.device.is_cpu())
      for_each_tensor(b, [&](Tensor& t) {
        if (t.defined()) t = to_device(t, o.device, false);
      });
  }
  return b;
}

// The batch's tensors in pinned host memory.
template <class B>
B pin(B b) {
  if constexpr (TensorBatch<B>)
    for_each_tensor(b, [](Tensor& t) {
      if (t.defined()) t = pinned(t);
    });
  return b;
}

// Copies one batch at a time to a CUDA device on a side stream: start() queues the copy and returns at
// once (pinned sources), finish() hands the batch over to the caller's current stream.
template <class B>
class DeviceFeeder {
 public:
  DeviceFeeder(Device device, cuda::Stream side) : device_(device), side_(side) {}
  void start(const B& host) {
    cuda::StreamGuard guard(side_);  // the device memory is allocated on, and the copy queued on, the side stream
    batch_ = host;
    for_each_tensor(batch_, [&](Tensor& t) {
      if (t.defined()) t = to_device(t, device_, /*non_blocking=*/true);
    });
    ready_.record(side_);
    busy_ = true;
  }
  B finish() {
    const cuda::Stream cur = current_stream(device_);
    ready_.block(cur);  // the caller's later work waits for the copy, the host does not
    // The memory was allocated on the side stream: without this, freeing the batch would let the side
    // stream's next allocation reuse it while the caller's work may still be reading it.
    for_each_tensor(batch_, [&](Tensor& t) {
      if (t.defined()) t.record_stream(cur);
    });
    busy_ = false;
    return std::exchange(batch_, B{});
  }
  bool busy() const { return busy_; }

 private:
  Device device_;
  cuda::Stream side_;
  cuda::Event ready_;
  B batch_{};
  bool busy_ = false;
};

// Builds the batches of one epoch at a time: the plan (which samples each batch holds) and the batches, here or on
// the workers of a BatchPool (batch_pool.h: the threads, the prefetch window and the reorder buffer live there). A
// loader without persistent workers makes one per epoch; with them, one for its lifetime.
template <class D, class C>
class Runner {
 public:
  using Sample = sample_type_t<D>;
  using B = std::decay_t<std::invoke_result_t<const C&, std::vector<Sample>&&>>;

  Runner(std::shared_ptr<D> ds, std::shared_ptr<const C> collate, const DataLoaderOptions& o,
         std::optional<cuda::Stream> side)
      : ds_(std::move(ds)), collate_(std::move(collate)), opts_(o), pin_(pinning(o)) {
    if constexpr (TensorBatch<B>)
      if (pin_ && o.device.is_cuda()) feeder_ = std::make_unique<DeviceFeeder<B>>(o.device, *side);
    if (o.num_workers > 0)
      pool_ = std::make_unique<BatchPool>(
          o.num_workers, static_cast<int64_t>(o.prefetch) * o.num_workers,
          [this](const EpochPlan::Job& job) -> BatchPool::Erased { return std::make_shared<B>(build(job)); });
  }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Begins an epoch and returns its id; an unfinished earlier epoch is abandoned (its batches are dropped).
  // `seed` keys the samples' streams; `first_position` is where `order` starts in the epoch's full order (a resumed
  // epoch starts after the batches already delivered).
  uint64_t start(std::vector<int64_t> order, int64_t num_batches, uint64_t epoch, uint64_t seed,
                 int64_t first_position) {
    if constexpr (TensorBatch<B>)
      if (feeder_ && feeder_->busy()) (void)feeder_->finish();
    pending_ = nullptr;
    plan_ = {std::move(order), num_batches, opts_.batch_size, epoch, seed, first_position};
    taken_ = 0;
    if (pool_) pool_->start(plan_);
    return ++gen_;
  }

  int64_t num_batches() const { return plan_.num_batches; }

  // Throws ValueError when epoch `gen` is no longer the current one.
  void check(uint64_t gen) const {
    EMBER_CHECK_VALUE(gen == gen_, "DataLoader: this iterator's epoch was abandoned: a later begin() on the same ",
                      "loader (persistent_workers) started a new epoch");
  }

  // The next batch of epoch `gen`, on the loader's device; rethrows what building it threw (on a worker or here).
  B next(uint64_t gen) {
    check(gen);
    if constexpr (TensorBatch<B>) {
      if (feeder_) {
        if (pending_) std::rethrow_exception(std::exchange(pending_, nullptr));
        if (!feeder_->busy()) feeder_->start(take());  // the first batch
        B b = feeder_->finish();
        // Start copying the next batch now, so that the copy overlaps the caller's work on this one. An error
        // building it is kept and rethrown by the call that would have returned it.
        if (taken_ < plan_.num_batches) {
          try {
            feeder_->start(take());
          } catch (...) {
            pending_ = std::current_exception();
          }
        }
        return b;
      }
    }
    return deliver(take(), opts_);
  }

 private:
  // The next batch in order, on the host.
  B take() {
    const int64_t k = taken_++;
    if (!pool_) return build(plan_.job(k));
    return std::move(*std::static_pointer_cast<B>(pool_->take()));
  }

  // A batch, pinned when pinning (on a worker thread when there are workers).
  B build(const EpochPlan::Job& job) {
    B b = build_plain(job.samples, job.epoch, job.seed, job.position);
    return pin_ ? pin(std::move(b)) : b;
  }

  // Gathered in one call when the dataset can and the collate is the default, else get(i) per sample + collate.
  B build_plain(const std::vector<int64_t>& idx, uint64_t epoch, uint64_t seed, int64_t pos) {
    if constexpr (std::is_same_v<B, Batch> && std::is_convertible_v<Sample, Example>) {
      if (opts_.collate) {  // the options' collate, for Example samples
        std::vector<Example> samples;
        samples.reserve(idx.size());
        for (size_t j = 0; j < idx.size(); ++j) {
          SampleScope scope(seed, epoch, idx[j], pos + static_cast<int64_t>(j));
          samples.push_back(static_cast<Example>(ds_->get(idx[j])));
        }
        return opts_.collate(std::move(samples));
      }
    }
    if constexpr (BatchDataset<D> && std::is_same_v<C, DefaultCollate>) {
      // One scope for the whole batch: random draws in get_batch follow (seed, epoch, first index, position).
      SampleScope scope(seed, epoch, idx.empty() ? 0 : idx.front(), pos);
      return static_cast<Batch>(ds_->get_batch(idx));
    } else {
      std::vector<Sample> samples;
      samples.reserve(idx.size());
      for (size_t j = 0; j < idx.size(); ++j) {
        // sample_rng(i) and randn in get(i): this sample's own streams
        SampleScope scope(seed, epoch, idx[j], pos + static_cast<int64_t>(j));
        samples.push_back(ds_->get(idx[j]));
      }
      return (*collate_)(std::move(samples));
    }
  }

  std::shared_ptr<D> ds_;  // shared: an iterator may outlive its loader
  std::shared_ptr<const C> collate_;
  DataLoaderOptions opts_;
  bool pin_;
  uint64_t gen_ = 0;  // the current epoch's id (the consumer's thread only)
  EpochPlan plan_;
  int64_t taken_ = 0;                        // batches handed on from the current epoch
  std::unique_ptr<DeviceFeeder<B>> feeder_;  // with pinning and a CUDA device
  std::exception_ptr pending_;               // building the prefetched batch failed
  std::unique_ptr<BatchPool> pool_;          // last: its workers stop first, while what build() uses is alive
};

// Holds a persistent Runner; a copied loader starts its own.
template <class R>
struct RunnerSlot {
  std::shared_ptr<R> run;
  RunnerSlot() = default;
  RunnerSlot(const RunnerSlot&) {}
  RunnerSlot& operator=(const RunnerSlot&) {
    run.reset();
    return *this;
  }
  RunnerSlot(RunnerSlot&&) noexcept = default;
  RunnerSlot& operator=(RunnerSlot&&) noexcept = default;
};
}  // namespace detail

template <SampleSource D, class C = DefaultCollate>
class DataLoader {
  using Run = detail::Runner<D, C>;
  struct Progress {  // shared by the loader and the iterator of its current epoch
    uint64_t epoch = 0;
    int64_t yielded = 0;  // batches handed out (including skipped ones of a resume)
    int64_t total = 0;
  };

 public:
  using Options = DataLoaderOptions;
  using batch_type = typename Run::B;

  // Yields the batches of one epoch. Move-only: dropping it (a `break`, an exception, the end of the loop)
  // stops and joins that epoch's workers, unless they are persistent.
  class Iterator {
   public:
    using value_type = batch_type;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;

    Iterator() = default;
    Iterator(Iterator&&) noexcept = default;
    Iterator& operator=(Iterator&&) noexcept = default;

    const batch_type& operator*() const { return cur_; }
    const batch_type* operator->() const { return &cur_; }
    Iterator& operator++() {
      run_->check(gen_);  // an abandoned epoch says so, even on its last batch
      if (++index_ < run_->num_batches()) {
        ++progress_->yielded;  // before next(): a batch that throws counts as delivered (the loop may go on)
        cur_ = run_->next(gen_);
      } else {
        cur_ = {};
        run_.reset();  // the epoch is over: join the workers now (a persistent loader keeps its own)
      }
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return !run_; }

   private:
    friend class DataLoader;
    Iterator(std::shared_ptr<Run> run, uint64_t gen, std::shared_ptr<Progress> progress)
        : run_(std::move(run)), gen_(gen), progress_(std::move(progress)) {
      if (run_->num_batches() > 0) {
        ++progress_->yielded;
        cur_ = run_->next(gen_);
      } else {
        run_.reset();
      }
    }
    std::shared_ptr<Run> run_;
    std::shared_ptr<Progress> progress_;
    uint64_t gen_ = 0;
    batch_type cur_{};
    int64_t index_ = 0;
  };

  // Holds the dataset by value (datasets are usually cheap handles; move in a big one). Throws ValueError
  // for batch_size < 1, num_workers < 0, prefetch < 1, persistent_workers without workers, or a device / pinning
  // for a batch type the loader cannot move; DeviceError for an unusable .device.
  explicit DataLoader(D dataset, DataLoaderOptions opts = {}, C collate = C{})
      : dataset_(std::make_shared<D>(std::move(dataset))),
        collate_(std::make_shared<const C>(std::move(collate))),
        opts_(std::move(opts)) {
    detail::check_loader_options(opts_);
    if constexpr (!(std::is_same_v<batch_type, Batch> && std::is_convertible_v<sample_type_t<D>, Example> &&
                    std::is_same_v<C, DefaultCollate>))
      EMBER_CHECK_VALUE(!opts_.collate, "DataLoader: .collate takes the Examples of a dataset of Examples with the ",
                        "default third argument; this dataset's samples (or the collate given as the third argument) ",
                        "are of another type: pass one collate, as the third argument");
    if constexpr (!TensorBatch<batch_type>)
      EMBER_CHECK_VALUE(opts_.device.is_cpu() && !opts_.pin_memory, "DataLoader: .device = ", opts_.device,
                        opts_.pin_memory ? " with .pin_memory" : "",
                        ": the collate's batch type is not one the loader can move (Batch, Tensor, TensorDict, "
                        "std::vector<Tensor>); deliver on the CPU and move it yourself");
  }

  // Batches per epoch (the last one may be smaller unless drop_last).
  int64_t size() const {
    const int64_t n = opts_.sampler ? opts_.sampler->size(static_cast<int64_t>(dataset_->size()))
                                    : static_cast<int64_t>(dataset_->size());
    return batches_for(n);
  }

  // Starts the next epoch (a fresh shuffle) and builds or awaits its first batch.
  Iterator begin() {
    const int64_t n = static_cast<int64_t>(dataset_->size());
    std::vector<int64_t> order = opts_.sampler   ? opts_.sampler->indices(n, epoch_)
                                 : opts_.shuffle ? shuffled_order(n, opts_.seed, epoch_)
                                                 : sequential_order(n);
    // One side stream per loader: blocks freed on it are reused by the next epoch's copies.
    if (detail::pinning(opts_) && opts_.device.is_cuda() && !side_) side_ = cuda::Stream::create(opts_.device.index());
    std::shared_ptr<Run> run;
    if (opts_.persistent_workers) {
      if (!persistent_.run) persistent_.run = std::make_shared<Run>(dataset_, collate_, opts_, side_);
      run = persistent_.run;
    } else {
      run = std::make_shared<Run>(dataset_, collate_, opts_, side_);
    }
    // The batches follow the order actually returned: a sampler whose indices() disagrees with its size() is an
    // error here, not a read past the order on a worker.
    if (opts_.sampler) {
      const int64_t said = opts_.sampler->size(n);
      EMBER_CHECK_VALUE(static_cast<int64_t>(order.size()) == said, "DataLoader: the sampler returned ", order.size(),
                        " indices for epoch ", epoch_, " but its size() says ", said);
    }
    // Resuming mid-epoch: the batches already delivered are dropped from the order, not built.
    const int64_t full_batches = batches_for(static_cast<int64_t>(order.size()));
    const int64_t skip = std::min(std::exchange(skip_, 0), full_batches);
    order.erase(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(
                                                   std::min<int64_t>(skip * opts_.batch_size, std::ssize(order))));
    const int64_t num_batches = full_batches - skip;
    progress_ = std::make_shared<Progress>(Progress{.epoch = epoch_, .yielded = skip, .total = full_batches});
    const uint64_t gen = run->start(std::move(order), num_batches, epoch_, opts_.seed, skip * opts_.batch_size);
    ++epoch_;
    return Iterator(std::move(run), gen, progress_);
  }
  std::default_sentinel_t end() const { return {}; }

  const D& dataset() const { return *dataset_; }
  const Options& options() const { return opts_; }
  // Epochs begun so far; set_epoch(e) makes the next begin() use epoch e's order (e.g. when resuming).
  uint64_t epoch() const { return epoch_; }
  void set_epoch(uint64_t e) {
    if (e != epoch_) skip_ = 0;  // a resumed position belongs to the epoch it was saved in
    epoch_ = e;
  }

  // Where the loader is, as 0-dim int64 tensors: "epoch" (the epoch under way, or the next one between epochs),
  // "batches" (of that epoch, handed out so far), "seed", "batch_size". Counting happens as each batch is handed
  // out, so a state taken inside the loop body, after the batch was used, resumes at the next batch.
  // After a `break` out of the loop, the state says "the rest of this epoch"; to skip the rest, save after the next
  // begin() or pass set_epoch(epoch() ...) yourself.
  std::vector<std::pair<std::string, Tensor>> state_dict() const {
    // Loaded and not begun yet: the loaded position, unchanged.
    const bool mid =
        skip_ > 0 || (progress_ && progress_->yielded < progress_->total && progress_->epoch + 1 == epoch_);
    const bool loaded = skip_ > 0;
    auto i64 = [](int64_t v) { return tensor<int64_t>({v}, Shape{}); };
    return {{"epoch", i64(static_cast<int64_t>(loaded ? epoch_
                                               : mid  ? progress_->epoch
                                                      : epoch_))},
            {"batches", i64(loaded ? skip_
                            : mid  ? progress_->yielded
                                   : 0)},
            {"seed", detail::u64_tensor(opts_.seed)},
            {"batch_size", i64(opts_.batch_size)}};
  }
  // The next begin() continues the saved epoch after its delivered batches, with the saved seed. Throws ValueError
  // (changing nothing) for missing entries or another batch size.
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& sd) {
    const detail::LoaderState s = detail::parse_loader_state(sd, opts_.batch_size);
    epoch_ = s.epoch;
    skip_ = s.batches;
    progress_.reset();
    opts_.seed = s.seed;  // each begin() passes it to the workers
  }

 private:
  // Batches for n samples (no n + batch_size - 1: batch_size may be huge, "all in one batch").
  int64_t batches_for(int64_t n) const {
    if (opts_.drop_last) return n / opts_.batch_size;
    return n == 0 ? 0 : 1 + (n - 1) / opts_.batch_size;
  }

  std::shared_ptr<D> dataset_;
  std::shared_ptr<const C> collate_;
  Options opts_;
  uint64_t epoch_ = 0;
  int64_t skip_ = 0;                    // batches of the next epoch already delivered before a resume
  std::shared_ptr<Progress> progress_;  // of the epoch begun last
  std::optional<cuda::Stream> side_;
  detail::RunnerSlot<Run> persistent_;
};

}  // namespace ember::data
