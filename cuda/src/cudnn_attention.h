// defines: fused flash attention through cuDNN's graph API (cudnn_attention.cpp), which CudaBackend::attention and
// attention_backward try before their own kernels. Private to cuda/src; no CUDA headers.
#pragma once
#include "ember/core/backend.h"

namespace ember::cuda::detail {

// True when cuDNN's fused attention serves these arguments (docs/attention.md, "On CUDA"): a build with the cuDNN
// frontend, compute capability 8.0 or newer, float16 / bfloat16 q, k, v, d == dv a multiple of 8 up to 128, no
// mask tensor (causal or none), every row 16-byte aligned, and EMBER_CUDNN_ATTENTION not 0. cuDNN may still refuse
// a shape when its graph is built: the calls below then return false and the caller runs its own kernels.
bool cudnn_attention_takes(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                           const AttentionParams& p);
// The forward (out and lse as Backend::attention's: lse is cuDNN's softmax statistics, the natural-log log-sum-exp
// of each row's scaled scores) and the backward, on the current stream; false when cuDNN has no plan for them.
bool cudnn_attention_forward(const AttentionArgs& a);
bool cudnn_attention_backward(const AttentionGradArgs& a);

}  // namespace ember::cuda::detail
