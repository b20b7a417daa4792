// defines: the DataLoader's epoch plan (which samples each batch holds) and its worker threads, BatchPool, behind a
// small non-template interface (data/src/batch_pool.cpp): the template loader (dataloader.h) keeps only the glue
// that knows the dataset's and the batch's types, and no thread lives in a public template header.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace ember::data::detail {

// One epoch's order of samples, cut into batches.
struct EpochPlan {
  std::vector<int64_t> order;  // sample indices, in the order they are delivered (from first_position on)
  int64_t num_batches = 0, batch_size = 1;
  uint64_t epoch = 0, seed = 0;
  int64_t first_position = 0;  // of order[0] in the epoch's full order (a resumed epoch starts later)

  // What building batch k takes.
  struct Job {
    int64_t index = 0;
    std::vector<int64_t> samples;
    uint64_t epoch = 0, seed = 0;
    int64_t position = 0;  // of its first sample in the epoch's full order
  };
  Job job(int64_t k) const;
};

// Worker threads that build the current epoch's batches in a window of `capacity` batches ahead of the consumer and
// hand them back in order. A batch is built by `build` (the loader's, which knows its type) and carried type-erased.
// Whatever build throws on a worker is rethrown by the take() that would have returned that batch.
class BatchPool {
 public:
  using Erased = std::shared_ptr<void>;
  using Build = std::function<Erased(const EpochPlan::Job&)>;

  BatchPool(int workers, int64_t capacity, Build build);
  BatchPool(const BatchPool&) = delete;
  BatchPool& operator=(const BatchPool&) = delete;
  // Stops and joins the workers; a worker busy building a batch finishes it first.
  ~BatchPool();

  // Begins an epoch; an unfinished earlier one is abandoned (its batches are dropped).
  void start(EpochPlan plan);
  // The next batch of the current epoch, in order (waits for it).
  Erased take();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::data::detail
