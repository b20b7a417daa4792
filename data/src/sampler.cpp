// defines: sequential_order and shuffled_order (see sampler.h for why the permutation is hand-rolled).
#include "ember/data/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <utility>

#include "bits.h"
#include "ember/core/error.h"

namespace ember::data {
namespace {

// One SplitMix64 step: spreads (seed, epoch) so that nearby seeds and epochs give unrelated streams.
uint64_t mix(uint64_t z) { return detail::splitmix64_finalize(z + 0x9E3779B97F4A7C15ULL); }

// Uniform in [0, bound) without modulo bias: reject draws from the incomplete top block.
uint64_t below(std::mt19937_64& g, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t r;
  do r = g();
  while (r >= limit);
  return r % bound;
}

// Uniform in [0, 1) with 53 random bits.
double unit(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * 0x1.0p-53; }

std::mt19937_64 epoch_generator(uint64_t seed, uint64_t epoch) { return std::mt19937_64(mix(mix(seed) ^ epoch)); }

}  // namespace

std::vector<int64_t> sequential_order(int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n < 0 ? 0 : n));
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<int64_t> order = sequential_order(n);
  std::mt19937_64 g = epoch_generator(seed, epoch);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[below(g, i)]);
  return order;
}

std::vector<int64_t> SequentialSampler::indices(int64_t n, uint64_t) const { return sequential_order(n); }

RandomSampler::RandomSampler(RandomSamplerOptions options) : opts_(options) {
  EMBER_CHECK_VALUE(options.num_samples >= 0, "RandomSampler: num_samples must be >= 0, got ", options.num_samples);
}

int64_t RandomSampler::size(int64_t n) const {
  if (opts_.num_samples == 0) return n;
  EMBER_CHECK_VALUE(opts_.replacement || opts_.num_samples <= n, "RandomSampler: num_samples = ", opts_.num_samples,
                    " without replacement needs a dataset of at least that many samples, got ", n);
  return opts_.num_samples;
}

std::vector<int64_t> RandomSampler::indices(int64_t n, uint64_t epoch) const {
  const int64_t k = size(n);
  if (!opts_.replacement) {
    std::vector<int64_t> order = shuffled_order(n, opts_.seed, epoch);
    order.resize(static_cast<size_t>(k));
    return order;
  }
  EMBER_CHECK_VALUE(n > 0 || k == 0, "RandomSampler: cannot draw ", k, " samples from an empty dataset");
  std::mt19937_64 g = epoch_generator(opts_.seed, epoch);
  std::vector<int64_t> out(static_cast<size_t>(k));
  for (int64_t& i : out) i = static_cast<int64_t>(below(g, static_cast<uint64_t>(n)));
  return out;
}

WeightedRandomSampler::WeightedRandomSampler(std::vector<double> weights, int64_t num_samples,
                                             WeightedRandomSamplerOptions options)
    : weights_(std::move(weights)), num_samples_(num_samples), opts_(options) {
  EMBER_CHECK_VALUE(num_samples > 0, "WeightedRandomSampler: num_samples must be > 0, got ", num_samples);
  double total = 0;
  int64_t positive = 0;
  cumulative_.reserve(weights_.size());
  for (size_t i = 0; i < weights_.size(); ++i) {
    const double w = weights_[i];
    EMBER_CHECK_VALUE(std::isfinite(w) && w >= 0, "WeightedRandomSampler: weight ", i, " is ", w,
                      " (weights must be finite and >= 0)");
    total += w;
    positive += w > 0;
    cumulative_.push_back(total);
  }
  EMBER_CHECK_VALUE(total > 0, "WeightedRandomSampler: the weights sum to 0 (", weights_.size(), " weights)");
  EMBER_CHECK_VALUE(options.replacement || num_samples <= positive, "WeightedRandomSampler: ", num_samples,
                    " samples without replacement, but only ", positive, " weights are positive");
}

int64_t WeightedRandomSampler::size(int64_t n) const {
  EMBER_CHECK_VALUE(n == static_cast<int64_t>(weights_.size()), "WeightedRandomSampler: ", weights_.size(),
                    " weights for a dataset of ", n, " samples (one weight per sample)");
  return num_samples_;
}

std::vector<int64_t> WeightedRandomSampler::indices(int64_t n, uint64_t epoch) const {
  (void)size(n);
  std::mt19937_64 g = epoch_generator(opts_.seed, epoch);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(num_samples_));
  if (opts_.replacement) {
    // Inverse CDF: the first cumulative weight above u * total (zero weights are never chosen).
    const double total = cumulative_.back();
    for (int64_t k = 0; k < num_samples_; ++k) {
      const double u = unit(g) * total;
      auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
      if (it == cumulative_.end()) --it;  // u rounded up to total
      while (weights_[static_cast<size_t>(it - cumulative_.begin())] == 0) --it;
      out.push_back(it - cumulative_.begin());
    }
    return out;
  }
  // Without replacement: the num_samples largest keys u^(1/w) (Efraimidis–Spirakis), compared as log(u) / w.
  std::vector<std::pair<double, int64_t>> keys;
  for (size_t i = 0; i < weights_.size(); ++i) {
    const double u = unit(g);
    if (weights_[i] > 0) keys.emplace_back(std::log(u > 0 ? u : 0x1.0p-60) / weights_[i], static_cast<int64_t>(i));
  }
  std::partial_sort(keys.begin(), keys.begin() + num_samples_, keys.end(), std::greater<>());
  for (int64_t k = 0; k < num_samples_; ++k) out.push_back(keys[static_cast<size_t>(k)].second);
  return out;
}

DistributedSampler::DistributedSampler(int rank, int world, DistributedSamplerOptions options)
    : rank_(rank), world_(world), opts_(options) {
  EMBER_CHECK_VALUE(world >= 1, "DistributedSampler: world size must be at least 1, got ", world);
  EMBER_CHECK_VALUE(rank >= 0 && rank < world, "DistributedSampler: rank ", rank, " is not in [0, ", world, ")");
}

int64_t DistributedSampler::size(int64_t n) const { return opts_.drop_last ? n / world_ : (n + world_ - 1) / world_; }

std::vector<int64_t> DistributedSampler::indices(int64_t n, uint64_t epoch) const {
  std::vector<int64_t> all = opts_.shuffle ? shuffled_order(n, opts_.seed, epoch) : sequential_order(n);
  const int64_t per_rank = size(n), total = per_rank * world_;
  // Pad by wrapping around (repeatedly, when n < world) or drop the tail.
  for (int64_t i = 0; static_cast<int64_t>(all.size()) < total && n > 0; ++i)
    all.push_back(all[static_cast<size_t>(i)]);
  all.resize(static_cast<size_t>(total));
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank));
  for (int64_t i = rank_; i < total; i += world_) mine.push_back(all[static_cast<size_t>(i)]);
  return mine;
}

}  // namespace ember::data
