// defines: the fused optimiser kernels and launch_sgd / launch_adam (launch.h): one thread per element reads
// p, g and the state once and writes p and the state (llm.c's adamw kernel). The update of an element is
// scalar_math.h's (PyTorch's single-tensor SGD / Adam / AdamW), the CPU's, computed in the parameter's type
// (float32 or float64).
#include <cmath>
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

// One thread per element; the update is scalar::sgd_update / scalar::adam_update (scalar_math.h), the CPU's,
// with the options as template flags as on the CPU.
template <class T, bool WD, bool Momentum>
__global__ void sgd_kernel(T* p, const T* gp, T* buf, int64_t n, scalar::SgdCoeffs<T> c) {
  EMBER_KERNEL_LOOP(i, n) scalar::sgd_update<T, WD, Momentum>(p[i], gp[i], Momentum ? buf + i : nullptr, c);
}

template <class T, bool L2, bool Decay>
__global__ void adam_kernel(T* p, const T* gp, T* m, T* v, int64_t n, scalar::AdamCoeffs<T> c) {
  EMBER_KERNEL_LOOP(i, n) scalar::adam_update<T, L2, Decay>(p[i], gp[i], m[i], v[i], c);
}

template <class T>
void sgd_typed(void* param, const void* grad, void* buf_in, int64_t n, const SgdParams& a, CUstream_st* stream) {
  T* p = static_cast<T*>(param);
  const T* g = static_cast<const T*>(grad);
  T* buf = static_cast<T*>(buf_in);
  const scalar::SgdCoeffs<T> c = scalar::sgd_coeffs<T>(a);
  const unsigned grid = grid_size(n);
  if (a.weight_decay != 0 && buf) sgd_kernel<T, true, true><<<grid, kBlockSize, 0, stream>>>(p, g, buf, n, c);
  else if (a.weight_decay != 0) sgd_kernel<T, true, false><<<grid, kBlockSize, 0, stream>>>(p, g, buf, n, c);
  else if (buf) sgd_kernel<T, false, true><<<grid, kBlockSize, 0, stream>>>(p, g, buf, n, c);
  else sgd_kernel<T, false, false><<<grid, kBlockSize, 0, stream>>>(p, g, buf, n, c);
}

template <class T>
void adam_typed(void* param, const void* grad, void* m, void* v, int64_t n, const AdamParams& a, CUstream_st* stream) {
  T* p = static_cast<T*>(param);
  const T* g = static_cast<const T*>(grad);
  T* mp = static_cast<T*>(m);
  T* vp = static_cast<T*>(v);
  const scalar::AdamCoeffs<T> c = scalar::adam_coeffs<T>(a);
  const unsigned grid = grid_size(n);
  if (c.l2) adam_kernel<T, true, false><<<grid, kBlockSize, 0, stream>>>(p, g, mp, vp, n, c);
  else if (c.decay) adam_kernel<T, false, true><<<grid, kBlockSize, 0, stream>>>(p, g, mp, vp, n, c);
  else adam_kernel<T, false, false><<<grid, kBlockSize, 0, stream>>>(p, g, mp, vp, n, c);
}

}  // namespace

void launch_sgd(DType type, void* param, const void* grad, void* momentum_buf, int64_t n, const SgdParams& a,
                CUstream_st* stream) {
  if (n == 0) return;
  if (type == DType::kFloat64) sgd_typed<double>(param, grad, momentum_buf, n, a, stream);
  else sgd_typed<float>(param, grad, momentum_buf, n, a, stream);
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_adam(DType type, void* param, const void* grad, void* exp_avg, void* exp_avg_sq, int64_t n,
                 const AdamParams& a, CUstream_st* stream) {
  if (n == 0) return;
  if (type == DType::kFloat64) adam_typed<double>(param, grad, exp_avg, exp_avg_sq, n, a, stream);
  else adam_typed<float>(param, grad, exp_avg, exp_avg_sq, n, a, stream);
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
