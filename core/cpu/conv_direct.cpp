// defines: the direct conv2d forward of conv_direct.h.
#include "conv_direct.h"

#include <algorithm>

#include "lanes.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_HAVE_DIRECT_CONV 1
#endif

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

#ifdef EMBER_HAVE_DIRECT_CONV
namespace {

// One vector of kLanes floats and the few operations the kernel needs; kOcb output channels per register tile
// (AVX-512: 8 x 2 accumulators of 32 registers; AVX2: 4 x 2 of 16).
#ifdef __AVX512F__
constexpr int64_t kLanes = 16;
constexpr int kOcb = 8;
using V = __m512;
inline __mmask16 first(int64_t n) {
  return n >= kLanes ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : static_cast<__mmask16>((1u << n) - 1);
}
inline V vzero() { return _mm512_setzero_ps(); }
inline V vload(const float* p) { return _mm512_loadu_ps(p); }
inline void vstore_n(float* p, int64_t n, V v) { _mm512_mask_storeu_ps(p, first(n), v); }
inline V vbcast(const float* p) { return _mm512_set1_ps(*p); }
inline V vfma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
#else
constexpr int64_t kLanes = 8;
constexpr int kOcb = 4;
using V = __m256;
inline V vzero() { return _mm256_setzero_ps(); }
inline V vload(const float* p) { return _mm256_loadu_ps(p); }
inline void vstore_n(float* p, int64_t n, V v) {
  if (n > 0) lanes::store(p, n, v);
}
inline V vbcast(const float* p) { return _mm256_broadcast_ss(p); }
inline V vfma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
#endif

int64_t padded_channels(int64_t oc) { return (oc + kOcb - 1) / kOcb * kOcb; }

// Output channels [oc0, oc0 + kOcb) of one output row, columns [ow0, ow0 + 2 kLanes) (n of them valid), over every
// tap: xrow is the padded image at (oh, ow0), wt the packed weights at channel oc0, y the output at (oc0, oh, ow0).
// Both vectors read a whole row of lanes; lanes past n hold values of the next row or the slack, never stored.
inline void forward_tile(int64_t taps, const int32_t* tap, int64_t ocpad, const float* xrow, const float* wt,
                         const float* b, int64_t ocs, float* y, int64_t ohw, int64_t n) {
  V acc[kOcb][2];
#pragma GCC unroll 8
  for (int r = 0; r < kOcb; ++r) acc[r][0] = acc[r][1] = b ? vbcast(b + std::min<int64_t>(r, ocs - 1)) : vzero();
  for (int64_t t = 0; t < taps; ++t) {
    const V x0 = vload(xrow + tap[t]), x1 = vload(xrow + tap[t] + kLanes);
    const float* wr = wt + t * ocpad;
#pragma GCC unroll 8
    for (int r = 0; r < kOcb; ++r) {
      const V wv = vbcast(wr + r);
      acc[r][0] = vfma(wv, x0, acc[r][0]);
      acc[r][1] = vfma(wv, x1, acc[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kOcb; ++r) {
    if (r >= ocs) break;
    vstore_n(y + r * ohw, n, acc[r][0]);
    vstore_n(y + r * ohw + kLanes, n - kLanes, acc[r][1]);
  }
}

}  // namespace

bool conv_direct_fits(const ConvGeom& g) {
  return g.p.stride_h == 1 && g.p.stride_w == 1 && g.ckk() <= kDirectMaxTaps && g.OW > 0 && forward_as_gather(g);
}

int64_t conv_direct_slack() { return 2 * kLanes; }

int64_t conv_direct_weights_size(const ConvGeom& g) { return g.ckk() * padded_channels(g.OC); }

void conv_direct_pack_weights(const ConvGeom& g, const float* w, float* out) {
  const int64_t ckk = g.ckk(), ocpad = padded_channels(g.OC);
  std::fill(out, out + ckk * ocpad, 0.f);
  for (int64_t oc = 0; oc < g.OC; ++oc)
    for (int64_t t = 0; t < ckk; ++t) out[t * ocpad + oc] = w[oc * ckk + t];
}

void conv_direct_forward(const ConvGeom& g, const ImplicitCols& cols, const float* xpad, const float* wpacked,
                         const float* b, float* y) {
  const int64_t ohw = g.ohw(), ocpad = padded_channels(g.OC);
  for (int64_t oc0 = 0; oc0 < g.OC; oc0 += kOcb) {
    const int64_t ocs = std::min<int64_t>(kOcb, g.OC - oc0);
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow0 = 0; ow0 < g.OW; ow0 += 2 * kLanes)
        forward_tile(cols.taps, cols.taps_table(), ocpad, xpad + oh * cols.PW + ow0, wpacked + oc0,
                     b ? b + oc0 : nullptr, ocs, y + oc0 * ohw + oh * g.OW + ow0, ohw, g.OW - ow0);
  }
}

#else

bool conv_direct_fits(const ConvGeom&) { return false; }
int64_t conv_direct_slack() { return 0; }
int64_t conv_direct_weights_size(const ConvGeom&) { return 0; }
void conv_direct_pack_weights(const ConvGeom&, const float*, float*) {
  throw InternalError("conv_direct: this build has no AVX2/FMA kernel");
}
void conv_direct_forward(const ConvGeom&, const ImplicitCols&, const float*, const float*, const float*, float*) {
  throw InternalError("conv_direct: this build has no AVX2/FMA kernel");
}
#endif

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
