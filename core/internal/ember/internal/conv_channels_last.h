// defines: how a CPU convolution in channels-last layout runs (the CPU kernels are NCHW): a 1x1, stride-1,
// unpadded convolution is one GEMM over the [N*H*W, C] rows exactly as they lie in memory; any other shape runs the
// NCHW kernels on NCHW copies and copies the results back into the caller's layout. Written against Backend, so the
// CPU backend (core/cpu/conv.cpp) and memory::plan's MetaBackend run the same steps (the plan stays exact).
// Private to core/.
#pragma once
#include "ember/core/backend.h"

namespace ember::detail {

// Each returns false, doing nothing, unless the convolution's output (gradients: gx or gw) is channels-last but not
// also contiguous; then it has done the whole convolution through `be`.
bool conv2d_channels_last(Backend& be, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                          const Conv2dParams& p);
bool conv2d_backward_channels_last(Backend& be, const Conv2dGradArgs& a);

}  // namespace ember::detail
