// defines: conv_parts, how many contiguous runs of images ("parts", one per thread) the CPU convolution cuts a batch
// into (core/cpu/conv_geom.h's ConvSplit), here so that memory::plan can size the weight gradient's per-part
// buffers the backward makes (parts - 1 of them, one weight each) without the kernels' headers.
#pragma once
#include <algorithm>
#include <cstdint>

namespace ember::detail {

// n images, flops of the whole convolution, on `threads`: below ~2 MFLOP per thread the fork costs more than it
// saves; no part left empty (N = 5 on 4 threads: 2, 2, 1). Returns {parts, images per part}.
struct ConvParts {
  int64_t parts, per;
};
inline ConvParts conv_parts(int64_t n, int64_t flops, int threads) {
  int64_t parts = std::clamp<int64_t>(std::min<int64_t>(threads, flops >> 21), 1, std::max<int64_t>(n, 1));
  const int64_t per = std::max<int64_t>(1, (n + parts - 1) / parts);
  parts = std::max<int64_t>(1, (n + per - 1) / per);
  return {parts, per};
}

}  // namespace ember::detail
