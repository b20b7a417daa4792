// defines: the fused optimiser kernels and launch_sgd / launch_adam (launch.h): one thread per element reads
// p, g and the state once and writes p and the state (llm.c's adamw kernel). The update of an element is
// scalar_fused.h's (PyTorch's single-tensor SGD / Adam / AdamW), the CPU's, computed in the state's type: the
// parameter's for float32 / float64, float32 for float16 / bfloat16 parameters (mixed precision), whose new value
// is rounded once. And launch_amp_unscale, GradScaler's multi-tensor unscale with the inf/NaN check.
#include <cmath>
#include <cstdint>

#include "common.cuh"
#include "ember/internal/scalar_fused.h"

namespace ember::cuda::kernels {
namespace {

// One thread per element; the update is scalar::sgd_update / scalar::adam_update (scalar_fused.h), the CPU's,
// with the options as template flags as on the CPU. P: the parameter's (and gradient's) type, S: the state's
// and the arithmetic's.
template <class P, class S, bool WD, bool Momentum>
__global__ void sgd_kernel(P* p, const P* gp, S* buf, int64_t n, scalar::SgdCoeffs<S> c) {
  EMBER_KERNEL_LOOP(i, n) {
    S pi = scalar::convert<S>(p[i]);
    scalar::sgd_update<S, WD, Momentum>(pi, scalar::convert<S>(gp[i]), Momentum ? buf + i : nullptr, c);
    p[i] = scalar::convert<P>(pi);
  }
}

template <class P, class S, bool L2, bool Decay>
__global__ void adam_kernel(P* p, const P* gp, S* m, S* v, int64_t n, scalar::AdamCoeffs<S> c) {
  EMBER_KERNEL_LOOP(i, n) {
    S pi = scalar::convert<S>(p[i]);
    scalar::adam_update<S, L2, Decay>(pi, scalar::convert<S>(gp[i]), m[i], v[i], c);
    p[i] = scalar::convert<P>(pi);
  }
}

template <class P, class S>
void sgd_typed(void* param, const void* grad, void* buf_in, int64_t n, const SgdParams& a, CUstream_st* stream) {
  P* p = static_cast<P*>(param);
  const P* g = static_cast<const P*>(grad);
  S* buf = static_cast<S*>(buf_in);
  const scalar::SgdCoeffs<S> c = scalar::sgd_coeffs<S>(a);
  const unsigned grid = grid_size(n);
  if (a.weight_decay != 0 && buf) sgd_kernel<P, S, true, true><<<grid, kBlockSize, 0, stream>>>(p, g, buf, n, c);
  else if (a.weight_decay != 0) sgd_kernel<P, S, true, false><<<grid, kBlockSize, 0, stream>>>(p, g, buf, n, c);
  else if (buf) sgd_kernel<P, S, false, true><<<grid, kBlockSize, 0, stream>>>(p, g, buf, n, c);
  else sgd_kernel<P, S, false, false><<<grid, kBlockSize, 0, stream>>>(p, g, buf, n, c);
}

template <class P, class S>
void adam_typed(void* param, const void* grad, void* m, void* v, int64_t n, const AdamParams& a, CUstream_st* stream) {
  P* p = static_cast<P*>(param);
  const P* g = static_cast<const P*>(grad);
  S* mp = static_cast<S*>(m);
  S* vp = static_cast<S*>(v);
  const scalar::AdamCoeffs<S> c = scalar::adam_coeffs<S>(a);
  const unsigned grid = grid_size(n);
  if (c.l2) adam_kernel<P, S, true, false><<<grid, kBlockSize, 0, stream>>>(p, g, mp, vp, n, c);
  else if (c.decay) adam_kernel<P, S, false, true><<<grid, kBlockSize, 0, stream>>>(p, g, mp, vp, n, c);
  else adam_kernel<P, S, false, false><<<grid, kBlockSize, 0, stream>>>(p, g, mp, vp, n, c);
}

// --- GradScaler's unscale: x *= inv_scale over a list of tensors of one dtype, setting *found_inf = 1 when any
// element was inf or NaN. A launch covers up to kUnscaleTensors tensors; its blocks are spread over them in
// chunks of kUnscaleChunk elements (PyTorch's multi_tensor_apply): the table saying which block takes which
// chunk of which tensor travels in the kernel's parameters, so small tensors cost no launch of their own.
template <class T, class C>  // C: the arithmetic, double for float64 gradients, else float
__global__ void unscale_kernel(UnscaleBatch batch, float* found_inf, C inv_scale) {
  const int t = batch.block_tensor[blockIdx.x];
  T* x = static_cast<T*>(batch.ptr[t]);
  const int64_t begin = static_cast<int64_t>(batch.block_chunk[blockIdx.x]) * kUnscaleChunk;
  const int64_t end = begin + kUnscaleChunk < batch.numel[t] ? begin + kUnscaleChunk : batch.numel[t];
  bool bad = false;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const C v = scalar::convert<C>(x[i]);
    bad |= !isfinite(v);
    x[i] = scalar::convert<T>(v * inv_scale);
  }
  if (bad) *found_inf = 1.0f;  // every writer writes the same value
}

template <class T, class C>
void unscale_typed(const UnscaleBatch& batch, int blocks, float* found_inf, double inv_scale, CUstream_st* stream) {
  unscale_kernel<T, C><<<blocks, kBlockSize, 0, stream>>>(batch, found_inf, static_cast<C>(inv_scale));
}

}  // namespace

void launch_sgd(DType type, void* param, const void* grad, void* momentum_buf, int64_t n, const SgdParams& a,
                CUstream_st* stream) {
  if (n == 0) return;
  switch (type) {
    case DType::kFloat64:
      sgd_typed<double, double>(param, grad, momentum_buf, n, a, stream);
      break;
    case DType::kFloat16:
      sgd_typed<__half, float>(param, grad, momentum_buf, n, a, stream);
      break;
    case DType::kBFloat16:
      sgd_typed<__nv_bfloat16, float>(param, grad, momentum_buf, n, a, stream);
      break;
    default:
      sgd_typed<float, float>(param, grad, momentum_buf, n, a, stream);
  }
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_adam(DType type, void* param, const void* grad, void* exp_avg, void* exp_avg_sq, int64_t n,
                 const AdamParams& a, CUstream_st* stream) {
  if (n == 0) return;
  switch (type) {
    case DType::kFloat64:
      adam_typed<double, double>(param, grad, exp_avg, exp_avg_sq, n, a, stream);
      break;
    case DType::kFloat16:
      adam_typed<__half, float>(param, grad, exp_avg, exp_avg_sq, n, a, stream);
      break;
    case DType::kBFloat16:
      adam_typed<__nv_bfloat16, float>(param, grad, exp_avg, exp_avg_sq, n, a, stream);
      break;
    default:
      adam_typed<float, float>(param, grad, exp_avg, exp_avg_sq, n, a, stream);
  }
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_amp_unscale(DType type, const UnscaleBatch& batch, int blocks, float* found_inf, double inv_scale,
                        CUstream_st* stream) {
  if (blocks == 0) return;
  switch (type) {
    case DType::kFloat64:
      unscale_typed<double, double>(batch, blocks, found_inf, inv_scale, stream);
      break;
    case DType::kFloat16:
      unscale_typed<__half, float>(batch, blocks, found_inf, inv_scale, stream);
      break;
    case DType::kBFloat16:
      unscale_typed<__nv_bfloat16, float>(batch, blocks, found_inf, inv_scale, stream);
      break;
    default:
      unscale_typed<float, float>(batch, blocks, found_inf, inv_scale, stream);
  }
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
