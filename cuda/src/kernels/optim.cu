// defines: the fused optimiser kernels launch_sgd / launch_adam and GradScaler's launch_amp_unscale (launch.h),
// over multi-tensor batches: each block takes one chunk of one tensor (PyTorch's multi_tensor_apply), so one launch
// updates dozens of small parameters and a large one spreads over the GPU. A thread reads p, g and the state of an
// element once and writes p and the state (llm.c's adamw kernel). The update of an element is scalar_fused.h's
// (PyTorch's single-tensor SGD / Adam / AdamW), the CPU's, computed in the state's type: the parameter's for
// float32 / float64, float32 for float16 / bfloat16 parameters (mixed precision), whose new value is rounded once.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common.cuh"
#include "ember/internal/scalar_fused.h"

namespace ember::cuda::kernels {
namespace {

// 512 threads a block, 320 blocks a launch (PyTorch's multi_tensor_apply's numbers): each thread has its element's
// four loads in flight, enough threads to keep an H100's memory busy with a full launch.
constexpr int kBatchThreads = 512;

// The elements [begin, end) of the tensor that this block takes.
struct BlockChunk {
  int t;
  int64_t begin, end;
};
__device__ inline BlockChunk block_chunk(const TensorBatch& batch) {
  const int t = batch.block_tensor[blockIdx.x];
  const int64_t begin = static_cast<int64_t>(batch.block_chunk[blockIdx.x]) * kBatchChunk;
  const int64_t end = begin + kBatchChunk < batch.numel[t] ? begin + kBatchChunk : batch.numel[t];
  return {t, begin, end};
}

// The update is scalar::sgd_update / scalar::adam_update (scalar_fused.h), the CPU's, with the options as template
// flags as on the CPU. P: the parameter's (and gradient's) type, S: the state's and the arithmetic's.
template <class P, class S, bool WD, bool Momentum>
__global__ void sgd_kernel(TensorBatch batch, scalar::SgdCoeffs<S> c) {
  const BlockChunk ch = block_chunk(batch);
  P* p = static_cast<P*>(batch.ptr[0][ch.t]);
  const P* gp = static_cast<const P*>(batch.ptr[1][ch.t]);
  S* buf = static_cast<S*>(batch.ptr[2][ch.t]);
  for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    S pi = scalar::convert<S>(p[i]);
    scalar::sgd_update<S, WD, Momentum>(pi, scalar::convert<S>(gp[i]), Momentum ? buf + i : nullptr, c);
    p[i] = scalar::convert<P>(pi);
  }
}

template <class P, class S, bool L2, bool Decay>
__global__ void adam_kernel(TensorBatch batch, scalar::AdamCoeffs<S> c) {
  const BlockChunk ch = block_chunk(batch);
  P* p = static_cast<P*>(batch.ptr[0][ch.t]);
  const P* gp = static_cast<const P*>(batch.ptr[1][ch.t]);
  S* m = static_cast<S*>(batch.ptr[2][ch.t]);
  S* v = static_cast<S*>(batch.ptr[3][ch.t]);
  for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    S pi = scalar::convert<S>(p[i]);
    scalar::adam_update<S, L2, Decay>(pi, scalar::convert<S>(gp[i]), m[i], v[i], c);
    p[i] = scalar::convert<P>(pi);
  }
}

template <class P, class S>
void sgd_typed(const TensorBatch& batch, int blocks, const SgdParams& a, CUstream_st* stream) {
  const scalar::SgdCoeffs<S> c = scalar::sgd_coeffs<S>(a);
  const bool buf = batch.ptr[2][0] != nullptr;  // the host batches tensors with and without momentum apart
  if (a.weight_decay != 0 && buf) sgd_kernel<P, S, true, true><<<blocks, kBatchThreads, 0, stream>>>(batch, c);
  else if (a.weight_decay != 0) sgd_kernel<P, S, true, false><<<blocks, kBatchThreads, 0, stream>>>(batch, c);
  else if (buf) sgd_kernel<P, S, false, true><<<blocks, kBatchThreads, 0, stream>>>(batch, c);
  else sgd_kernel<P, S, false, false><<<blocks, kBatchThreads, 0, stream>>>(batch, c);
}

template <class P, class S>
void adam_typed(const TensorBatch& batch, int blocks, const AdamParams& a, CUstream_st* stream) {
  const scalar::AdamCoeffs<S> c = scalar::adam_coeffs<S>(a);
  if (c.l2) adam_kernel<P, S, true, false><<<blocks, kBatchThreads, 0, stream>>>(batch, c);
  else if (c.decay) adam_kernel<P, S, false, true><<<blocks, kBatchThreads, 0, stream>>>(batch, c);
  else adam_kernel<P, S, false, false><<<blocks, kBatchThreads, 0, stream>>>(batch, c);
}

// --- GradScaler's unscale: x *= inv_scale over the batch's tensors, setting *found_inf = 1 when any element was
// inf or NaN.
template <class T, class C>  // C: the arithmetic, double for float64 gradients, else float
__global__ void unscale_kernel(TensorBatch batch, float* found_inf, C inv_scale) {
  const BlockChunk ch = block_chunk(batch);
  T* x = static_cast<T*>(batch.ptr[0][ch.t]);
  bool bad = false;
  for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    const C v = scalar::convert<C>(x[i]);
    bad |= !isfinite(v);
    x[i] = scalar::convert<T>(v * inv_scale);
  }
  if (bad) *found_inf = 1.0f;  // every writer writes the same value
}

template <class T, class C>
void unscale_typed(const TensorBatch& batch, int blocks, float* found_inf, double inv_scale, CUstream_st* stream) {
  unscale_kernel<T, C><<<blocks, kBatchThreads, 0, stream>>>(batch, found_inf, static_cast<C>(inv_scale));
}

// The state's (and the arithmetic's) type for a parameter of type P.
template <class P>
using StateOf = std::conditional_t<std::is_same_v<P, double>, double, float>;

}  // namespace

void launch_sgd(DType type, const TensorBatch& batch, int blocks, const SgdParams& a, CUstream_st* stream) {
  if (blocks == 0) return;
  dispatch_floating(type, [&](auto tag) {
    using P = typename decltype(tag)::type;
    sgd_typed<P, StateOf<P>>(batch, blocks, a, stream);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_adam(DType type, const TensorBatch& batch, int blocks, const AdamParams& a, CUstream_st* stream) {
  if (blocks == 0) return;
  dispatch_floating(type, [&](auto tag) {
    using P = typename decltype(tag)::type;
    adam_typed<P, StateOf<P>>(batch, blocks, a, stream);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_amp_unscale(DType type, const TensorBatch& batch, int blocks, float* found_inf, double inv_scale,
                        CUstream_st* stream) {
  if (blocks == 0) return;
  dispatch_floating(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unscale_typed<T, StateOf<T>>(batch, blocks, found_inf, inv_scale, stream);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
