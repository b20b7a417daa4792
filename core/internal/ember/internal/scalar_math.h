// defines: the per-element math of every elementwise op and reduction, written once for both
// devices: the CPU backend (core/cpu) and the CUDA kernels (cuda/src/kernels) call these same functions, so
// "the CUDA kernels mirror the CPU's semantics" is a fact of the build, not a promise. Value conversion between
// element types, wrapping integer arithmetic, NaN rules (relu, maximum/minimum, clamp, max/min reductions and
// argmax let NaN through), the exact-erf gelu and its gradient, integer powers, the branch-free float exp,
// the accumulators of reductions. The fused kernels' rules (batch norm, optimiser updates): scalar_fused.h.
//
// Plain C++17, every function `__host__ __device__` under nvcc and always inlined (the CPU's loops around these
// calls must still vectorise). Private to core/ and cuda/ (not installed).
//
// Types: C is a compute type: float, double, an integer type or bool. 16-bit floats never reach these
// functions except through convert(): each backend computes them in float (ReducedFloat says how to get there).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ember/core/op_list.h"

#if defined(__CUDACC__)
#define EMBER_HD __host__ __device__ __forceinline__
#else
#define EMBER_HD [[gnu::always_inline]] inline
#endif

namespace ember::scalar {

// --- 16-bit floats: a backend specialises ReducedFloat for its storage types (ember::Half on the CPU, __half
// in CUDA) before it converts values, with to_float / from_float (round to nearest even).
template <class T>
struct ReducedFloat : std::false_type {};
template <class T>
inline constexpr bool is_reduced_v = ReducedFloat<T>::value;

// The integer range a float saturates to (std::numeric_limits cannot be called in device code).
template <class T>
struct IntLimits;
template <>
struct IntLimits<int64_t> {
  static constexpr int64_t lowest = INT64_MIN, max = INT64_MAX;
};
template <>
struct IntLimits<int32_t> {
  static constexpr int32_t lowest = INT32_MIN, max = INT32_MAX;
};
template <>
struct IntLimits<uint8_t> {
  static constexpr uint8_t lowest = 0, max = UINT8_MAX;
};
template <>
struct IntLimits<bool> {
  static constexpr bool lowest = false, max = true;
};

// Value conversion between any two element types. 16-bit floats go through float; floating -> integer
// saturates and maps NaN to 0 (C++ leaves out-of-range float -> int casts undefined); x -> bool is x != 0.
template <class D, class S>
EMBER_HD D convert(S v) {
  if constexpr (std::is_same<D, S>::value) {
    return v;
  } else if constexpr (is_reduced_v<S>) {
    return convert<D>(ReducedFloat<S>::to_float(v));
  } else if constexpr (is_reduced_v<D>) {
    return ReducedFloat<D>::from_float(static_cast<float>(v));
  } else if constexpr (std::is_same<D, bool>::value) {
    return v != S(0);
  } else if constexpr (std::is_integral<D>::value && std::is_floating_point<S>::value) {
    if (v != v) return D(0);  // NaN
    if (v <= static_cast<S>(IntLimits<D>::lowest)) return IntLimits<D>::lowest;
    if (v >= static_cast<S>(IntLimits<D>::max)) return IntLimits<D>::max;
    return static_cast<D>(v);
  } else {
    return static_cast<D>(v);
  }
}

// --- predicates and integer arithmetic

template <class C>
EMBER_HD bool is_nan(C v) {
  if constexpr (std::is_floating_point<C>::value) return v != v;
  else return false;
}
// v < 0, spelled so that unsigned types and bool compile without a pointless-comparison warning.
template <class C>
EMBER_HD bool is_neg(C v) {
  if constexpr (std::is_unsigned<C>::value || std::is_same<C, bool>::value) return false;
  else return v < C(0);
}

// +, -, * and negation that wrap for signed integers (done in the unsigned type, whose overflow is defined), as
// PyTorch's do; plain for floats; bool goes through int and back (add is or, mul is and).
template <class C>
using unsigned_of = typename std::conditional<std::is_integral<C>::value && std::is_signed<C>::value,
                                              std::make_unsigned<C>, std::common_type<C>>::type::type;
template <class C>
EMBER_HD C wrap_add(C a, C b) {
  return static_cast<C>(static_cast<unsigned_of<C>>(a) + static_cast<unsigned_of<C>>(b));
}
template <class C>
EMBER_HD C wrap_sub(C a, C b) {
  return static_cast<C>(static_cast<unsigned_of<C>>(a) - static_cast<unsigned_of<C>>(b));
}
template <class C>
EMBER_HD C wrap_mul(C a, C b) {
  return static_cast<C>(static_cast<unsigned_of<C>>(a) * static_cast<unsigned_of<C>>(b));
}
template <class C>
EMBER_HD C wrap_neg(C a) {
  if constexpr (std::is_integral<C>::value && std::is_signed<C>::value) return wrap_sub(C(0), a);
  else return static_cast<C>(-a);  // -(+0.0) is -0.0, where 0 - 0.0 would be +0.0
}

// Integer power by squaring, wrapping; a negative exponent gives 0 except for bases 1 and -1 (as PyTorch).
template <class C>
EMBER_HD C int_pow(C x, C y) {
  if constexpr (std::is_same<C, bool>::value) {
    return x;  // not reached: pow on bool is refused by raw::binary
  } else {
    if (is_neg(y)) return static_cast<C>(x == C(1) ? 1 : (x == static_cast<C>(-1) ? ((-y) % 2 ? -1 : 1) : 0));
    C r = 1, base = x;
    for (C e = y; e > C(0); e = static_cast<C>(e / 2)) {
      if (e % 2) r = wrap_mul(r, base);
      base = wrap_mul(base, base);
    }
    return r;
  }
}

// --- floating functions in the compute type (no silent promotion of float to double)

#if defined(__CUDA_ARCH__)
EMBER_HD float m_sqrt(float v) { return ::sqrtf(v); }
EMBER_HD double m_sqrt(double v) { return ::sqrt(v); }
EMBER_HD float m_exp(float v) { return ::expf(v); }
EMBER_HD double m_exp(double v) { return ::exp(v); }
EMBER_HD float m_log(float v) { return ::logf(v); }
EMBER_HD double m_log(double v) { return ::log(v); }
EMBER_HD float m_log1p(float v) { return ::log1pf(v); }
EMBER_HD double m_log1p(double v) { return ::log1p(v); }
EMBER_HD float m_tanh(float v) { return ::tanhf(v); }
EMBER_HD double m_tanh(double v) { return ::tanh(v); }
EMBER_HD float m_sin(float v) { return ::sinf(v); }
EMBER_HD double m_sin(double v) { return ::sin(v); }
EMBER_HD float m_cos(float v) { return ::cosf(v); }
EMBER_HD double m_cos(double v) { return ::cos(v); }
EMBER_HD float m_erf(float v) { return ::erff(v); }
EMBER_HD double m_erf(double v) { return ::erf(v); }
EMBER_HD float m_pow(float a, float b) { return ::powf(a, b); }
EMBER_HD double m_pow(double a, double b) { return ::pow(a, b); }
EMBER_HD float m_fma(float a, float b, float c) { return ::fmaf(a, b, c); }
EMBER_HD float bits_to_float(int32_t i) { return __int_as_float(i); }
#else
EMBER_HD float m_sqrt(float v) { return std::sqrt(v); }
EMBER_HD double m_sqrt(double v) { return std::sqrt(v); }
EMBER_HD float m_exp(float v) { return std::exp(v); }
EMBER_HD double m_exp(double v) { return std::exp(v); }
EMBER_HD float m_log(float v) { return std::log(v); }
EMBER_HD double m_log(double v) { return std::log(v); }
EMBER_HD float m_log1p(float v) { return std::log1p(v); }
EMBER_HD double m_log1p(double v) { return std::log1p(v); }
EMBER_HD float m_tanh(float v) { return std::tanh(v); }
EMBER_HD double m_tanh(double v) { return std::tanh(v); }
EMBER_HD float m_sin(float v) { return std::sin(v); }
EMBER_HD double m_sin(double v) { return std::sin(v); }
EMBER_HD float m_cos(float v) { return std::cos(v); }
EMBER_HD double m_cos(double v) { return std::cos(v); }
EMBER_HD float m_erf(float v) { return std::erf(v); }
EMBER_HD double m_erf(double v) { return std::erf(v); }
EMBER_HD float m_pow(float a, float b) { return std::pow(a, b); }
EMBER_HD double m_pow(double a, double b) { return std::pow(a, b); }
// a * b + c rounded once. The float kernels below that have hand-vectorised twins (core/cpu/gelu_vec.h,
// vec_math.h) spell their FMAs out: the twins' bit-equality must not depend on whether the compiler contracts
// a * b + c (it does at -O2, not in the Debug + sanitizer build). GCC vectorises it as vfmadd with -mfma.
EMBER_HD float m_fma(float a, float b, float c) { return std::fma(a, b, c); }
EMBER_HD float bits_to_float(int32_t i) {
#if defined(__GNUC__) && !defined(__CUDACC__)
  return __builtin_bit_cast(float, i);
#else
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
#endif
}
#endif

// A float32 exp with arithmetic and bit operations only (no branches, no libm call), so that CPU loops calling
// it vectorise (8 lanes with AVX2) where std::exp stays a scalar call per element. Within 2 ulp of the correctly
// rounded result over the whole float range (tests/core/test_elementwise.cpp sweeps it), subnormal results
// included; 0 below, inf above, NaN through.
//
// exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2] (ln 2 in two parts so that
// n ln 2 is exact enough), exp(r) by a degree-6 polynomial (Cephes' expf coefficients). 2^n is applied as two
// powers of two, 2^(n - n/2) * 2^(n/2), each a normal float for n in [-150, 129]: that way results in the
// subnormal range round correctly and results past FLT_MAX overflow to inf instead of wrapping the exponent.
// The reduction and polynomial shared by exp_f32 and exp_nonpositive_f32: n = round(v / ln 2) and
// e = exp(v - n ln 2); how 2^n is applied is each caller's.
struct ExpReduced {
  float n, e;
};
EMBER_HD ExpReduced exp_reduce_f32(float v) {
  const float n = m_fma(v, 1.44269504088896341f, 12582912.f) - 12582912.f;  // round to nearest: 1.5 * 2^23 trick
  float r = m_fma(-n, 0.693359375f, v);                                      // ln 2, high part (exact in float)
  r = m_fma(-n, -2.12194440e-4f, r);                                         // ln 2, low part
  float p = 1.9875691500e-4f;
  p = m_fma(p, r, 1.3981999507e-3f);
  p = m_fma(p, r, 8.3334519073e-3f);
  p = m_fma(p, r, 4.1665795894e-2f);
  p = m_fma(p, r, 1.6666665459e-1f);
  p = m_fma(p, r, 5.0000001201e-1f);
  return {n, m_fma(r * r, p, r) + 1.f};
}
EMBER_HD float exp_f32(float x) {
  // clamp (written so that NaN survives to the end: comparisons with NaN are false)
  float v = x > 89.f ? 89.f : x;
  v = v < -104.f ? -104.f : v;
  const ExpReduced t = exp_reduce_f32(v);
  const int32_t ni = static_cast<int32_t>(t.n), h = ni / 2;
  const float s1 = bits_to_float((h + 127) << 23), s2 = bits_to_float((ni - h + 127) << 23);
  const float y = t.e * s1 * s2;
  return x != x ? x : y;
}
// exp(a) for a <= 0 in float32, for GELU (and the CPU attention's softmax, core/cpu/vec_math.h): exp_f32's reduction
// and polynomial with one power of two (0 for a below -87, where the result would be under about 1.6e-38, which GELU
// cannot tell from 0). Arguments above 0 are not expected.
EMBER_HD float exp_nonpositive_f32(float a) {
  const ExpReduced t = exp_reduce_f32(a < -87.f ? -87.f : a);
  const float y = t.e * bits_to_float((static_cast<int32_t>(t.n) + 127) << 23);
  return a < -87.f ? 0.f : y;
}

// GELU's Phi(x) (the normal CDF) and phi(x) (its density) in float32, branch-free so that CPU loops vectorise.
// With z = |x| / sqrt(2): erfc(z) = exp(-z^2) R(z), R a (3, 4) rational fitted to erfc(z) exp(z^2) on [0, 4]
// (relative error 6e-8 there); its degrees give it the true tail 1 / (sqrt(pi) z), so beyond 4 it stays within
// 6e-5 (z is clamped to 10 inside R, past the 9.33 where exp(-z^2) is 0). Phi(x) = erfc(z) / 2 for x < 0,
// else 1 - erfc(z) / 2: relative accuracy in the left tail, where 1 + erf(x / sqrt(2)) would cancel, and one
// exp serves both Phi and phi = exp(-x^2 / 2) / sqrt(2 pi). About 20 vector operations: GELU takes 2.5x less
// time than with an erf built on a full exp, at the same accuracy (tests/core/test_elementwise.cpp sweeps it).
// Returned as the factors r = R(z) / 2 and e = exp(-z^2), Phi(-|x|) = r e and phi(x) = e / sqrt(2 pi), so that
// gelu multiplies e in last: with products of e formed first, |x| in about [13.0, 13.2] made subnormal
// intermediates (Phi(-13) is 6e-39), and every vector holding such a value ran ~3.5x slower (microcode assists).
struct NormalTail {
  float r, e, z2;  // z2 = z^2
};
EMBER_HD NormalTail normal_tail_f32(float x) {
  const float z = (x < 0.f ? -x : x) * 0.70710678118654752f;
  const float zc = z > 10.f ? 10.f : z;
  float p = 0.07546200603f;
  p = m_fma(p, zc, 0.41252467036f);
  p = m_fma(p, zc, 0.93910908699f);
  p = m_fma(p, zc, 0.99999994040f);
  float q = 0.13384459913f;
  q = m_fma(q, zc, 0.72949087620f);
  q = m_fma(q, zc, 1.74548780918f);
  q = m_fma(q, zc, 2.06748414040f);
  q = m_fma(q, zc, 1.f);
  const float z2 = z * z;
  return {0.5f * p / q, exp_nonpositive_f32(-z2), z2};
}
// e as the left tail uses it: 0 past z^2 = 86, where x Phi(x) itself would be subnormal (below 2e-38; x < -13.1)
EMBER_HD float left_tail_e(const NormalTail& t) { return t.z2 > 86.f ? 0.f : t.e; }
// e as the right half uses it: 0 past z^2 = 40 (x > 8.9), where r e < 1e-18 leaves 1 - r e at 1
EMBER_HD float right_half_e(const NormalTail& t) { return t.z2 > 40.f ? 0.f : t.e; }

// GELU (exact form, as PyTorch's default: x Phi(x)) and its derivative Phi(x) + x phi(x), in the compute type:
// normal_tail_f32 for float, the math library's erf for double. gelu(-inf) and both infinities' derivatives
// are NaN (inf * 0), as PyTorch's.
template <class C>
EMBER_HD C gelu(C v) {
  if constexpr (std::is_same<C, float>::value) {
    const NormalTail t = normal_tail_f32(v);
    return v < 0.f ? (v * t.r) * left_tail_e(t) : v * m_fma(-t.r, right_half_e(t), 1.f);
  } else {
    return static_cast<C>(0.5) * v * (C(1) + m_erf(v * static_cast<C>(0.70710678118654752440)));
  }
}
template <class C>
EMBER_HD C gelu_grad(C v) {
  if constexpr (std::is_same<C, float>::value) {
    // Phi + x phi = e (r + x / sqrt(2 pi)) left of 0, 1 + e (x / sqrt(2 pi) - r) right of it
    const NormalTail t = normal_tail_f32(v);
    const float c = 0.39894228040143268f;  // 1 / sqrt(2 pi); x c is formed inside the FMAs
    return v < 0.f ? m_fma(v, c, t.r) * left_tail_e(t) : m_fma(right_half_e(t), m_fma(v, c, -t.r), 1.f);
  } else {
    const C cdf = static_cast<C>(0.5) * (C(1) + m_erf(v * static_cast<C>(0.70710678118654752440)));
    return cdf + v * m_exp(static_cast<C>(-0.5) * v * v) * static_cast<C>(0.39894228040143268);
  }
}

// GELU's tanh approximation, x/2 (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3) (PyTorch's
// approximate="tanh", GPT-2's "gelu_new"), and its derivative, computed as x sigmoid(2u) = x / (1 + exp(-2u)): the
// same function without 1 + tanh(u)'s cancellation left of 0 (the tanh form loses every digit there: past x ~ -9
// it gives 0 where the value is ~1e-30), and in float with one branch-free exp (exp_f32), so CPU loops vectorise
// (std::tanh stays a call per element). x -> -inf gives -0 then NaN at -inf (inf * 0), as PyTorch's.
template <class C>
EMBER_HD C gelu_tanh(C v) {
  const C w = static_cast<C>(2 * 0.79788456080286535588) * (v + static_cast<C>(0.044715) * v * v * v);  // 2u
  if constexpr (std::is_same<C, float>::value) return v / (1.f + exp_f32(-w));
  else return v / (C(1) + m_exp(-w));
}
// d/dx x s(w) = s + x s (1 - s) w', s = sigmoid(w), w = 2u, w' = 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <class C>
EMBER_HD C gelu_tanh_grad(C v) {
  constexpr double k2 = 2 * 0.79788456080286535588, c = 0.044715;
  const C x2 = v * v;
  const C w = static_cast<C>(k2) * (v + static_cast<C>(c) * x2 * v);
  C e;
  if constexpr (std::is_same<C, float>::value) e = exp_f32(-w);
  else e = m_exp(-w);
  const C s = C(1) / (C(1) + e);
  // s (1 - s) before w': for |x| past ~1e13 in float, x w' alone overflows while s (1 - s) is 0
  return s + v * (s * (C(1) - s)) * (static_cast<C>(k2) * (C(1) + static_cast<C>(3 * c) * x2));
}

// exp in the compute type: exp_f32 for float, the math library's for double.
template <class C>
EMBER_HD C fast_exp(C v) {
  if constexpr (std::is_same<C, float>::value) return exp_f32(v);
  else return m_exp(v);
}

template <class>
inline constexpr bool kMissingMath = false;

// --- unary ops: unary<Op>(v) in the compute type C. A float-only op (op_list.h) is called with float or double.
template <UnaryOp Op, class C>
EMBER_HD C unary(C v) {
  if constexpr (Op == UnaryOp::Neg) return wrap_neg(v);
  else if constexpr (Op == UnaryOp::Abs) return is_neg(v) ? wrap_neg(v) : v;
  // written so that NaN passes through, as PyTorch's relu (a NaN must not turn into a silent 0)
  else if constexpr (Op == UnaryOp::Relu) return is_neg(v) ? C(0) : v;
  else if constexpr (Op == UnaryOp::Sign) return static_cast<C>((C(0) < v) - is_neg(v));
  else if constexpr (Op == UnaryOp::Square) return wrap_mul(v, v);
  else if constexpr (Op == UnaryOp::Sqrt) return m_sqrt(v);
  else if constexpr (Op == UnaryOp::Exp) return fast_exp(v);
  else if constexpr (Op == UnaryOp::Log) return m_log(v);
  else if constexpr (Op == UnaryOp::Reciprocal) return C(1) / v;
  else if constexpr (Op == UnaryOp::Sigmoid) return C(1) / (C(1) + fast_exp(-v));
  else if constexpr (Op == UnaryOp::Tanh) return m_tanh(v);
  else if constexpr (Op == UnaryOp::Gelu) return gelu(v);
  else if constexpr (Op == UnaryOp::GeluGrad) return gelu_grad(v);
  else if constexpr (Op == UnaryOp::GeluTanh) return gelu_tanh(v);
  else if constexpr (Op == UnaryOp::GeluTanhGrad) return gelu_tanh_grad(v);
  // log(1 + e^x), as PyTorch's softplus (beta 1, threshold 20: x itself above it, where they agree in float64)
  else if constexpr (Op == UnaryOp::Softplus) return v > C(20) ? v : m_log1p(m_exp(v));
  // the math library's log1p: exact for small x, where log(1 + x) would round 1 + x first
  else if constexpr (Op == UnaryOp::Log1p) return m_log1p(v);
  else if constexpr (Op == UnaryOp::Sin) return m_sin(v);
  else if constexpr (Op == UnaryOp::Cos) return m_cos(v);
  // x tanh(softplus(x)), softplus with the threshold above (as PyTorch's mish)
  else if constexpr (Op == UnaryOp::Mish) return v * m_tanh(v > C(20) ? v : m_log1p(m_exp(v)));
  // x relu6(x + 3) / 6, written so that NaN passes through
  else if constexpr (Op == UnaryOp::Hardswish) {
    const C r = v + C(3);
    return v * (r < C(0) ? C(0) : (r > C(6) ? C(6) : r)) / C(6);
  } else {
    static_assert(kMissingMath<C>, "scalar_math.h: add the math of this unary op");
    return v;
  }
}

// True when unary<Op> is defined for C (float-only ops on integer types are not).
template <UnaryOp Op, class C>
inline constexpr bool kUnaryDefined = !is_float_op(Op) || std::is_floating_point<C>::value;

// True when binary<Op> is defined for C: float-only ops (integer division, gelu_backward) never reach a kernel
// with integers (raw::binary computes them in float32, as PyTorch's true division).
template <BinaryOp Op, class C>
inline constexpr bool kBinaryDefined = !is_float_op(Op) || std::is_floating_point<C>::value;

// --- binary ops: binary<Op>(x, y) in the compute type C; C for arithmetic, bool for comparisons.
template <BinaryOp Op, class C>
EMBER_HD auto binary(C x, C y) {
  if constexpr (Op == BinaryOp::Add) return wrap_add(x, y);
  else if constexpr (Op == BinaryOp::Sub) return wrap_sub(x, y);
  else if constexpr (Op == BinaryOp::Mul) return wrap_mul(x, y);
  else if constexpr (Op == BinaryOp::Div) {
    static_assert(kBinaryDefined<Op, C>, "integer division is computed in float32 (raw::binary)");
    return x / y;
  } else if constexpr (Op == BinaryOp::Pow) {
    if constexpr (std::is_floating_point<C>::value) return m_pow(x, y);
    else return int_pow(x, y);
  }
  // maximum / minimum propagate NaN, as PyTorch's do
  else if constexpr (Op == BinaryOp::Maximum)
    return is_nan(x) || is_nan(y) ? static_cast<C>(x + y) : (x > y ? x : y);
  else if constexpr (Op == BinaryOp::Minimum) return is_nan(x) || is_nan(y) ? static_cast<C>(x + y) : (x < y ? x : y);
  // x: the gradient, y: relu's output (>= 0, or NaN, which gets no gradient, as y > 0 is false)
  else if constexpr (Op == BinaryOp::ReluBackward) return y > C(0) ? x : C(0);
  // x: the gradient, y: gelu's input
  else if constexpr (Op == BinaryOp::GeluBackward) {
    static_assert(kBinaryDefined<Op, C>, "gelu_backward of integers is computed in float32 (raw::binary)");
    return x * gelu_grad(y);
  } else if constexpr (Op == BinaryOp::GeluTanhBackward) {
    static_assert(kBinaryDefined<Op, C>, "gelu_tanh_backward of integers is computed in float32 (raw::binary)");
    return x * gelu_tanh_grad(y);
  } else if constexpr (Op == BinaryOp::Eq) return x == y;
  else if constexpr (Op == BinaryOp::Ne) return x != y;
  else if constexpr (Op == BinaryOp::Lt) return x < y;
  else if constexpr (Op == BinaryOp::Le) return x <= y;
  else if constexpr (Op == BinaryOp::Gt) return x > y;
  else if constexpr (Op == BinaryOp::Ge) return x >= y;
  else {
    static_assert(kMissingMath<C>, "scalar_math.h: add the math of this binary op");
    return x;
  }
}

// clamp(v, lo, hi) with the bounds already in the compute type; NaN passes through.
template <class C>
EMBER_HD C clamp(C v, C lo, C hi) {
  return is_nan(v) ? v : (v < lo ? lo : (v > hi ? hi : v));
}

// --- softmax: the row max starts at -inf and lets a later NaN be skipped exactly as std::max(m, v) does; an
// all -inf row is shifted by 0 instead (avoids (-inf) - (-inf)); then exp(x - shift) with fast_exp.
template <class C>
EMBER_HD C softmax_max_start() {
  if constexpr (std::is_same<C, float>::value) return -__builtin_huge_valf();
  else return -__builtin_huge_val();
}
template <class C>
EMBER_HD C softmax_max_step(C m, C v) {
  return (m < v) ? v : m;
}
template <class C>
EMBER_HD C softmax_shift(C m) {
  return m == softmax_max_start<C>() ? C(0) : m;
}

// --- reductions: the accumulator of Op over values of compute type C, its start value and how two combine.
// Sums and products accumulate in double (floats) or uint64 (integers and bool, wrapping modulo 2^64 as
// PyTorch's sum); max and min in C, starting at -inf / +inf for floats (so an all -inf max stays -inf), and let
// NaN through.
template <ReduceOp Op, class C>
struct ReduceMath {
  static constexpr bool kSumLike = Op == ReduceOp::Sum || Op == ReduceOp::Prod;
  using Acc = typename std::conditional<
      kSumLike, typename std::conditional<std::is_floating_point<C>::value, double, uint64_t>::type, C>::type;
  static_assert(!is_index_reduction(Op), "argmax / argmin use arg_better");

