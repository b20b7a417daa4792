// defines: the library-backed compute ops of the CUDA backend — matmul through cuBLAS (cublas.cpp) and cuBLASLt
// (cublaslt.cpp), conv2d and its backward through cuDNN (cudnn.cpp) — called by CudaBackend (linalg.cpp,
// conv_pool.cpp), which has checked and prepared the arguments. Private to cuda/src; no CUDA headers.
#pragma once
#include "ember/core/backend.h"

namespace ember::cuda::detail {

// out[B, M, N] = a[B, M, K] @ b[B, K, N] for float32 (TF32 only when cuda::allow_tf32()), float64, float16 and
// bfloat16 (float accumulation). a and b may be strided or batch-broadcast; out is contiguous. Runs on the
// current stream of out's device.
void cublas_matmul(const Tensor& out, const Tensor& a, const Tensor& b);
// Gives the per-stream cuBLAS workspaces back to the caching allocator (cuda::empty_cache()).
void release_cublas_workspaces();
// The same GEMM (2-D: out[M, N] = a[M, K] @ b[K, N], float32 / float16 / bfloat16) through cuBLASLt with an
// epilogue (cublaslt.cpp): the GemmEpilogueArgs one where ember/internal/gemm_epilogue.h says cuBLASLt has it, or
// + bias[N]. Each returns false, having run nothing, when cuBLASLt offers no algorithm for the operands as they lie.
bool cublaslt_gemm_epilogue(const GemmEpilogueArgs& a);
bool cublaslt_matmul_bias(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias);

// True when this build has cuDNN (conv2d on CUDA needs it; see docs/cuda.md).
bool have_cudnn();
// True when cuDNN convolves `dt` natively on `device` (float32 and float64 always; float16 from compute capability
// 7.0 and bfloat16 from 8.0, on tensor cores with float accumulation); otherwise the backend converts to float32.
bool cudnn_takes(DType dt, int device);
// requires: a dtype cudnn_takes; x, w contiguous; out / gx / gw freshly allocated and contiguous (gx, gw may
// be undefined: not wanted). No bias here: the backend adds it and reduces its gradient with its own kernels.
void cudnn_conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Conv2dParams& p);
void cudnn_conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx, const Tensor& gw,
                           const Conv2dParams& p);

}  // namespace ember::cuda::detail
