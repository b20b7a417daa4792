// defines: the library-backed compute ops of the CUDA backend — matmul through cuBLAS (cublas.cpp), conv2d
// and its backward through cuDNN (cudnn.cpp) — called by CudaBackend (linalg.cpp, conv_pool.cpp), which has checked
// and prepared the arguments. Private to cuda/src; no CUDA headers.
#pragma once
#include "ember/core/backend.h"

namespace ember::cuda::detail {

// out[B, M, N] = a[B, M, K] @ b[B, K, N] for float32 (TF32 only when cuda::allow_tf32()), float64, float16 and
// bfloat16 (float accumulation). a and b may be strided or batch-broadcast; out is contiguous. Runs on the
// current stream of out's device.
void cublas_matmul(const Tensor& out, const Tensor& a, const Tensor& b);

// True when this build has cuDNN (conv2d on CUDA needs it; see docs/cuda.md).
bool have_cudnn();
// requires: float32 or float64; x, w contiguous; out / gx / gw freshly allocated and contiguous (gx, gw may
// be undefined: not wanted). No bias here: the backend adds it and reduces its gradient with its own kernels.
void cudnn_conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Conv2dParams& p);
void cudnn_conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx, const Tensor& gw,
                           const Conv2dParams& p);

}  // namespace ember::cuda::detail
