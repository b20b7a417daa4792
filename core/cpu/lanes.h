// defines: the first n (<= 8) floats of a row as one AVX2 vector, loaded and stored with masks, so that a row's
// tail needs no scalar loop (the 2x2 max pool's rows, conv2d's padded copies). Private to core/.
#pragma once
#include <cstdint>

#include "isa.h"

#ifdef __AVX2__
#include <immintrin.h>

namespace ember::cpu::inline EMBER_CPU_ISA_NS::lanes {

inline __m256i first(int64_t n) {  // lanes [0, n) set
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline __m256 load(const float* p, int64_t n) { return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, first(n)); }
inline void store(float* p, int64_t n, __m256 v) {
  if (n >= 8) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, first(n), v);
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS::lanes
#endif
