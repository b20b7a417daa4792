// defines: what the .cu files in this folder share — CEIL_DIV and the grid size of a grid-stride loop,
// element types by ScalarType (dispatch), value conversion with the CPU backend's rules, and the memory
// offset of the i-th element of a strided operand. C++17; included only by .cu files.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "../check.h"
#include "launch.h"

namespace ember::cuda::kernels {

#ifndef CEIL_DIV
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#endif

constexpr int kBlockSize = 256;

// Blocks for a grid-stride loop over n elements: one element per thread up to 2^20 blocks, then each
// thread takes several.
inline unsigned grid_size(int64_t n) {
  const int64_t blocks = CEIL_DIV(n, static_cast<int64_t>(kBlockSize));
  return static_cast<unsigned>(blocks < (int64_t{1} << 20) ? blocks : (int64_t{1} << 20));
}

// --- element types

template <class T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with T the C++ type stored for `t` (float16 as __half, bfloat16 as __nv_bfloat16:
// both are the same 2 bytes as ember::Half and ember::BFloat16).
template <class F>
void dispatch(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Float32: f(TypeTag<float>{}); return;
    case ScalarType::Float64: f(TypeTag<double>{}); return;
    case ScalarType::Float16: f(TypeTag<__half>{}); return;
    case ScalarType::BFloat16: f(TypeTag<__nv_bfloat16>{}); return;
    case ScalarType::Int64: f(TypeTag<int64_t>{}); return;
    case ScalarType::Int32: f(TypeTag<int32_t>{}); return;
    case ScalarType::UInt8: f(TypeTag<uint8_t>{}); return;
    case ScalarType::Bool: f(TypeTag<bool>{}); return;
  }
}

// --- conversion (the same rules as ember::cpu::convert, so both devices give the same bits)

template <class T>
struct IsReduced : std::false_type {};
template <>
struct IsReduced<__half> : std::true_type {};
template <>
struct IsReduced<__nv_bfloat16> : std::true_type {};

__host__ __device__ inline float to_float(__half v) { return __half2float(v); }
__host__ __device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__host__ __device__ inline T from_float(float v);
template <>
__host__ __device__ inline __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__host__ __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// The integer range a float saturates to (std::numeric_limits is host-only in device code).
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

// Reduced floats go through float; float -> integer saturates and maps NaN to 0 (no undefined casts);
// anything -> bool is `v != 0`.
template <class D, class S>
__host__ __device__ inline D convert(S v) {
  if constexpr (std::is_same<D, S>::value) {
    return v;
  } else if constexpr (IsReduced<S>::value) {
    return convert<D>(to_float(v));
  } else if constexpr (IsReduced<D>::value) {
    return from_float<D>(static_cast<float>(v));
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

// --- strided addressing

// Offset (in elements) of the i-th element, in row-major order over `layout`, of an operand with
// `strides`. Inner dims are peeled off with % and /; the outermost takes what is left, so a 1-D (e.g.
// contiguous) operand costs no division.
__device__ inline int64_t element_offset(int64_t i, const Layout& layout, const int64_t* strides) {
  int64_t offset = 0;
  for (int d = layout.ndim - 1; d > 0; --d) {
    const int64_t size = layout.sizes[d];
    offset += (i % size) * strides[d];
    i /= size;
  }
  if (layout.ndim > 0) offset += i * strides[0];
  return offset;
}

}  // namespace ember::cuda::kernels

namespace ember::cuda::kernels {

// --- arithmetic shared by the compute kernels

// The type a kernel computes in: float for float16/bfloat16 (as the CPU backend, which upcasts them), the
// stored type otherwise.
template <class T>
using compute_t = typename std::conditional<IsReduced<T>::value, float, T>::type;

template <class T>
__device__ inline compute_t<T> load_c(T v) {
  if constexpr (IsReduced<T>::value) return to_float(v);
  else return v;
}
template <class T>
__device__ inline T store_c(compute_t<T> v) {
  if constexpr (IsReduced<T>::value) return from_float<T>(v);
  else return v;
}

template <class T>
__device__ inline bool is_nan(T v) {
  if constexpr (std::is_floating_point<T>::value) return v != v;
  else return false;
}

// v < 0, spelled so that unsigned types and bool compile without a pointless-comparison warning.
template <class T>
__device__ inline bool is_neg(T v) {
  if constexpr (std::is_unsigned<T>::value || std::is_same<T, bool>::value) return false;
  else return v < T(0);
}

// +, -, * and negation that wrap for signed integers (done in the unsigned type: no undefined overflow),
// plain for floats; bool goes through int and back (as the CPU backend).
template <class T>
__device__ inline T wrap_add(T a, T b) {
  if constexpr (std::is_integral<T>::value && std::is_signed<T>::value) {
    using U = typename std::make_unsigned<T>::type;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return static_cast<T>(a + b);
  }
}
template <class T>
__device__ inline T wrap_sub(T a, T b) {
  if constexpr (std::is_integral<T>::value && std::is_signed<T>::value) {
    using U = typename std::make_unsigned<T>::type;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return static_cast<T>(a - b);
  }
}
template <class T>
__device__ inline T wrap_mul(T a, T b) {
  if constexpr (std::is_integral<T>::value && std::is_signed<T>::value) {
    using U = typename std::make_unsigned<T>::type;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return static_cast<T>(a * b);
  }
}
template <class T>
__device__ inline T wrap_neg(T a) {
  return wrap_sub(T(0), a);
}

// A strided walk's element offset (Walk in launch.h), the same peeling as element_offset.
__device__ inline int64_t walk_offset(int64_t i, const Walk& w) {
  int64_t offset = 0;
  for (int d = w.ndim - 1; d > 0; --d) {
    offset += (i % w.sizes[d]) * w.strides[d];
    i /= w.sizes[d];
  }
  if (w.ndim > 0) offset += i * w.strides[0];
  return offset;
}

// Grid-stride loop over [0, n).
#define EMBER_KERNEL_LOOP(i, n)                                                                    \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);          \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

}  // namespace ember::cuda::kernels
