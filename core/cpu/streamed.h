// defines: streamed, a loop over [0, n) in blocks that each first ask for the cache lines some elements ahead, for
// the CPU passes whose operands come from L3 or memory (elementwise ops over more than 4 MiB, the fused optimisers'
// updates), where the hardware prefetchers alone leave them 10-25% slower. Private to core/cpu.
#pragma once
#include <algorithm>
#include <cstdint>

#include "isa.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

// The cache lines of a[k] for k in [k0, k1), asked for reading (ForWrite 0) or writing (1).
template <int ForWrite, class T>
[[gnu::always_inline]] inline void fetch_lines(const T* a, int64_t k0, int64_t k1) {
  for (int64_t k = k0; k < k1; k += static_cast<int64_t>(64 / sizeof(T))) __builtin_prefetch(a + k, ForWrite);
}

// body(i0, i1) over [0, n) in blocks of Block elements, each after asking for the lines Ahead elements on (never
// past n) of `out`, for writing, and of each input, for reading.
template <int64_t Block, int64_t Ahead, class Body, class Out, class... In>
[[gnu::always_inline]] inline void streamed(int64_t n, const Body& body, Out* out, const In*... in) {
  for (int64_t i0 = 0; i0 < n; i0 += Block) {
    const int64_t i1 = std::min(n, i0 + Block), f0 = std::min(n, i0 + Ahead), f1 = std::min(n, i1 + Ahead);
    fetch_lines<1>(out, f0, f1);
    (fetch_lines<0>(in, f0, f1), ...);
    body(i0, i1);
  }
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
