// defines: the elementwise compute kernels and their launchers (launch.h): unary ops, clamp, binary ops
// (arithmetic and comparisons) and where. One kernel per element type takes the op as an argument: the
// switch is uniform across a launch (no divergence) and keeps the instantiations to a few dozen. Contiguous
// operands (a merged layout of one dim, stride 1, or 0 for a broadcast scalar) take a vectorised path with
// 16-byte loads (llm.c's Packed128); everything else the strided path. Semantics mirror
// core/cpu/elementwise.cpp: integers wrap, float16/bfloat16 compute in float, maximum/minimum/clamp
// propagate NaN, gelu is the exact erf form.
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};
// Elements of T per 16-byte load.
template <class T>
__host__ __device__ constexpr int pack_size() {
  return 16 / static_cast<int>(sizeof(T));
}

bool aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0; }

// Strides of an operand as the vectorised path sees it: 1 (contiguous), 0 (one broadcast value) or neither.
enum class Flat { Contiguous, Scalar, No };
Flat flat(const Operand& o, const Layout& l) {
  if (l.ndim == 0) return Flat::Contiguous;  // one element
  if (l.ndim > 1) return Flat::No;
  return o.strides[0] == 1 ? Flat::Contiguous : (o.strides[0] == 0 ? Flat::Scalar : Flat::No);
}

// --- math in the compute type (float overloads spelled out: no silent promotion to double)
__device__ inline float m_sqrt(float v) { return sqrtf(v); }
__device__ inline double m_sqrt(double v) { return sqrt(v); }
__device__ inline float m_exp(float v) { return expf(v); }
__device__ inline double m_exp(double v) { return exp(v); }
__device__ inline float m_log(float v) { return logf(v); }
__device__ inline double m_log(double v) { return log(v); }
__device__ inline float m_tanh(float v) { return tanhf(v); }
__device__ inline double m_tanh(double v) { return tanh(v); }
__device__ inline float m_erf(float v) { return erff(v); }
__device__ inline double m_erf(double v) { return erf(v); }
__device__ inline float m_pow(float a, float b) { return powf(a, b); }
__device__ inline double m_pow(double a, double b) { return pow(a, b); }

template <class C>
__device__ inline C unary_op(UnaryKind op, C v) {
  switch (op) {
    case UnaryKind::Neg: return wrap_neg(v);
    case UnaryKind::Abs: return is_neg(v) ? wrap_neg(v) : v;
    case UnaryKind::Relu: return is_neg(v) ? C(0) : v;  // NaN passes through, as PyTorch's relu
    case UnaryKind::Sign: return static_cast<C>((C(0) < v) - is_neg(v));
    case UnaryKind::Square: return wrap_mul(v, v);
    default: break;
  }
  if constexpr (std::is_floating_point<C>::value) {
    constexpr C kSqrt1_2 = static_cast<C>(0.70710678118654752440);
    switch (op) {
      case UnaryKind::Sqrt: return m_sqrt(v);
      case UnaryKind::Exp: return m_exp(v);
      case UnaryKind::Log: return m_log(v);
      case UnaryKind::Reciprocal: return C(1) / v;
      case UnaryKind::Sigmoid: return C(1) / (C(1) + m_exp(-v));
      case UnaryKind::Tanh: return m_tanh(v);
      case UnaryKind::Gelu: return static_cast<C>(0.5) * v * (C(1) + m_erf(v * kSqrt1_2));
      case UnaryKind::GeluGrad: {  // Phi(x) + x * phi(x)
        const C cdf = static_cast<C>(0.5) * (C(1) + m_erf(v * kSqrt1_2));
        const C pdf = m_exp(static_cast<C>(-0.5) * v * v) * static_cast<C>(0.3989422804014327);
        return cdf + v * pdf;
      }
      default: break;
    }
  }
  return v;  // not reached: the backend sends floating ops floating types only
}

