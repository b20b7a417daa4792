// defines: 16-bit convolutions through cuDNN's graph API (cudnn_conv_graph.cpp, on the header-only cudnn-frontend),
// which cudnn.cpp tries before the legacy cudnnConvolution* calls. Private to cuda/src; no CUDA headers.
#pragma once
#include "ember/core/backend.h"

namespace ember::cuda::detail {

enum class ConvPass { Forward, Data, Filter };

// Runs one pass of a convolution x [N, C, H, W] * w [K, C, R, S] -> y [N, K, P, Q] through a cached cuDNN graph
// (engine heuristics mode A, or every engine timed once per shape under cuda::set_cudnn_benchmark(true); the legacy
// path's rules: deterministic engines unless benchmarking without use_deterministic_algorithms, at most 1 GiB of
// workspace, the legacy calls when it does not fit in memory): Forward writes `out` = y from x and w; Data writes
// `out` (x's shape) from y = the output's gradient and w; Filter writes `out` (w's shape) from x and y. Every tensor
// in NCHW or channels-last strides, as given. Returns false, having done nothing, where the graph path does not
// serve the call: a build without the cuDNN frontend, float32 / float64 (the legacy calls keep their TF32 rule), a
// pointer not 16-byte aligned, EMBER_CUDNN_CONV_GRAPH=0, or a shape cuDNN refused (remembered per shape).
// EMBER_CUDNN_CONV_GRAPH=require makes a refusal a DeviceError instead (the GPU check proves the path ran so).
bool cudnn_graph_conv(ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& out,
                      const Conv2dParams& p);

}  // namespace ember::cuda::detail
