// defines: how a CPU convolution or pooling in channels-last layout runs (the CPU kernels are NCHW): a 1x1,
// stride-1, unpadded convolution is one GEMM over the [N*H*W, C] rows exactly as they lie in memory; any other
// convolution, and pooling, runs the NCHW kernels on NCHW copies and copies the results back into the caller's
// layout. Written against Backend, so the
// CPU backend (core/cpu/conv.cpp) and memory::plan's MetaBackend run the same steps (the plan stays exact).
// Private to core/.
#pragma once
#include "ember/core/backend.h"

namespace ember::detail {

// A convolution's layout (PyTorch's rule): channels-last when its input or its weight is, else contiguous (NCHW).
// The raw op allocates the output and gradients in it and hands x and w over in it; the CUDA backend gives cuDNN
// descriptors in it.
inline MemoryFormat conv_memory_format(const Tensor& x, const Tensor& w) {
  const bool cl = x.suggest_memory_format() == MemoryFormat::ChannelsLast ||
                  w.suggest_memory_format() == MemoryFormat::ChannelsLast;
  return cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

// Each returns false, doing nothing, unless the convolution's output (gradients: gx or gw) is channels-last but not
// also contiguous; then it has done the whole convolution through `be`.
bool conv2d_channels_last(Backend& be, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                          const Conv2dParams& p);
bool conv2d_backward_channels_last(Backend& be, const Conv2dGradArgs& a);
// Pooling on the CPU: false, doing nothing, when out (gx), x (and gy) are all NCHW-contiguous; else it has done the
// pooling through `be` with the NCHW kernels on NCHW copies (a channels-last or strided input, a channels-last
// output), so that memory::plan's MetaBackend plans the copies the CPU makes.
bool pool2d_channels_last(Backend& be, PoolKind kind, const Tensor& out, const Tensor& x, const Pool2dParams& p);
bool pool2d_backward_channels_last(Backend& be, PoolKind kind, const Tensor& gx, const Tensor& gy, const Tensor& x,
                                   const Pool2dParams& p);

// The layout CUDA's pooling kernels run in (x, gy are first made dense in it): x's suggested one, in which the raw
// op allocates the output (gx), when the output is dense in it; else the output's own.
inline MemoryFormat pool_memory_format(const Tensor& x, const Tensor& out) {
  const MemoryFormat f = x.suggest_memory_format();
  if (out.is_contiguous(f)) return f;
  return out.is_contiguous() ? MemoryFormat::Contiguous : MemoryFormat::ChannelsLast;
}

}  // namespace ember::detail