// Integer power by squaring; negative exponents give 0 except for bases 1 and -1 (as the CPU backend).
template <class C>
__device__ inline C int_pow(C x, C y) {
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

template <class C>
__device__ inline C arith_op(BinaryKind op, C x, C y) {
  switch (op) {
    case BinaryKind::Add: return wrap_add(x, y);
    case BinaryKind::Sub: return wrap_sub(x, y);
    case BinaryKind::Mul: return wrap_mul(x, y);
    case BinaryKind::Div:
      if constexpr (std::is_floating_point<C>::value) return x / y;
      else return C(0);  // not reached: integer division is promoted to float32 by raw::binary
    case BinaryKind::Pow:
      if constexpr (std::is_floating_point<C>::value) return m_pow(x, y);
      else return int_pow(x, y);
    case BinaryKind::Maximum:
      if (is_nan(x) || is_nan(y)) return x + y;
      return x > y ? x : y;
    case BinaryKind::Minimum:
      if (is_nan(x) || is_nan(y)) return x + y;
      return x < y ? x : y;
    case BinaryKind::ReluBackward: return y > C(0) ? x : C(0);  // x: gradient, y: relu's output
    default: return C(0);  // comparisons go through cmp_op
  }
}

template <class C>
__device__ inline bool cmp_op(BinaryKind op, C x, C y) {
  switch (op) {
    case BinaryKind::Eq: return x == y;
    case BinaryKind::Ne: return x != y;
    case BinaryKind::Lt: return x < y;
    case BinaryKind::Le: return x <= y;
    case BinaryKind::Gt: return x > y;
    case BinaryKind::Ge: return x >= y;
    default: return false;
  }
}

// R is T for arithmetic, bool for comparisons.
template <class R, class T>
__device__ inline R binary_op(BinaryKind op, T a, T b) {
  if constexpr (std::is_same<R, bool>::value && !std::is_same<T, bool>::value) {
    return cmp_op(op, load_c(a), load_c(b));
  } else if constexpr (std::is_same<T, bool>::value) {
    // bool -> bool: arithmetic (add = or, mul = and, max, min) or a comparison, told apart by the op
    return op >= BinaryKind::Eq ? cmp_op(op, a, b) : arith_op(op, a, b);
  } else {
    return store_c<T>(arith_op(op, load_c(a), load_c(b)));
  }
}

// --- kernels

template <class T>
__global__ void unary_vec_kernel(UnaryKind op, T* out, const T* x, int64_t n) {
  constexpr int N = pack_size<T>();
  const int64_t npack = n / N;
  EMBER_KERNEL_LOOP(p, npack) {
    const Pack<T, N> in = reinterpret_cast<const Pack<T, N>*>(x)[p];
    Pack<T, N> o;
#pragma unroll
    for (int j = 0; j < N; ++j) o.v[j] = store_c<T>(unary_op(op, load_c(in.v[j])));
    reinterpret_cast<Pack<T, N>*>(out)[p] = o;
  }
  const int64_t done = npack * N;
  EMBER_KERNEL_LOOP(i, n - done) out[done + i] = store_c<T>(unary_op(op, load_c(x[done + i])));
}

template <class T>
__global__ void unary_strided_kernel(UnaryKind op, Operand out, Operand x, Layout layout) {
  T* o = static_cast<T*>(out.data);
  const T* in = static_cast<const T*>(x.data);
  EMBER_KERNEL_LOOP(i, layout.numel) {
    o[element_offset(i, layout, out.strides)] = store_c<T>(unary_op(op, load_c(in[element_offset(i, layout, x.strides)])));
  }
}

template <class T>
__global__ void clamp_kernel(Operand out, Operand x, double lo, double hi, Layout layout) {
  using C = compute_t<T>;
  const C l = convert<C>(lo), h = convert<C>(hi);  // saturating, as the CPU backend's bounds
  T* o = static_cast<T*>(out.data);
  const T* in = static_cast<const T*>(x.data);
  EMBER_KERNEL_LOOP(i, layout.numel) {
    const C v = load_c(in[element_offset(i, layout, x.strides)]);
    o[element_offset(i, layout, out.strides)] = store_c<T>(is_nan(v) ? v : (v < l ? l : (v > h ? h : v)));
  }
}

// a_scalar / b_scalar: that input is one broadcast value (stride 0), read once.
template <class R, class T>
__global__ void binary_vec_kernel(BinaryKind op, R* out, const T* a, const T* b, bool a_scalar, bool b_scalar,
                                  int64_t n) {
  constexpr int N = pack_size<T>();
  const int64_t npack = n / N;
  EMBER_KERNEL_LOOP(p, npack) {
    Pack<T, N> x, y;
    if (a_scalar) {
#pragma unroll
      for (int j = 0; j < N; ++j) x.v[j] = a[0];
    } else {
      x = reinterpret_cast<const Pack<T, N>*>(a)[p];
    }
    if (b_scalar) {
#pragma unroll
      for (int j = 0; j < N; ++j) y.v[j] = b[0];
    } else {
      y = reinterpret_cast<const Pack<T, N>*>(b)[p];
    }
    Pack<R, N> o;
#pragma unroll
    for (int j = 0; j < N; ++j) o.v[j] = binary_op<R>(op, x.v[j], y.v[j]);
    reinterpret_cast<Pack<R, N>*>(out)[p] = o;
  }
  const int64_t done = npack * N;
  EMBER_KERNEL_LOOP(i, n - done) {
    const int64_t k = done + i;
    out[k] = binary_op<R>(op, a[a_scalar ? 0 : k], b[b_scalar ? 0 : k]);
  }
}

template <class R, class T>
__global__ void binary_strided_kernel(BinaryKind op, Operand out, Operand a, Operand b, Layout layout) {
  R* o = static_cast<R*>(out.data);
  const T* x = static_cast<const T*>(a.data);
  const T* y = static_cast<const T*>(b.data);
  EMBER_KERNEL_LOOP(i, layout.numel) {
    o[element_offset(i, layout, out.strides)] =
        binary_op<R>(op, x[element_offset(i, layout, a.strides)], y[element_offset(i, layout, b.strides)]);
  }
}

template <class T>
__global__ void where_kernel(Operand out, Operand cond, Operand a, Operand b, Layout layout) {
  T* o = static_cast<T*>(out.data);
  const bool* c = static_cast<const bool*>(cond.data);
  const T* x = static_cast<const T*>(a.data);
  const T* y = static_cast<const T*>(b.data);
  EMBER_KERNEL_LOOP(i, layout.numel) {
    const bool take_a = c[element_offset(i, layout, cond.strides)];
    o[element_offset(i, layout, out.strides)] =
        take_a ? x[element_offset(i, layout, a.strides)] : y[element_offset(i, layout, b.strides)];
  }
}

template <class R, class T>
void binary_typed(BinaryKind op, const Operand& out, const Operand& a, const Operand& b, const Layout& layout,
                  CUstream_st* stream) {
  constexpr int N = pack_size<T>();
  const Flat fo = flat(out, layout), fa = flat(a, layout), fb = flat(b, layout);
  const bool vec = fo == Flat::Contiguous && fa != Flat::No && fb != Flat::No && aligned(out.data, sizeof(R) * N) &&
                   (fa == Flat::Scalar || aligned(a.data, 16)) && (fb == Flat::Scalar || aligned(b.data, 16));
  if (vec) {
    binary_vec_kernel<R, T><<<grid_size(CEIL_DIV(layout.numel, N)), kBlockSize, 0, stream>>>(
        op, static_cast<R*>(out.data), static_cast<const T*>(a.data), static_cast<const T*>(b.data),
        fa == Flat::Scalar, fb == Flat::Scalar, layout.numel);
  } else {
    binary_strided_kernel<R, T><<<grid_size(layout.numel), kBlockSize, 0, stream>>>(op, out, a, b, layout);
  }
}

}  // namespace

