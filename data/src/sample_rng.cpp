// defines: SampleRng (SplitMix64) and the thread-local sample scope.
#include "ember/data/sample_rng.h"

#include <cmath>

#include "bits.h"
#include "ember/core/error.h"

namespace ember::data {
namespace {

uint64_t mix(uint64_t z) { return detail::splitmix64_finalize(z); }

struct Current {
  uint64_t seed = 0, epoch = 0;
  int64_t index = 0;
  bool active = false;
  uint64_t draws = 0;  // sample_rng calls in this scope so far
};
thread_local Current current;

}  // namespace

SampleRng::SampleRng(uint64_t seed, uint64_t epoch, int64_t index)
    // Each part goes through the mixer before the next is added, so (seed, epoch, index) triples do not collide
    // by simple sums.
    : state_(mix(mix(mix(seed ^ 0x9e3779b97f4a7c15ULL) + epoch) + static_cast<uint64_t>(index))) {}

uint64_t SampleRng::next_u64() {
  state_ += 0x9e3779b97f4a7c15ULL;
  return mix(state_);
}

double SampleRng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

int64_t SampleRng::randint(int64_t lo, int64_t hi) {
  EMBER_CHECK_VALUE(hi > lo, "SampleRng::randint: empty range [", lo, ", ", hi, ")");
  // Lemire's multiply-shift with rejection: unbiased for any range.
  const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);  // no signed overflow
  for (;;) {
    const unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * range;
    const auto low = static_cast<uint64_t>(m);
    if (low >= (0 - range) % range)
      return static_cast<int64_t>(static_cast<uint64_t>(lo) + static_cast<uint64_t>(m >> 64));
  }
}

bool SampleRng::bernoulli(double p) { return uniform() < p; }

double SampleRng::normal() {
  const double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]: log is finite
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

SampleRng sample_rng(int64_t index) {
  if (!current.active) return {0, 0, index};
  // The k-th call in a scope gets its own stream, so two transforms (or a nested Transformed and the dataset
  // under it) do not draw the same numbers; get(i) runs on one thread, in one order, so k is deterministic.
  SampleRng rng(current.seed, current.epoch, index);
  for (uint64_t k = 0; k < current.draws; ++k) (void)rng.next_u64();
  const uint64_t salt = rng.next_u64();
  ++current.draws;
  return {current.seed ^ salt, current.epoch, index};
}

namespace {
// The seed the streams of one scope are keyed by: the loader's, mixed with the position when there is one.
uint64_t scope_seed(uint64_t seed, int64_t position) {
  return position < 0 ? seed : seed ^ mix(static_cast<uint64_t>(position) + 0x632be59bd9b4e019ULL);
}
}  // namespace

SampleScope::SampleScope(uint64_t seed, uint64_t epoch, int64_t index, int64_t position)
    : prev_seed_(current.seed),
      prev_epoch_(current.epoch),
      prev_index_(current.index),
      prev_active_(current.active),
      prev_draws_(current.draws),
      // A key distinct from sample_rng's streams (the constant), from the same (seed, epoch, index).
      gen_(SampleRng(scope_seed(seed, position) ^ 0x5bd1e9955bd1e995ULL, epoch, index).next_u64()),
      use_(gen_) {
  current = {scope_seed(seed, position), epoch, index, true, 0};
}

SampleScope::~SampleScope() { current = {prev_seed_, prev_epoch_, prev_index_, prev_active_, prev_draws_}; }

}  // namespace ember::data
