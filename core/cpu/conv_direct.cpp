// defines: the direct conv2d forward and (AVX-512) weight gradient of conv_direct.h.
#include "conv_direct.h"

#include <algorithm>
#include <utility>

#include "lanes.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_HAVE_DIRECT_CONV 1
#ifdef __AVX512F__
#define EMBER_HAVE_DIRECT_WGRAD 1  // the weight gradient's kernel: AVX-512 only (conv_direct_weight_grad_fits)
#endif
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
inline V vload_n(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(first(n), p); }  // zeros past n
inline float vsum(V v) { return _mm512_reduce_add_ps(v); }
constexpr int kWgOcb = 4, kWgTaps = 5;  // the weight gradient's tile: 20 accumulators, 5 window rows, of 32
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

#ifdef EMBER_HAVE_DIRECT_WGRAD
// The weight gradient (conv_direct.h): the image zero-padded by ImplicitCols (rows of PW = OW + KW - 1 at stride
// 1), gy[n] read in place.

// The state of one column's run apart from its sums, which stay in registers (a local array of the tile).
struct WgradRun {
  const float* gy[kWgOcb];  // the column's row 0 in each channel's gy[n]
  const float* x;           // the padded image at (kh0, kw), the column's first lane
  int64_t gs, xs, n;        // row strides; the lanes inside the image, [0, n) (Tail loads zero the others)
  const char* next;         // memory to fetch into L2 meanwhile, a line a row, up to next_end
  const char* next_end;
};

template <bool Tail>
[[gnu::always_inline]] inline V wload(const float* p, int64_t n) {
  return Tail ? vload_n(p, n) : vload(p);
}

// Output row oh of a column (output columns [ow, ow + kLanes), kWgOcb channels, taps (c, kh0 + k, kw) for k < K):
// tap k reads image row oh + k (from kh0), which tap k + 1 read at output row oh - 1. So the K image vectors stay in
// registers as a window, and each row loads one new one (row oh + K - 1) and kWgOcb of gy for kWgOcb x K FMAs. The
// slot of image row i is i mod K, a constant in each step of the K-fold unrolled loop (no register moves).
template <int K, bool Tail, int Phase>
[[gnu::always_inline]] inline void wgrad_row(WgradRun& w, int64_t oh, V (&xr)[K], V (&acc)[kWgOcb][K]) {
  if (w.next < w.next_end) {
    _mm_prefetch(w.next, _MM_HINT_T1);
    w.next += 64;
  }
  xr[(Phase + K - 1) % K] = wload<Tail>(w.x + (oh + K - 1) * w.xs, w.n);
  V g[kWgOcb];
#pragma GCC unroll 4
  for (int r = 0; r < kWgOcb; ++r) g[r] = wload<Tail>(w.gy[r] + oh * w.gs, w.n);
#pragma GCC unroll 5
  for (int k = 0; k < K; ++k)
#pragma GCC unroll 4
    for (int r = 0; r < kWgOcb; ++r) acc[r][k] = vfma(g[r], xr[(Phase + k) % K], acc[r][k]);
}

template <int K, bool Tail, int... P>
[[gnu::always_inline]] inline void wgrad_rows(WgradRun& w, int64_t oh, V (&xr)[K], V (&acc)[kWgOcb][K],
                                              std::integer_sequence<int, P...>) {
  (wgrad_row<K, Tail, P>(w, oh + P, xr, acc), ...);
}

// A column over every output row, K rows at a time (one per window phase), then the last rows in the phases the
// loop would have gone on with.
template <int K, bool Tail>
[[gnu::always_inline]] inline void wgrad_column(WgradRun& w, int64_t OH, V (&acc)[kWgOcb][K]) {
  V xr[K];
#pragma GCC unroll 5
  for (int k = 0; k < K - 1; ++k) xr[k] = wload<Tail>(w.x + k * w.xs, w.n);
  int64_t oh = 0;
  for (; oh + K <= OH; oh += K) wgrad_rows<K, Tail>(w, oh, xr, acc, std::make_integer_sequence<int, K>{});
  if (oh < OH) wgrad_row<K, Tail, 0>(w, oh++, xr, acc);
  if constexpr (K > 2)
    if (oh < OH) wgrad_row<K, Tail, 1>(w, oh++, xr, acc);
  if constexpr (K > 3)
    if (oh < OH) wgrad_row<K, Tail, 2>(w, oh++, xr, acc);
  if constexpr (K > 4)
    if (oh < OH) wgrad_row<K, Tail, 3>(w, oh++, xr, acc);
}

