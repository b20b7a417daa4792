// defines: ConvGeom (the shapes of one conv2d call), geometry() and ConvSplit (how its batch is cut among the
// threads, Note [Conv work split] in conv.cpp), shared by the float conv (conv.cpp) and the bf16 one (conv_bf16.cpp).
// Private to core/cpu.
#pragma once
#include <algorithm>
#include <cstdint>

#include "ember/core/backend.h"
#include "isa.h"

#include "ember/internal/conv_split.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

struct ConvGeom {
  int64_t N, C, H, W, OC, KH, KW, OH, OW;
  Conv2dParams p;
  // For stride 1 with OW == W: per kw, OH*OW integers of the element's size, all ones where the output column
  // reads inside the image (set by ColumnMasks)
  const void* col_masks = nullptr;
  int64_t ckk() const { return C * KH * KW; }
  int64_t ohw() const { return OH * OW; }
  bool same_width() const { return p.stride_h == 1 && p.stride_w == 1 && OW == W; }
};

// How the batch is split (Note [Conv work split]): `parts` threads, images [part * per, (part + 1) * per).
struct ConvSplit {
  int64_t parts, per;
  ConvSplit(const ConvGeom& g, int threads) {  // (ember/internal/conv_split.h: memory::plan sizes by it too)
    const detail::ConvParts s = detail::conv_parts(g.N, 2 * g.N * g.OC * g.ckk() * g.ohw(), threads);
    parts = s.parts;
    per = s.per;
  }
};

inline ConvGeom geometry(const Tensor& x, const Tensor& w, int64_t OH, int64_t OW, const Conv2dParams& p) {
  return {x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2), w.size(3), OH, OW, p};
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
