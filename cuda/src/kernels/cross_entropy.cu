// defines: cross_entropy from class indices, fused (launch.h: launch_class_cross_entropy and its backward), with
// the arithmetic of the CPU's (core/cpu/cross_entropy.cpp) and of the softmax kernels: one block per row of the
// logits [N, C], read in their own dtype (16-bit widened to float in registers: no float32 copy of the tensor).
// Forward: the row max (softmax's rule: NaN skipped, an all -inf row shifted by 0), the sum of exp(x - max) in
// double, each reduced over the block by warp shuffles; thread 0 writes the statistics (max, log of the sum) and the
// loss log(sum) - (x[t] - max). Backward: (exp((x - max) - log(sum)) - [j == t]) * scale per element. A target
// outside [0, C) (the range check is queued, not waited for) reads nothing: a NaN loss, no one-hot subtraction.
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

using scalar::softmax_max_step;

template <class T>
__global__ void class_ce_forward_kernel(compute_t<T>* loss, compute_t<T>* stats, const T* x, const int64_t* targets,
                                        int64_t rows, int64_t D) {
  using C = compute_t<T>;
  __shared__ C max_part[32];
  __shared__ double sum_part[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xi = x + r * D;
    C m = scalar::softmax_max_start<C>();
    for (int64_t k = threadIdx.x; k < D; k += blockDim.x) m = softmax_max_step(m, load_c(xi[k]));
    m = scalar::softmax_shift(block_reduce(m, max_part, [](C a, C b) { return softmax_max_step(a, b); }));
    double sum = 0;
    for (int64_t k = threadIdx.x; k < D; k += blockDim.x)
      sum += static_cast<double>(scalar::fast_exp(load_c(xi[k]) - m));
    sum = block_reduce(sum, sum_part, [](double a, double b) { return a + b; });
    if (threadIdx.x == 0) {
      const C log_sum = static_cast<C>(::log(sum));
      const int64_t t = targets[r];
      stats[2 * r] = m;
      stats[2 * r + 1] = log_sum;
      loss[r] = t >= 0 && t < D ? log_sum - (load_c(xi[t]) - m) : static_cast<C>(NAN);
    }
  }
}

template <class T>
__global__ void class_ce_backward_kernel(T* dx, const T* x, const int64_t* targets, const compute_t<T>* stats,
                                         const compute_t<T>* scale, int64_t scale_stride, int64_t rows, int64_t D) {
  using C = compute_t<T>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xi = x + r * D;
    T* gi = dx + r * D;
    const C m = stats[2 * r], log_sum = stats[2 * r + 1], k = scale[r * scale_stride];
    const int64_t t = targets[r];
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      C p = scalar::fast_exp((load_c(xi[j]) - m) - log_sum);
      if (j == t) p -= C(1);
      gi[j] = store_c<T>(p * k);
    }
  }
}

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
}

}  // namespace

void launch_class_cross_entropy(DType type, void* loss, void* stats, const void* logits, const int64_t* targets,
                                int64_t rows, int64_t cols, CUstream_st* stream) {
  if (rows == 0 || cols == 0) return;
  dispatch_floating(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    class_ce_forward_kernel<T><<<row_grid(rows), kBlockSize, 0, stream>>>(
        static_cast<C*>(loss), static_cast<C*>(stats), static_cast<const T*>(logits), targets, rows, cols);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_class_cross_entropy_backward(DType type, void* dlogits, const void* logits, const int64_t* targets,
                                         const void* stats, const void* scale, int64_t scale_stride, int64_t rows,
                                         int64_t cols, CUstream_st* stream) {
  if (rows == 0 || cols == 0) return;
  dispatch_floating(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    class_ce_backward_kernel<T><<<row_grid(rows), kBlockSize, 0, stream>>>(
        static_cast<T*>(dlogits), static_cast<const T*>(logits), targets, static_cast<const C*>(stats),
        static_cast<const C*>(scale), scale_stride, rows, cols);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
