// defines: the CPU's helpers around scalar::exp_f32 (the branch-free float32 exp of
// ember/internal/scalar_math.h, shared with the CUDA kernels): exp_of for the floating types and exp_shifted, a
// vectorised pass over a row. Private to core/.
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

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
