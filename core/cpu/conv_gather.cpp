// defines: ImplicitCols (conv_gather.h): the offset tables and the zero-padded copy that let the float32 GEMM read a
// convolution's column matrix from the image itself.
#include "conv_gather.h"

#include <algorithm>

#include "gemm.h"
#include "lanes.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

ImplicitCols::ImplicitCols(const Correlation& k)
    : C(k.C),
      H(k.H),
      W(k.W),
      ph(k.ph),
      pw(k.pw),
      PH(padded(k.H, k.ph, k.OH, k.sh, k.KH)),
      PW(padded(k.W, k.pw, k.OW, k.sw, k.KW)),
      taps(k.C * k.KH * k.KW),
      positions(k.OH * k.OW),
      pos(sizeof(int32_t) * static_cast<size_t>(positions)),
      tap(sizeof(int32_t) * static_cast<size_t>(taps)) {
  int32_t* p = pos.as<int32_t>();
  for (int64_t oh = 0; oh < k.OH; ++oh)
    for (int64_t ow = 0; ow < k.OW; ++ow) *p++ = static_cast<int32_t>(oh * k.sh * PW + ow * k.sw);
  int32_t* t = tap.as<int32_t>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t kh = 0; kh < k.KH; ++kh)
      for (int64_t kw = 0; kw < k.KW; ++kw) *t++ = static_cast<int32_t>((c * PH + kh) * PW + kw);
}

namespace {
// o[0, n) = x[0, n) for a plane's row of a few tens of floats: vector copies and one masked tail, not a memmove
// call per row (which cost more than the copying on the CNN's 14- and 28-float rows).
inline void copy_row(const float* x, float* o, int64_t n) {
#ifdef __AVX2__
  for (int64_t i = 0; i < n; i += 8) lanes::store(o + i, n - i, lanes::load(x + i, n - i));
#else
  std::copy_n(x, n, o);
#endif
}
}  // namespace

void ImplicitCols::pad(const float* x, float* out, bool borders_zero) const {
  if (!borders_zero) std::fill(out, out + padded_size(), 0.f);
  for (int64_t c = 0; c < C; ++c, x += H * W) {
    float* o = out + c * PH * PW + ph * PW + pw;
    for (int64_t h = 0; h < H; ++h) copy_row(x + h * W, o + h * PW, W);
  }
}

Correlation forward_cols(const ConvGeom& g) {
  return {g.C, g.H, g.W, g.KH, g.KW, g.OH, g.OW, g.p.stride_h, g.p.stride_w, g.p.pad_h, g.p.pad_w};
}

bool forward_as_gather(const ConvGeom& g) {
  return ImplicitCols::fits(g.C, ImplicitCols::padded(g.H, g.p.pad_h, g.OH, g.p.stride_h, g.KH),
                            ImplicitCols::padded(g.W, g.p.pad_w, g.OW, g.p.stride_w, g.KW));
}

bool input_grad_as_correlation(const ConvGeom& g) {
  const int64_t qh = g.KH - 1 - g.p.pad_h, qw = g.KW - 1 - g.p.pad_w;
  return g.p.stride_h == 1 && g.p.stride_w == 1 && qh >= 0 && qw >= 0 &&
         ImplicitCols::fits(g.OC, ImplicitCols::padded(g.OH, qh, g.H, 1, g.KH),
                            ImplicitCols::padded(g.OW, qw, g.W, 1, g.KW));
}

Correlation input_grad_cols(const ConvGeom& g) {
  return {g.OC, g.OH, g.OW, g.KH, g.KW, g.H, g.W, 1, 1, g.KH - 1 - g.p.pad_h, g.KW - 1 - g.p.pad_w};
}

void pack_flipped_weights(const ConvGeom& g, const float* w, float* out) {
  const int64_t K = g.OC * g.KH * g.KW, kk = g.KH * g.KW;
  Scratch wf(sizeof(float) * static_cast<size_t>(K * g.C));  // [(oc, kh, kw), c], row-major
  float* f = wf.as<float>();
  for (int64_t oc = 0; oc < g.OC; ++oc)
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t k = 0; k < kk; ++k) f[(oc * kk + (kk - 1 - k)) * g.C + c] = w[(oc * g.C + c) * kk + k];
  sgemm_pack_b(K, g.C, f, g.C, 1, out);
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
