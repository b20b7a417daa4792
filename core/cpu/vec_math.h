// defines: the CPU's helpers around scalar::exp_f32 (the branch-free float32 exp of
// ember/internal/scalar_math.h, shared with the CUDA kernels): exp_of for the floating types, exp_nonpositive for
// shifted scores, exp_shifted and exp_shifted_sum, vectorised passes over a row; row_max, row_sum and row_dot,
// reductions of a row in vector lanes (one vector register for float), and row_sum_double. Private to core/.
#pragma once
#include <cstdint>
#include <type_traits>
#include "isa.h"

#ifdef __AVX2__
#include <immintrin.h>

#include "lanes.h"
#endif

#include "ember/internal/scalar_math.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

// exp for the floating dtypes: exp_f32 for float (vectorises), std::exp for double
template <class T>
[[gnu::always_inline]] inline T exp_of(T v) {
  return scalar::fast_exp(v);
}

// exp(v) for v <= 0, as attention's softmax takes it (a score less its row's max or log-sum-exp): for float
// exp_nonpositive_f32, which gives 0 below -87 where exp_f32 would form a subnormal. Every masked (-inf) score is
// such a v, and forming a subnormal costs a microcode assist: with the causal mask, about an eighth of attention's
// forward time. v <= 0 holds at both call sites: the forward shifts by the row's max, and the backward by
// lse = max + log(sum) with sum >= 1 from scores computed exactly as the forward's (exp_nonpositive_f32 is still
// exp up to v = 88, so a rounding above 0 would do no harm). A clamp here cost 6% of the forward; NaN stays NaN.
// (softmax itself keeps exp_of: its results below 1e-38 are the subnormals PyTorch and our CUDA kernel give.)
template <class T>
[[gnu::always_inline]] inline T exp_nonpositive(T v) {
  if constexpr (std::is_same_v<T, float>) return scalar::exp_nonpositive_f32(v);
  else return exp_of(v);
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

// x[0] + ... + x[n-1] in double (softmax's row sums, as the CUDA kernels'; conv2d's bias gradient), in four
// interleaved partial sums
template <class T>
inline double row_sum_double(const T* x, int64_t n) {
  double part[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j) part[j] += static_cast<double>(x[i + j]);
  for (; i < n; ++i) part[0] += static_cast<double>(x[i]);
  return (part[0] + part[1]) + (part[2] + part[3]);
}

// a[0] b[0] + ... + a[n-1] b[n-1], in kLanes interleaved partial sums
template <class T>
inline T row_dot(const T* a, const T* b, int64_t n) {
  T part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) part[j] += a[i + j] * b[i + j];
  for (; i < n; ++i) part[0] += a[i] * b[i];
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) part[j] += part[j + w];
  return part[0];
}

// The same reductions for float rows in one vector register, reduced across its lanes once per row, and a tail
// through a masked load: the loops above keep their partial results on the stack, GCC reduces them there one
// lane at a time (a chain of store-to-load forwards) and does not vectorise row_max's comparison at all; with
// attention's rows of 64 that took a third of its forward pass. Written once over `rowvec`, the few vector
// operations they need in this variant's width.
#if defined(__AVX512F__)
#define EMBER_ROWVEC 1
namespace rowvec {
using V = __m512;
inline constexpr int64_t kW = 16;
inline V load(const float* p) { return _mm512_loadu_ps(p); }
inline V tail(const float* p, int64_t n, V fill) {  // p[0, n) over fill, n < kW
  return _mm512_mask_loadu_ps(fill, static_cast<__mmask16>((1u << n) - 1), p);
}
inline V set1(float v) { return _mm512_set1_ps(v); }
inline V max(V a, V b) { return _mm512_max_ps(a, b); }  // b where a is NaN
inline V add(V a, V b) { return _mm512_add_ps(a, b); }
inline V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline float lanes_max(V v) { return _mm512_reduce_max_ps(v); }
inline float lanes_sum(V v) { return _mm512_reduce_add_ps(v); }
// float lanes widened to double and added into two double vectors (lo, hi halves)
struct D2 {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  void add(V v) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  }
  double sum() const { return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi)); }
};
}  // namespace rowvec
#elif defined(__AVX2__) && defined(__FMA__)
#define EMBER_ROWVEC 1
namespace rowvec {
using V = __m256;
inline constexpr int64_t kW = 8;
inline V load(const float* p) { return _mm256_loadu_ps(p); }
inline V tail(const float* p, int64_t n, V fill) {  // p[0, n) over fill, n < kW
  const __m256i in = lanes::first(n);
  return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, in), _mm256_castsi256_ps(in));
}
inline V set1(float v) { return _mm256_set1_ps(v); }
inline V max(V a, V b) { return _mm256_max_ps(a, b); }  // b where a is NaN
inline V add(V a, V b) { return _mm256_add_ps(a, b); }
inline V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline float lanes_max(V v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
inline float lanes_sum(V v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
struct D2 {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  void add(V v) {
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  double sum() const {
    const __m256d s = _mm256_add_pd(lo, hi);
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
  }
};
}  // namespace rowvec
#endif

#ifdef EMBER_ROWVEC
inline float row_max(const float* x, int64_t n, float init) {
  using namespace rowvec;
  V m = set1(init);  // max(v, m) is m where v is NaN: NaNs are skipped as above
  int64_t i = 0;
  for (; i + kW <= n; i += kW) m = max(load(x + i), m);
  if (i < n) m = max(tail(x + i, n - i, m), m);
  return lanes_max(m);
}
inline float row_sum(const float* x, int64_t n) {
  using namespace rowvec;
  V s = set1(0.f);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) s = add(s, load(x + i));
  if (i < n) s = add(s, tail(x + i, n - i, set1(0.f)));
  return lanes_sum(s);
}
inline float row_dot(const float* a, const float* b, int64_t n) {
  using namespace rowvec;
  V s = set1(0.f);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) s = fma(load(a + i), load(b + i), s);
  if (i < n) s = fma(tail(a + i, n - i, set1(0.f)), tail(b + i, n - i, set1(0.f)), s);
  return lanes_sum(s);
}
// float rows summed in double lanes (softmax: 96-wide rows of logits took ~4x LayerNorm's time per element with
// the scalar four-way sum and max; conv2d's bias gradient sums each channel of gy with it)
inline double row_sum_double(const float* x, int64_t n) {
  using namespace rowvec;
  D2 s, t;  // four independent chains of double adds
  int64_t i = 0;
  for (; i + 2 * kW <= n; i += 2 * kW) {
    s.add(load(x + i));
    t.add(load(x + i + kW));
  }
  if (i + kW <= n) s.add(load(x + i)), i += kW;
  if (i < n) t.add(tail(x + i, n - i, set1(0.f)));
  return s.sum() + t.sum();
}
#undef EMBER_ROWVEC
#endif

// x[i] = exp(x[i] - shift) in place, returning their sum
template <class T>
inline T exp_shifted_sum(T* x, T shift, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = exp_nonpositive(x[i] - shift);
  return row_sum(x, n);
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
