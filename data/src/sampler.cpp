// defines: sequential_order and shuffled_order (see sampler.h for why the permutation is hand-rolled).
#include "ember/data/sampler.h"

#include <numeric>
#include <random>
#include <utility>

#include "ember/core/error.h"

namespace ember::data {
namespace {

// SplitMix64's finaliser: spreads (seed, epoch) so that nearby seeds and epochs give unrelated streams.
uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without modulo bias: reject draws from the incomplete top block.
uint64_t below(std::mt19937_64& g, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t r;
  do r = g();
  while (r >= limit);
  return r % bound;
}

}  // namespace

std::vector<int64_t> sequential_order(int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n < 0 ? 0 : n));
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<int64_t> order = sequential_order(n);
  std::mt19937_64 g(mix(mix(seed) ^ epoch));
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[below(g, i)]);
  return order;
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
