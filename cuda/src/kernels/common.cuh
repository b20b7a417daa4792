// defines: what the .cu files in this folder share — CEIL_DIV and the grid size of a grid-stride loop,
// element types by DType (dispatch), CUDA's 16-bit floats for scalar::convert, the compute type, and the
// memory offset of the i-th element of a strided operand. The per-element math itself is
// ember/internal/scalar_math.h, the CPU backend's. C++17; included only by .cu files.
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
#define CEIL_DIV(a, b) (((a) + (b)-1) / (b))
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

// Calls f(TypeTag<T>{}) with T the C++ type stored for `t` (the dtype list's CUDA column: float16 as __half,
// bfloat16 as __nv_bfloat16, both the same 2 bytes as ember::Half and ember::BFloat16).
template <class F>
void dispatch(DType t, F&& f) {
  switch (t) {
#define EMBER_X(Name, str, size, CpuType, CudaType) \
  case DType::Name: \
    f(TypeTag<CudaType>{}); \
    return;
    EMBER_DTYPES(EMBER_X)
#undef EMBER_X
  }
}

// Calls f(TypeTag<float>{}) or f(TypeTag<double>{}): kernels that exist for float32 and float64 only
// (BatchNorm). The backend checks the dtype before launching; anything else is a bug and throws.
template <class F>
void dispatch_float(DType t, F&& f) {
  if (t == DType::kFloat32) return f(TypeTag<float>{});
  if (t == DType::kFloat64) return f(TypeTag<double>{});
  ::ember::cuda::detail::throw_cuda_error(cudaErrorInvalidValue, "dispatch_float: a dtype other than float32/float64",
                                          __FILE__, __LINE__);
}

// The same for the four floating dtypes (float16 and bfloat16 as CUDA's types): kernels that read and write
// every floating type and compute in float or double (pooling).
template <class F>
void dispatch_floating(DType t, F&& f) {
  if (t == DType::kFloat16) return f(TypeTag<__half>{});
  if (t == DType::kBFloat16) return f(TypeTag<__nv_bfloat16>{});
  if (t == DType::kFloat32 || t == DType::kFloat64) return dispatch_float(t, f);
  ::ember::cuda::detail::throw_cuda_error(cudaErrorInvalidValue, "dispatch_floating: a dtype that is not floating",
                                          __FILE__, __LINE__);
}

}  // namespace ember::cuda::kernels

// CUDA's 16-bit float types for scalar::convert (computed in float, rounded to nearest even).
template <>
struct ember::scalar::ReducedFloat<__half> : std::true_type {
  __host__ __device__ static float to_float(__half v) { return __half2float(v); }
  __host__ __device__ static __half from_float(float v) { return __float2half_rn(v); }
};
template <>
struct ember::scalar::ReducedFloat<__nv_bfloat16> : std::true_type {
  __host__ __device__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __host__ __device__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};

namespace ember::cuda::kernels {

// Value conversion with the CPU's rules (scalar_math.h).
using scalar::convert;
using scalar::is_nan;
using scalar::is_reduced_v;

// --- strided addressing

// Offset (in elements) of the i-th element, in row-major order over `layout`, of an operand with `strides`
// (dim_walk.h's strided_offset: a 1-D, e.g. contiguous, operand costs no division).
__device__ inline int64_t element_offset(int64_t i, const Layout& layout, const int64_t* strides) {
  return strided_offset(i, layout.ndim, layout.sizes, strides);
}

}  // namespace ember::cuda::kernels

namespace ember::cuda::kernels {

// --- the compute type

// The type a kernel computes in: float for float16/bfloat16 (as the CPU backend, which upcasts them), the
// stored type otherwise.
template <class T>
using compute_t = typename std::conditional<is_reduced_v<T>, float, T>::type;

template <class T>
__device__ inline compute_t<T> load_c(T v) {
  if constexpr (is_reduced_v<T>) return scalar::ReducedFloat<T>::to_float(v);
  else return v;
}
template <class T>
__device__ inline T store_c(compute_t<T> v) {
  if constexpr (is_reduced_v<T>) return scalar::ReducedFloat<T>::from_float(v);
  else return v;
}

// --- packed loads: N elements of T in one load or store (llm.c's Packed128), for contiguous, aligned operands

template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};
// Elements of T per 16-byte load.
template <class T>
__host__ __device__ constexpr int pack_size() {
  return 16 / static_cast<int>(sizeof(T));
}
inline bool aligned(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

// op over every thread of the block (blockDim.x a multiple of 32, at most 32 warps) by warp shuffles and one value
// per warp in `shared` (32 of them); every thread gets the result, combined in the same order in each (a
// deterministic sum). The first barrier keeps a previous call's readers from seeing this call's writes.
template <class V, class Op>
__device__ V block_reduce(V v, V* shared, Op op) {
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = static_cast<int>(threadIdx.x) / 32, warps = static_cast<int>(blockDim.x) / 32;
  __syncthreads();
  if (threadIdx.x % 32 == 0) shared[warp] = v;
  __syncthreads();
  V r = shared[0];
  for (int w = 1; w < warps; ++w) r = op(r, shared[w]);
  return r;
}

// Grid-stride loop over [0, n).
#define EMBER_KERNEL_LOOP(i, n) \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

}  // namespace ember::cuda::kernels
