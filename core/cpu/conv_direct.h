// defines: a direct float32 conv2d forward for a small window (C * KH * KW <= kDirectMaxTaps, stride 1): the first
// layer of an image model (1 -> 32 channels, 5 x 5: K = 25; RGB 3 x 3: K = 27). There the GEMM forms spend their
// time on a depth of 25 (an epilogue every 25 steps of a tile) and on copies (im2col, or y^T transposed into y).
// This kernel keeps an output row's vectors along ow in registers for a tile of output channels, reads the
// zero-padded image (ImplicitCols' layout, conv_gather.h) directly and writes y[n] in place: no copy but the padding.
// (The weight gradient in the same form measured slower than the GEMM's gather form, conv.cpp: gy[n] has to be read
// with unaligned, masked loads, eight for every two of the image, or first copied to whole rows.) Used by conv.cpp.
// Private to core/cpu.
#pragma once
#include <cstdint>

#include "conv_gather.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

inline constexpr int64_t kDirectMaxTaps = 32;

// Whether this build has the kernels and they take g: stride 1, C * KH * KW <= kDirectMaxTaps, int32 offsets.
bool conv_direct_fits(const ConvGeom& g);
// Floats the kernels may read past the padded image (a row's last vectors run on; those lanes are dropped): a
// buffer for the padded image needs this many more, initialised.
int64_t conv_direct_slack();

// The weights as the forward kernel reads them: [C * KH * KW, OC rounded up to its tile], zero-padded.
int64_t conv_direct_weights_size(const ConvGeom& g);
void conv_direct_pack_weights(const ConvGeom& g, const float* w, float* out);
// y[n] [OC, OH, OW] = the correlation of the padded image xpad with the packed weights, plus b[oc] when b is
// non-null.
void conv_direct_forward(const ConvGeom& g, const ImplicitCols& cols, const float* xpad, const float* wpacked,
                         const float* b, float* y);

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
