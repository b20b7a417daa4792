// defines: the softmax / log-softmax kernels and launch_softmax (launch.h), over the middle dim D of a
// contiguous [outer, D, inner] tensor, with core/cpu/reduce.cpp's arithmetic: subtract the row max (0 for an
// all -inf row), e = exp(x - m) in the compute type, sum in double; softmax = e * (1 / sum), log-softmax =
// (x - m) - log(sum). inner == 1 (the last dim, the usual case): one block per row, reductions in a
// shared-memory tree; otherwise one thread per (outer, inner) column, walking D in order.
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

__device__ inline float m_exp(float v) { return expf(v); }
__device__ inline double m_exp(double v) { return exp(v); }

template <class C>
__device__ inline C row_max_start() {
  return -static_cast<C>(INFINITY);
}
template <class C>
__device__ inline C fix_max(C m) {
  return (m == -static_cast<C>(INFINITY)) ? C(0) : m;  // an all -inf row: avoid (-inf) - (-inf)
}
// NaN propagates through the max, as std::max(m, v) with m first does not: the CPU's std::max(m, x) keeps
// m when x is NaN, so mirror that exactly.
template <class C>
__device__ inline C max_step(C m, C v) {
  return (m < v) ? v : m;
}

template <class T>
__global__ void softmax_row_kernel(T* out, const T* x, int64_t rows, int64_t D, bool log) {
  using C = compute_t<T>;
  __shared__ C cbuf[kBlockSize];
  __shared__ double dbuf[kBlockSize];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xi = x + r * D;
    T* oi = out + r * D;
    C m = row_max_start<C>();
    for (int64_t k = threadIdx.x; k < D; k += blockDim.x) m = max_step(m, load_c(xi[k]));
    cbuf[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
      if (static_cast<int>(threadIdx.x) < s) cbuf[threadIdx.x] = max_step(cbuf[threadIdx.x], cbuf[threadIdx.x + s]);
      __syncthreads();
    }
    m = fix_max(cbuf[0]);
    double sum = 0;
    for (int64_t k = threadIdx.x; k < D; k += blockDim.x) sum += static_cast<double>(m_exp(load_c(xi[k]) - m));
    dbuf[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
      if (static_cast<int>(threadIdx.x) < s) dbuf[threadIdx.x] += dbuf[threadIdx.x + s];
      __syncthreads();
    }
    sum = dbuf[0];
    if (log) {
      const C ls = static_cast<C>(::log(sum));
      for (int64_t k = threadIdx.x; k < D; k += blockDim.x) oi[k] = store_c<T>((load_c(xi[k]) - m) - ls);
    } else {
      const C inv = static_cast<C>(1.0 / sum);
      for (int64_t k = threadIdx.x; k < D; k += blockDim.x) oi[k] = store_c<T>(m_exp(load_c(xi[k]) - m) * inv);
    }
    __syncthreads();  // the buffers are reused by the next row
  }
}

template <class T>
__global__ void softmax_column_kernel(T* out, const T* x, int64_t outer, int64_t D, int64_t inner, bool log) {
  using C = compute_t<T>;
  EMBER_KERNEL_LOOP(r, outer * inner) {
    const int64_t base = (r / inner) * D * inner + (r % inner);
    const T* xi = x + base;
    T* oi = out + base;
    C m = row_max_start<C>();
    for (int64_t k = 0; k < D; ++k) m = max_step(m, load_c(xi[k * inner]));
    m = fix_max(m);
    double sum = 0;
    for (int64_t k = 0; k < D; ++k) sum += static_cast<double>(m_exp(load_c(xi[k * inner]) - m));
    if (log) {
      const C ls = static_cast<C>(::log(sum));
      for (int64_t k = 0; k < D; ++k) oi[k * inner] = store_c<T>((load_c(xi[k * inner]) - m) - ls);
    } else {
      const C inv = static_cast<C>(1.0 / sum);
      for (int64_t k = 0; k < D; ++k) oi[k * inner] = store_c<T>(m_exp(load_c(xi[k * inner]) - m) * inv);
    }
  }
}

template <class T>
void softmax_typed(void* out, const void* x, int64_t outer, int64_t D, int64_t inner, bool log, CUstream_st* stream) {
  T* o = static_cast<T*>(out);
  const T* in = static_cast<const T*>(x);
  if (inner == 1) {
    const unsigned grid = static_cast<unsigned>(outer < (int64_t{1} << 20) ? outer : (int64_t{1} << 20));
    softmax_row_kernel<T><<<grid, kBlockSize, 0, stream>>>(o, in, outer, D, log);
  } else {
    softmax_column_kernel<T><<<grid_size(outer * inner), kBlockSize, 0, stream>>>(o, in, outer, D, inner, log);
  }
}

}  // namespace

void launch_softmax(ScalarType type, void* out, const void* x, int64_t outer, int64_t D, int64_t inner, bool log,
                    CUstream_st* stream) {
  if (outer == 0 || D == 0 || inner == 0) return;
  switch (type) {
    case ScalarType::Float32: softmax_typed<float>(out, x, outer, D, inner, log, stream); break;
    case ScalarType::Float64: softmax_typed<double>(out, x, outer, D, inner, log, stream); break;
    case ScalarType::Float16: softmax_typed<__half>(out, x, outer, D, inner, log, stream); break;
    case ScalarType::BFloat16: softmax_typed<__nv_bfloat16>(out, x, outer, D, inner, log, stream); break;
    default: return;  // the backend sends floating types only
  }
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