  EMBER_HD static Acc init() {
    if constexpr (Op == ReduceOp::Sum) return Acc(0);
    else if constexpr (Op == ReduceOp::Prod) return Acc(1);
    else if constexpr (std::is_same<C, float>::value)
      return Op == ReduceOp::Max ? -__builtin_huge_valf() : __builtin_huge_valf();
    else if constexpr (std::is_same<C, double>::value)
      return Op == ReduceOp::Max ? -__builtin_huge_val() : __builtin_huge_val();
    else return Op == ReduceOp::Max ? IntLimits<C>::lowest : IntLimits<C>::max;
  }
  EMBER_HD static Acc combine(Acc acc, Acc v) {
    if constexpr (Op == ReduceOp::Sum) return acc + v;
    else if constexpr (Op == ReduceOp::Prod) return acc * v;
    else if (is_nan(acc) || is_nan(v)) return is_nan(acc) ? acc : v;
    else if constexpr (Op == ReduceOp::Max) return v > acc ? v : acc;
    else return v < acc ? v : acc;
  }
  EMBER_HD static Acc step(Acc acc, C v) { return combine(acc, static_cast<Acc>(v)); }
};

// argmax / argmin along a walk in order: whether a later value v takes the place of the best so far. The first
// extreme wins (ties keep the earlier one); NaN counts as the extreme, and the first NaN is never replaced.
template <bool IsMax, class C>
EMBER_HD bool arg_better(C v, C best) {
  if (is_nan(best)) return false;
  if (is_nan(v)) return true;
  return IsMax ? v > best : v < best;
}

}  // namespace ember::scalar