// A tile: its sums loaded from accmem, its columns of output positions run, the sums stored back. The last column,
// partly past OW, loads both operands masked: gy's lanes there would read the next row, and the image's pixels
// there, times gy's zeros, would still give NaN where infinite.
template <int K>
void wgrad_tile_k(const ConvGeom& g, int64_t PW, const float* const* gyrows, const float* x, float* accmem,
                  const char*& next, const char* next_end) {
  V acc[kWgOcb][K];
#pragma GCC unroll 4
  for (int r = 0; r < kWgOcb; ++r)
#pragma GCC unroll 5
    for (int k = 0; k < K; ++k) acc[r][k] = vload(accmem + (r * kWgTaps + k) * kLanes);
  WgradRun w{{}, x, g.OW, PW, kLanes, next, next_end};
  const int64_t whole = g.OW / kLanes * kLanes;
  for (int64_t ow = 0; ow <= whole && ow < g.OW; ow += kLanes) {
    for (int r = 0; r < kWgOcb; ++r) w.gy[r] = gyrows[r] + ow;
    w.x = x + ow;
    w.n = g.OW - ow;
    if (ow < whole) wgrad_column<K, false>(w, g.OH, acc);
    else wgrad_column<K, true>(w, g.OH, acc);
  }
  next = w.next;
#pragma GCC unroll 4
  for (int r = 0; r < kWgOcb; ++r)
#pragma GCC unroll 5
    for (int k = 0; k < K; ++k) vstore_n(accmem + (r * kWgTaps + k) * kLanes, kLanes, acc[r][k]);
}

// next, next_end: memory the caller reads after this tile (the next image's gy), fetched into L2 a line per row
// meanwhile; advanced past what was asked for. k: 3, 4 or 5 taps (tap_group).
void wgrad_tile(const ConvGeom& g, int64_t PW, int64_t k, const float* const* gyrows, const float* x, float* accmem,
                const char*& next, const char* next_end) {
  if (k == 3) return wgrad_tile_k<3>(g, PW, gyrows, x, accmem, next, next_end);
  if (k == 4) return wgrad_tile_k<4>(g, PW, gyrows, x, accmem, next, next_end);
  return wgrad_tile_k<5>(g, PW, gyrows, x, accmem, next, next_end);
}

// The tap groups: for each input channel c and kernel column kw, the kernel rows in runs of at most kWgTaps, as even
// as they come (KH = 7: 3 + 4, never 5 + 2), so that with KH >= 3 (conv_direct_weight_grad_fits) every tile has at
// least 4 x 3 sums to hide the FMA latency behind (a 1 x 1 kernel's tile of 4 ran at half the GEMM form's speed).
int64_t row_runs(const ConvGeom& g) { return (g.KH + kWgTaps - 1) / kWgTaps; }
int64_t tap_groups(const ConvGeom& g) { return g.C * g.KW * row_runs(g); }
int64_t channel_groups(const ConvGeom& g) { return (g.OC + kWgOcb - 1) / kWgOcb; }
constexpr int64_t kTileFloats = kWgOcb * kWgTaps * kLanes;
int64_t acc_size(const ConvGeom& g) { return channel_groups(g) * tap_groups(g) * kTileFloats; }
struct TapGroup {
  int64_t c, kw, kh0, k;
};
TapGroup tap_group(const ConvGeom& g, int64_t tg) {
  const int64_t runs = row_runs(g), run = tg % runs, kw = tg / runs % g.KW, c = tg / (runs * g.KW);
  const int64_t kh0 = run * g.KH / runs, kh1 = (run + 1) * g.KH / runs;
  return {c, kw, kh0, kh1 - kh0};
}

