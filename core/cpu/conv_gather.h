// defines: ImplicitCols, a convolution's column matrix read in place from its zero-padded image (no im2col), for
// the float32 GEMM's gather form (sgemm_serial_gather in gemm.h); used by conv.cpp. Private to core/cpu.
#pragma once
#include <algorithm>
#include <cstdint>

#include "conv_geom.h"
#include "cpu_backend.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

// The column matrix of a correlation of C planes of H x W, zero-padded by (ph, pw), with KH x KW windows taken at
// strides (sh, sw) for OH x OW outputs: col[(c, kh, kw), (oh, ow)] = padded[c][(oh*sh + kh) * PW + ow*sw + kw].
// With the image copied into zero-padded planes of PH x PW, that is padded[pos[(oh, ow)] + tap[(c, kh, kw)]]:
// no bounds, no masks, so the GEMM kernel reads it directly (as A with rows `pos` and steps `tap`, or its
// transpose with the two swapped). Costs one padded copy per image (C * PH * PW floats) instead of im2col's
// C * KH * KW * OH * OW.
struct Correlation {
  int64_t C, H, W, KH, KW, OH, OW, sh, sw, ph, pw;
};

struct ImplicitCols {
  int64_t C, H, W, ph, pw, PH, PW, taps, positions;
  Scratch pos, tap;  // int32_t tables: positions and taps entries

  explicit ImplicitCols(const Correlation& k);
  // the padded extent of one axis (every window inside: (O - 1) * stride + K <= size + 2 pad for a conv's own
  // output size O), and whether C planes of PH x PW have int32 offsets
  static int64_t padded(int64_t size, int64_t pad, int64_t O, int64_t stride, int64_t K) {
    return std::max(size + 2 * pad, (O - 1) * stride + K);
  }
  static bool fits(int64_t C, int64_t PH, int64_t PW) { return C * PH * PW < (int64_t{1} << 31) - 1; }
  int64_t padded_size() const { return C * PH * PW; }
  const int32_t* positions_table() const { return pos.as<int32_t>(); }
  const int32_t* taps_table() const { return tap.as<int32_t>(); }
  // planes x [C, H, W] into out [C, PH, PW], zeros around; borders_zero: out holds this geometry's zero borders
  // already (a later image into the same buffer), so only the planes' rows are copied
  void pad(const float* x, float* out, bool borders_zero = false) const;
};

// The forward's implicit column matrix (the input planes with the conv's padding and strides) and the input
// gradient's: for stride 1, gx[n] is the correlation of gy[n], zero-padded by (KH - 1 - ph, KW - 1 - pw), with
// the kernel flipped and its channel axes swapped, and has no col2im.
Correlation forward_cols(const ConvGeom& g);
bool forward_as_gather(const ConvGeom& g);          // offsets in int32
bool input_grad_as_correlation(const ConvGeom& g);  // stride 1, padding below the kernel size, offsets in int32
Correlation input_grad_cols(const ConvGeom& g);

// B of the input gradient's GEMM, packed: Wf[(oc, kh, kw), c] = w[oc, c, KH - 1 - kh, KW - 1 - kw].
void pack_flipped_weights(const ConvGeom& g, const float* w, float* out);

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