void launch_unary(UnaryKind op, const Operand& out, const Operand& x, const Layout& layout, CUstream_st* stream) {
  if (layout.numel == 0) return;
  dispatch(out.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int N = pack_size<T>();
    if (flat(out, layout) == Flat::Contiguous && flat(x, layout) == Flat::Contiguous && aligned(out.data, 16) &&
        aligned(x.data, 16)) {
      unary_vec_kernel<T><<<grid_size(CEIL_DIV(layout.numel, N)), kBlockSize, 0, stream>>>(
          op, static_cast<T*>(out.data), static_cast<const T*>(x.data), layout.numel);
    } else {
      unary_strided_kernel<T><<<grid_size(layout.numel), kBlockSize, 0, stream>>>(op, out, x, layout);
    }
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_clamp(const Operand& out, const Operand& x, double lo, double hi, const Layout& layout,
                  CUstream_st* stream) {
  if (layout.numel == 0) return;
  dispatch(out.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    clamp_kernel<T><<<grid_size(layout.numel), kBlockSize, 0, stream>>>(out, x, lo, hi, layout);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_binary(BinaryKind op, const Operand& out, const Operand& a, const Operand& b, const Layout& layout,
                   CUstream_st* stream) {
  if (layout.numel == 0) return;
  const bool cmp = op >= BinaryKind::Eq;
  dispatch(a.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (cmp) binary_typed<bool, T>(op, out, a, b, layout, stream);
    else binary_typed<T, T>(op, out, a, b, layout, stream);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_where(const Operand& out, const Operand& cond, const Operand& a, const Operand& b, const Layout& layout,
                  CUstream_st* stream) {
  if (layout.numel == 0) return;
  dispatch(out.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    where_kernel<T><<<grid_size(layout.numel), kBlockSize, 0, stream>>>(out, cond, a, b, layout);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
