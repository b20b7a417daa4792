// defines: a direct float32 conv2d forward, and weight gradient, for a small window (C * KH * KW <= kDirectMaxTaps,
// stride 1): the first layer of an image model (1 -> 32 channels, 5 x 5: K = 25; RGB 3 x 3: K = 27). There the GEMM
// forms spend their time on a depth of 25 (an epilogue every 25 steps of a tile) and on copies (im2col, or y^T
// transposed into y). This kernel keeps an output row's vectors along ow in registers for a tile of output channels,
// reads the zero-padded image (ImplicitCols' layout, conv_gather.h) directly and writes y[n] in place: no copy but the
// padding. The weight gradient of such a layer has its own kernel in the AVX-512 variant (the forward's form,
// broadcasting gy, measured slower than the GEMM's gather form). gW[oc, tap] is a dot product over the output positions
// of gy[n][oc] and the image shifted by the tap: the kernel runs it along the vector lanes, 4 channels x 5 taps of one
// kernel column at a time (the taps' image rows slide down a window in registers), and keeps the partial sums lane by
// lane until the part's last image. gy[n] is read in place, with no gy[n]^T to pack (the gather GEMM's transpose cost
// half as much as its products on the CNN's first layer): 0.92 -> 0.75 ms for that layer's weight gradient on 64
// images, 60% of one core's FMA limit (Xeon model 207). Used by conv.cpp. Private to core/cpu.
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

// The weight gradient, over the images of one thread's part, in buf (conv_direct_weight_grad_size floats: the lane
// sums and x[n] zero-padded by cols, the forward's ImplicitCols): image n's x[n] [C, H, W] and gy[n] [OC, OH, OW]
// added into the sums (first: the part's first image, which starts them at zero); finish writes gw
// [OC, C * KH * KW], the sums of the lanes. gy_next: the part's next gy[n + 1] (or null), fetched into L2 meanwhile.
// The AVX-512 variant, where conv_direct_fits and KH >= 3 (a window of image rows to slide; the tiles of a 1 x 1 or
// 1 x k kernel would be too small to hide the FMA latency: 1 x 1 from 16 channels ran at half the GEMM form's speed).
bool conv_direct_weight_grad_fits(const ConvGeom& g);
int64_t conv_direct_weight_grad_size(const ConvGeom& g, const ImplicitCols& cols);
void conv_direct_weight_grad_image(const ConvGeom& g, const ImplicitCols& cols, const float* x, const float* gy,
                                   float* buf, bool first, const float* gy_next);
void conv_direct_weight_grad_finish(const ConvGeom& g, const float* buf, float* gw);

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
