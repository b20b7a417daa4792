// defines: sequential_order and shuffled_order (see sampler.h for why the permutation is hand-rolled).
#include "ember/data/sampler.h"

#include <numeric>
#include <random>
#include <utility>

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

}  // namespace ember::data
