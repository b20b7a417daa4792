// defines: the CPU's helpers around scalar::exp_f32 (the branch-free float32 exp of
// ember/internal/scalar_math.h, shared with the CUDA kernels): exp_of for the floating types and exp_shifted, a
// vectorised pass over a row; row_max and row_sum, reductions of a row in vector lanes. Private to core/.
#pragma once
#include <cstdint>
#include "isa.h"

#include "ember/internal/scalar_math.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

// exp for the floating dtypes: exp_f32 for float (vectorises), std::exp for double
template <class T>
[[gnu::always_inline]] inline T exp_of(T v) {
  return scalar::fast_exp(v);
}

// out[i] = exp(x[i] - shift) for i in [0, n): one vectorised pass for float
template <class T>
inline void exp_shifted(const T* __restrict x, T shift, T* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = exp_of(x[i] - shift);
}

// The reductions below keep kLanes partial results, one per vector lane, so that the compiler vectorises them
// without -ffast-math: a plain `m = max(m, x[i])` loop is one scalar dependency chain (attention's online softmax
// spent 40% of its forward time in one, 4 cycles an element).
inline constexpr int kLanes = 16;

// max(init, x[0], ..., x[n-1]) (x > m ? x : m, so a NaN in x is skipped, as before)
template <class T>
inline T row_max(const T* x, int64_t n, T init) {
  T part[kLanes];
  for (T& v : part) v = init;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) part[j] = x[i + j] > part[j] ? x[i + j] : part[j];
  for (; i < n; ++i) part[0] = x[i] > part[0] ? x[i] : part[0];
  for (int w = kLanes / 2; w > 0; w /= 2)  // pairwise: vector halves, not a chain of 16 dependent steps per row
    for (int j = 0; j < w; ++j) part[j] = part[j + w] > part[j] ? part[j + w] : part[j];
  return part[0];
}

// x[0] + ... + x[n-1], summed in kLanes interleaved partial sums
template <class T>
inline T row_sum(const T* x, int64_t n) {
  T part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) part[j] += x[i + j];
  for (; i < n; ++i) part[0] += x[i];
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) part[j] += part[j + w];
  return part[0];
}

// x[i] = exp(x[i] - shift) in place, returning their sum
template <class T>
inline T exp_shifted_sum(T* x, T shift, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = exp_of(x[i] - shift);
  return row_sum(x, n);
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
