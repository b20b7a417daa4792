// defines: the sample orders a DataLoader walks: sequential_order(n) and shuffled_order(n, seed, epoch), a
// permutation that depends only on (seed, epoch), never on threads or workers, and is the same on every
// platform (Fisher–Yates over std::mt19937_64, whose output the C++ standard fixes, with our own bounded draw,
// because std::uniform_int_distribution and std::shuffle differ between standard libraries); Sampler, an
// order a DataLoader takes instead of .shuffle (DataLoaderOptions::sampler): SequentialSampler, RandomSampler
// (with or without replacement), WeightedRandomSampler, and DistributedSampler, each rank's shard.
//
//   auto s = std::make_shared<data::WeightedRandomSampler>(weights, /*num_samples=*/10000);
//   data::DataLoader loader(ds, {.batch_size = 64, .sampler = s});
#pragma once
#include <cstdint>
#include <vector>

namespace ember::data {

// 0, 1, ..., n-1.
std::vector<int64_t> sequential_order(int64_t n);
// A permutation of 0..n-1; a different one for each (seed, epoch).
std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, uint64_t epoch);

// The sample order of an epoch over a dataset of n samples. Called on the DataLoader's thread at each begin().
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::vector<int64_t> indices(int64_t n, uint64_t epoch) const = 0;
  // indices(n, epoch).size(), without building them.
  virtual int64_t size(int64_t n) const = 0;
};

// 0, 1, ..., n-1 every epoch (what a loader does without .shuffle).
class SequentialSampler final : public Sampler {
 public:
  std::vector<int64_t> indices(int64_t n, uint64_t epoch) const override;
  int64_t size(int64_t n) const override { return n; }
};

struct RandomSamplerOptions {
  bool replacement = false;  // true: num_samples independent uniform draws
  int64_t num_samples = 0;   // 0: the dataset's size; without replacement at most that
  uint64_t seed = 0;
};
// A random order per (seed, epoch): a permutation (or its first num_samples), or draws with replacement.
class RandomSampler final : public Sampler {
 public:
  explicit RandomSampler(RandomSamplerOptions options = {});
  std::vector<int64_t> indices(int64_t n, uint64_t epoch) const override;
  int64_t size(int64_t n) const override;

 private:
  RandomSamplerOptions opts_;
};

struct WeightedRandomSamplerOptions {
  bool replacement = true;  // false: num_samples distinct indices (at most the number of positive weights)
  uint64_t seed = 0;
};
// num_samples indices, index i drawn with probability weights[i] / sum(weights) (PyTorch's
// WeightedRandomSampler): the usual fix for class imbalance. weights.size() must be the dataset's size.
class WeightedRandomSampler final : public Sampler {
 public:
  WeightedRandomSampler(std::vector<double> weights, int64_t num_samples, WeightedRandomSamplerOptions options = {});
  std::vector<int64_t> indices(int64_t n, uint64_t epoch) const override;
  int64_t size(int64_t n) const override;

 private:
  std::vector<double> weights_, cumulative_;
  int64_t num_samples_;
  WeightedRandomSamplerOptions opts_;
};

struct DistributedSamplerOptions {
  bool shuffle = true;  // the whole dataset is shuffled by (seed, epoch) — the same on every rank — then split
  uint64_t seed = 0;
  bool drop_last = false;  // false: pad with the first samples so every rank gets ceil(n / world); true: drop the
                           // tail so every rank gets floor(n / world)
};

// Rank `rank` of `world` gets every world-th sample of the epoch's order, starting at `rank`, so the ranks'
// shards are disjoint (up to the padding) and equal in size, as PyTorch's DistributedSampler.
//
//   data::DataLoader loader(ds, {.batch_size = 64, .sampler = std::make_shared<data::DistributedSampler>(
//                                    dist::rank(), dist::world_size(), data::DistributedSamplerOptions{.seed = 1})});
class DistributedSampler final : public Sampler {
 public:
  DistributedSampler(int rank, int world, DistributedSamplerOptions options = {});
  std::vector<int64_t> indices(int64_t n, uint64_t epoch) const override;
  int64_t size(int64_t n) const override;

 private:
  int rank_, world_;
  DistributedSamplerOptions opts_;
};

}  // namespace ember::data
