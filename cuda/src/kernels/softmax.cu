// defines: the softmax / log-softmax kernels and launch_softmax (launch.h), over the middle dim D of a
// contiguous [outer, D, inner] tensor, with core/cpu/reduce.cpp's arithmetic (the row max, its fix and the
// exp from scalar_math.h): subtract the row max (0 for an
// all -inf row), e = exp(x - m) in the compute type, sum in double; softmax = e * (1 / sum), log-softmax =
// (x - m) - log(sum). inner == 1 (the last dim, the usual case): one block per row, reductions in a
// shared-memory tree; otherwise one thread per (outer, inner) column, walking D in order.
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

// The row max, its all -inf fix and the exp are scalar_math.h's, the CPU's.
using scalar::softmax_max_step;
using scalar::softmax_shift;
template <class C>
__device__ inline C row_exp(C v) {
  return scalar::fast_exp(v);
}

template <class T>
__global__ void softmax_row_kernel(T* out, const T* x, int64_t rows, int64_t D, bool log) {
  using C = compute_t<T>;
  __shared__ C cbuf[kBlockSize];
  __shared__ double dbuf[kBlockSize];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xi = x + r * D;
    T* oi = out + r * D;
    C m = scalar::softmax_max_start<C>();
    for (int64_t k = threadIdx.x; k < D; k += blockDim.x) m = softmax_max_step(m, load_c(xi[k]));
    cbuf[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
      if (static_cast<int>(threadIdx.x) < s)
        cbuf[threadIdx.x] = softmax_max_step(cbuf[threadIdx.x], cbuf[threadIdx.x + s]);
      __syncthreads();
    }
    m = softmax_shift(cbuf[0]);
    double sum = 0;
    for (int64_t k = threadIdx.x; k < D; k += blockDim.x) sum += static_cast<double>(row_exp(load_c(xi[k]) - m));
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
      for (int64_t k = threadIdx.x; k < D; k += blockDim.x) oi[k] = store_c<T>(row_exp(load_c(xi[k]) - m) * inv);
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
    C m = scalar::softmax_max_start<C>();
    for (int64_t k = 0; k < D; ++k) m = softmax_max_step(m, load_c(xi[k * inner]));
    m = softmax_shift(m);
    double sum = 0;
    for (int64_t k = 0; k < D; ++k) sum += static_cast<double>(row_exp(load_c(xi[k * inner]) - m));
    if (log) {
      const C ls = static_cast<C>(::log(sum));
      for (int64_t k = 0; k < D; ++k) oi[k * inner] = store_c<T>((load_c(xi[k * inner]) - m) - ls);
    } else {
      const C inv = static_cast<C>(1.0 / sum);
      for (int64_t k = 0; k < D; ++k) oi[k * inner] = store_c<T>(row_exp(load_c(xi[k * inner]) - m) * inv);
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

void launch_softmax(DType type, void* out, const void* x, int64_t outer, int64_t D, int64_t inner, bool log,
                    CUstream_st* stream) {
  if (outer == 0 || D == 0 || inner == 0) return;
  switch (type) {
    case DType::kFloat32:
      softmax_typed<float>(out, x, outer, D, inner, log, stream);
      break;
    case DType::kFloat64:
      softmax_typed<double>(out, x, outer, D, inner, log, stream);
      break;
    case DType::kFloat16:
      softmax_typed<__half>(out, x, outer, D, inner, log, stream);
      break;
    case DType::kBFloat16:
      softmax_typed<__nv_bfloat16>(out, x, outer, D, inner, log, stream);
      break;
    default:
      return;  // the backend sends floating types only
  }
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
