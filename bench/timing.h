// defines: how the training benchmarks measure, shared by Ember's drivers and libtorch's (torch_train.cpp), so both
// frameworks are timed the same way. Standard C++ and POSIX only: libtorch's drivers include it without any of Ember.
#pragma once
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace bench {

// This process's peak resident set, MiB (ru_maxrss is in KiB on Linux).
inline double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

// Samples per second of `step(batch_index)`: median of 5 windows of 0.6 s after 5 warm-up steps (caches, the
// allocator, packing buffers), cycling through `nbatches` batches.
template <class Step>
double throughput(int64_t batch, int64_t nbatches, Step&& step) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 5; ++i) step(i % nbatches);
  std::vector<double> rates;
  int64_t k = 0;
  for (int w = 0; w < 5; ++w) {
    const auto t0 = Clock::now();
    int64_t n = 0;
    while (std::chrono::duration<double>(Clock::now() - t0).count() < 0.6) {
      step(k++ % nbatches);
      ++n;
    }
    rates.push_back(static_cast<double>(n * batch) / std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(rates.begin(), rates.end());
  return rates[2];
}

}  // namespace bench
