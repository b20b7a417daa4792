// defines: the elementwise compute kernels and their launchers (launch.h): unary ops, clamp, binary ops
// (arithmetic and comparisons) and where. One kernel per element type takes the op as an argument: the
// switch is uniform across a launch (no divergence) and keeps the instantiations to a few dozen. Contiguous
// operands (a merged layout of one dim, stride 1, or 0 for a broadcast scalar) take a vectorised path with
// 16-byte loads (llm.c's Packed128); everything else the strided path. The per-element math is
// ember/internal/scalar_math.h's, the very functions the CPU backend calls; float16/bfloat16 compute in float.
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

// Strides of an operand as the vectorised path sees it: 1 (contiguous), 0 (one broadcast value) or neither.
enum class Flat { Contiguous, Scalar, No };
Flat flat(const Operand& o, const Layout& l) {
  if (l.ndim == 0) return Flat::Contiguous;  // one element
  if (l.ndim > 1) return Flat::No;
  return o.strides[0] == 1 ? Flat::Contiguous : (o.strides[0] == 0 ? Flat::Scalar : Flat::No);
}

// --- the op of a launch, chosen per element by a switch over the op list (uniform across the launch, so no
// divergence); each case is the op's scalar math (scalar_math.h), the CPU backend's.

template <class C>
__device__ inline C unary_op(UnaryOp op, C v) {
  switch (op) {
#define EMBER_X(Name, ...) \
  case UnaryOp::Name: \
    if constexpr (scalar::kUnaryDefined<UnaryOp::Name, C>) return scalar::unary<UnaryOp::Name>(v); \
    break;
    EMBER_UNARY_OPS(EMBER_X)
#undef EMBER_X
  }
  return v;  // not reached: the backend sends float-only ops floating types only
}

// R is T for arithmetic, bool for comparisons; computed in compute_t<T>.
template <class R, class T>
__device__ inline R binary_op(BinaryOp op, T a, T b) {
  using C = compute_t<T>;
  const C x = load_c(a), y = load_c(b);
  switch (op) {
#define EMBER_X(Name, str, kind, ...) \
  case BinaryOp::Name: \
    if constexpr (is_comparison(BinaryOp::Name)) { \
      if constexpr (std::is_same<R, bool>::value) return scalar::binary<BinaryOp::Name>(x, y); \
    } else if constexpr (std::is_same<R, T>::value && scalar::kBinaryDefined<BinaryOp::Name, C>) { \
      return store_c<T>(scalar::binary<BinaryOp::Name>(x, y)); \
    } \
    break;
    EMBER_BINARY_OPS(EMBER_X)
#undef EMBER_X
  }
  return R(0);  // not reached: raw::binary sends integer division as float32, and R matches the op's kind
}

// --- kernels

template <class T>
__global__ void unary_vec_kernel(UnaryOp op, T* out, const T* x, int64_t n) {
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
__global__ void unary_strided_kernel(UnaryOp op, Operand out, Operand x, Layout layout) {
  T* o = static_cast<T*>(out.data);
  const T* in = static_cast<const T*>(x.data);
  EMBER_KERNEL_LOOP(i, layout.numel) {
    o[element_offset(i, layout, out.strides)] =
        store_c<T>(unary_op(op, load_c(in[element_offset(i, layout, x.strides)])));
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
    o[element_offset(i, layout, out.strides)] = store_c<T>(scalar::clamp(v, l, h));
  }
}

// a_scalar / b_scalar: that input is one broadcast value (stride 0), read once.
template <class R, class T>
__global__ void binary_vec_kernel(BinaryOp op, R* out, const T* a, const T* b, bool a_scalar, bool b_scalar,
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
__global__ void binary_strided_kernel(BinaryOp op, Operand out, Operand a, Operand b, Layout layout) {
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
void binary_typed(BinaryOp op, const Operand& out, const Operand& a, const Operand& b, const Layout& layout,
                  CUstream_st* stream) {
  constexpr int N = pack_size<T>();
  const Flat fo = flat(out, layout), fa = flat(a, layout), fb = flat(b, layout);
  const bool vec = fo == Flat::Contiguous && fa != Flat::No && fb != Flat::No && aligned(out.data, sizeof(R) * N) &&
                   (fa == Flat::Scalar || aligned(a.data, 16)) && (fb == Flat::Scalar || aligned(b.data, 16));
  if (vec) {
    binary_vec_kernel<R, T><<<grid_size(CEIL_DIV(layout.numel, N)), kBlockSize, 0, stream>>>(
        op, static_cast<R*>(out.data), static_cast<const T*>(a.data), static_cast<const T*>(b.data), fa == Flat::Scalar,
        fb == Flat::Scalar, layout.numel);
  } else {
    binary_strided_kernel<R, T><<<grid_size(layout.numel), kBlockSize, 0, stream>>>(op, out, a, b, layout);
  }
}

}  // namespace

void launch_unary(UnaryOp op, const Operand& out, const Operand& x, const Layout& layout, CUstream_st* stream) {
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

void launch_binary(BinaryOp op, const Operand& out, const Operand& a, const Operand& b, const Layout& layout,
                   CUstream_st* stream) {
  if (layout.numel == 0) return;
  const bool cmp = is_comparison(op);
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