#endif  // EMBER_HAVE_DIRECT_WGRAD

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

#ifdef EMBER_HAVE_DIRECT_WGRAD
bool conv_direct_weight_grad_fits(const ConvGeom& g) { return conv_direct_fits(g) && g.KH >= 3; }

int64_t conv_direct_weight_grad_size(const ConvGeom& g, const ImplicitCols& cols) {
  return acc_size(g) + cols.padded_size();
}

void conv_direct_weight_grad_image(const ConvGeom& g, const ImplicitCols& cols, const float* x, const float* gy,
                                   float* buf, bool first, const float* gy_next) {
  float* acc = buf;
  float* xpad = acc + acc_size(g);
  if (first) std::fill(acc, xpad, 0.f);
  cols.pad(x, xpad, !first);  // a later image: the borders are zero already
  const int64_t groups = tap_groups(g);
  // The next image's gy comes from L3 or memory: it is fetched into L2 while this one's tiles run (on the CNN's
  // first layer, 0.85 -> 0.75 ms for the batch's weight gradient).
  const char* next = reinterpret_cast<const char*>(gy_next);
  const char* next_end = gy_next ? reinterpret_cast<const char*>(gy_next + g.OC * g.ohw()) : nullptr;
  // A channel group's rows of gy stay in L1 across its tap groups, and the padded image across all.
  for (int64_t cg = 0; cg < channel_groups(g); ++cg) {
    const float* rows[kWgOcb];  // a last, short group repeats its last channel; finish drops those sums
    for (int r = 0; r < kWgOcb; ++r) rows[r] = gy + std::min<int64_t>(cg * kWgOcb + r, g.OC - 1) * g.ohw();
    for (int64_t tg = 0; tg < groups; ++tg) {
      const TapGroup t = tap_group(g, tg);
      wgrad_tile(g, cols.PW, t.k, rows, xpad + (t.c * cols.PH + t.kh0) * cols.PW + t.kw,
                 acc + (cg * groups + tg) * kTileFloats, next, next_end);
    }
  }
}

void conv_direct_weight_grad_finish(const ConvGeom& g, const float* buf, float* gw) {
  const int64_t ckk = g.ckk(), groups = tap_groups(g);
  for (int64_t cg = 0; cg < channel_groups(g); ++cg)
    for (int64_t tg = 0; tg < groups; ++tg) {
      const TapGroup t = tap_group(g, tg);
      for (int r = 0; r < kWgOcb; ++r)
        for (int64_t k = 0; k < t.k; ++k) {
          const int64_t oc = cg * kWgOcb + r;
          if (oc < g.OC)
            gw[oc * ckk + (t.c * g.KH + t.kh0 + k) * g.KW + t.kw] =
                vsum(vload(buf + (cg * groups + tg) * kTileFloats + (r * kWgTaps + k) * kLanes));
        }
    }
}

#endif

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

#ifndef EMBER_HAVE_DIRECT_WGRAD
// The weight gradient's kernel is AVX-512 only: AVX2's 16 registers leave no room for a window of image rows beside
// enough accumulators to hide the FMA latency, and every variant tried there ran slower than the GEMM's gather form
// (conv.cpp), which stays.
bool conv_direct_weight_grad_fits(const ConvGeom&) { return false; }
int64_t conv_direct_weight_grad_size(const ConvGeom&, const ImplicitCols&) { return 0; }
void conv_direct_weight_grad_image(const ConvGeom&, const ImplicitCols&, const float*, const float*, float*, bool,
                                   const float*) {
  throw InternalError("conv_direct: the weight gradient's kernel is AVX-512 only");
}
void conv_direct_weight_grad_finish(const ConvGeom&, const float*, float*) {
  throw InternalError("conv_direct: the weight gradient's kernel is AVX-512 only");
}
#endif

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
