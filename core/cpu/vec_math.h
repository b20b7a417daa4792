// defines: exp_f32, a float32 exp written with arithmetic and bit operations only (no branches, no libm call),
// so that loops calling it vectorise (8 lanes with AVX2) where std::exp stays a scalar call per element.
// Private to core/. Accuracy: within 2 ulp of the correctly rounded result over the whole float range
// (tests/core/test_elementwise.cpp sweeps it), including subnormal results, 0 below, inf above, NaN through.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace ember::cpu {

// exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2] (ln 2 in two parts so that
// n ln 2 is exact enough), exp(r) by a degree-6 polynomial (Cephes' expf coefficients). 2^n is applied as two
// powers of two, 2^(n - n/2) * 2^(n/2), each a normal float for n in [-150, 129]: that way results in the
// subnormal range round correctly and results past FLT_MAX overflow to inf instead of wrapping the exponent.
[[gnu::always_inline]] inline float exp_f32(float x) {
  // clamp (written so that NaN survives to the end: comparisons with NaN are false)
  float v = x > 89.f ? 89.f : x;
  v = v < -104.f ? -104.f : v;
  const float n = (v * 1.44269504088896341f + 12582912.f) - 12582912.f;  // round to nearest: 1.5 * 2^23 trick
  float r = v - n * 0.693359375f;                                          // ln 2, high part (exact in float)
  r = r - n * -2.12194440e-4f;                                             // ln 2, low part
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = r * r * p + r + 1.f;
  const int32_t ni = static_cast<int32_t>(n), h = ni / 2;
  const float s1 = std::bit_cast<float>((h + 127) << 23), s2 = std::bit_cast<float>((ni - h + 127) << 23);
  const float y = e * s1 * s2;
  return x != x ? x : y;
}

// exp for the floating dtypes: exp_f32 for float, std::exp for double
template <class T>
[[gnu::always_inline]] inline T exp_of(T v) {
  if constexpr (std::is_same_v<T, float>) return exp_f32(v);
  else return std::exp(v);
}

// out[i] = exp(x[i] - shift) for i in [0, n): one vectorised pass for float
template <class T>
inline void exp_shifted(const T* __restrict x, T shift, T* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = exp_of(x[i] - shift);
}

}  // namespace ember::cpu
