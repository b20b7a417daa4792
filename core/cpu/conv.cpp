// defines: the CPU conv2d forward and backward (NCHW) around GEMMs: implicit (the column matrix read from the
// zero-padded image, conv_gather.h) or with im2col / col2im, whichever form costs less per shape.
// Note [Conv work split]: the batch is cut into one contiguous run of images per thread ("parts"); each thread
// walks its run one image at a time with serial GEMMs, so there is one fork/join per call. The weight gradient is
// summed per part and the parts added at the end.
//   forward:  y[n] = W[OC, CKK] @ col(x[n]) [CKK, OH*OW] + b, or y[n]^T = col^T @ W^T (ForwardPlan); for a
//             window of at most 32 values at stride 1 (a first layer), the direct kernel of conv_direct.h
//   backward: gW += gy[n] @ col(x[n])^T, or gW^T += col(x[n]) @ gy[n]^T;
//             gx[n] = col2im(W^T @ gy[n]), or for stride 1 a correlation of gy[n] with the flipped kernel
//             (BackwardPlan)
// Where the column matrix is written (im2col), it is never held whole: the forward walks K in the GEMM's slices
// and the backward walks its rows in blocks of ~128 KB, each written by im2col (or by the input-gradient GEMM)
// and consumed (by the GEMM, or by col2im) while it is in L2. With our float32 GEMM the weights are packed once
// per call, not once per image; the forward's im2col writes its rows straight into the GEMM's packed B layout
// (and the weight gradient's into its packed B, 16 rows at a time), and the bias is one more column of W against
// a row of ones (in the gather form, the GEMM adds it as it stores y[n]^T's first K slice).
#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>

#include "conv_bf16.h"
#include "conv_direct.h"
#include "conv_gather.h"
#include "conv_geom.h"
#include "cpu_backend.h"
#include "ember/internal/conv_channels_last.h"
#include "gemm.h"
#include "parallel.h"
#include "vec_math.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {
namespace {

// The output columns ow whose input column ow*sw - pw + kw lies inside [0, W): [lo, hi).
inline std::pair<int64_t, int64_t> valid_cols(int64_t OW, int64_t W, int64_t sw, int64_t pw, int64_t kw) {
  // ow*sw >= pw - kw  and  ow*sw <= W - 1 + pw - kw
  int64_t lo = pw - kw <= 0 ? 0 : (pw - kw + sw - 1) / sw;
  int64_t hi = W - 1 + pw - kw < 0 ? 0 : (W - 1 + pw - kw) / sw + 1;
  return {std::min(lo, OW), std::min(std::max(hi, lo), OW)};
}

// Bit masks of the columns that are inside the image, one row of OH*OW per kw, built once per call for the
// same-width paths: a row is then copied (im2col) or added (col2im) in one pass that ANDs each value with its
// mask, instead of a copy followed by scattered zero stores at the left and right edges.
template <class T>
using MaskInt = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
template <class T>
struct ColumnMasks {
  Scratch buf;
  ColumnMasks(ConvGeom& g) : buf(g.same_width() ? sizeof(T) * static_cast<size_t>(g.KW * g.ohw()) : 0) {
    if (!g.same_width()) return;
    MaskInt<T>* m = buf.as<MaskInt<T>>();
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const auto [lo, hi] = valid_cols(g.OW, g.W, 1, g.p.pad_w, kw);
      for (int64_t i = 0; i < g.ohw(); ++i) {
        const int64_t ow = i % g.W;
        m[kw * g.ohw() + i] = ow >= lo && ow < hi ? ~MaskInt<T>(0) : MaskInt<T>(0);
      }
    }
    g.col_masks = m;
  }
};

// Row (c, kh, kw) of one image's column matrix: r[(oh, ow)] = x[c, oh*sh - ph + kh, ow*sw - pw + kw], 0 outside
// the image. For stride 1 with OW == W (e.g. "same" padding) the row is x[c] read at the constant flat offset
// (kh - ph)*W + (kw - pw) over its valid output rows, each value ANDed with its column's mask (ColumnMasks) so
// that the |kw - pw| columns per output row that fall off the left or right edge read as 0. Otherwise the valid
// columns of each output row are found once and copied in an inline loop (rows are short).
template <class T>
void im2col_row(const ConvGeom& g, const T* x, int64_t c, int64_t kh, int64_t kw, T* __restrict r) {
  const T* xc = x + c * g.H * g.W;
  if (g.same_width()) {
    const int64_t W = g.W, OHW = g.OH * W;
    // output rows whose input row oh - ph + kh lies in [0, H)
    const int64_t oh_lo = std::clamp<int64_t>(g.p.pad_h - kh, 0, g.OH);
    const int64_t oh_hi = std::clamp<int64_t>(g.H + g.p.pad_h - kh, oh_lo, g.OH);
    const int64_t shift = (kh - g.p.pad_h) * W + (kw - g.p.pad_w);
    // The run is also clipped to x[c] itself: the entries that leaves out (reading before the first or after
    // the last element of the channel) are all masked edge entries, so they are zero either way.
    const int64_t i0 = std::max(oh_lo * W, -shift), i1 = std::max(i0, std::min(oh_hi * W, g.H * W - shift));
    const MaskInt<T>* __restrict m = static_cast<const MaskInt<T>*>(g.col_masks) + kw * OHW;
    const T* __restrict xs = xc + shift;
    for (int64_t i = 0; i < i0; ++i) r[i] = T(0);
    for (int64_t i = i0; i < i1; ++i) r[i] = std::bit_cast<T>(std::bit_cast<MaskInt<T>>(xs[i]) & m[i]);
    for (int64_t i = i1; i < OHW; ++i) r[i] = T(0);
    return;
  }
  const auto [lo, hi] = valid_cols(g.OW, g.W, g.p.stride_w, g.p.pad_w, kw);
  const int64_t shift = kw - g.p.pad_w;  // input column = ow * sw + shift
  for (int64_t oh = 0; oh < g.OH; ++oh, r += g.OW) {
    const int64_t ih = oh * g.p.stride_h - g.p.pad_h + kh;
    if (ih < 0 || ih >= g.H) {
      for (int64_t ow = 0; ow < g.OW; ++ow) r[ow] = T(0);
      continue;
    }
    const T* __restrict xr = xc + ih * g.W;
    for (int64_t ow = 0; ow < lo; ++ow) r[ow] = T(0);
    if (g.p.stride_w == 1) {
      for (int64_t ow = lo; ow < hi; ++ow) r[ow] = xr[ow + shift];
    } else {
      for (int64_t ow = lo; ow < hi; ++ow) r[ow] = xr[ow * g.p.stride_w + shift];
    }
    for (int64_t ow = hi; ow < g.OW; ++ow) r[ow] = T(0);
  }
}

// (c, kh, kw) of the column-matrix rows p0, p0 + 1, ... (counters, not a division per row)
struct KernelPos {
  const ConvGeom& g;
  int64_t c, kh, kw;
  KernelPos(const ConvGeom& g_, int64_t p) : g(g_), c(p / (g_.KH * g_.KW)), kh(p / g_.KW % g_.KH), kw(p % g_.KW) {}
  void next() {
    if (++kw < g.KW) return;
    kw = 0;
    if (++kh < g.KH) return;
    kh = 0;
    ++c;
  }
};

// Rows [p0, p1) of one image's column matrix, as a row-major [p1 - p0, OH*OW] block.
template <class T>
void im2col_rows(const ConvGeom& g, const T* x, int64_t p0, int64_t p1, T* col) {
  for (KernelPos k(g, p0); p0 < p1; ++p0, k.next(), col += g.ohw()) im2col_row(g, x, k.c, k.kh, k.kw, col);
}

// The same written in the float32 GEMM's packed B layout for a [p1 - p0, OH*OW] operand of one K slice
// (PackedBLayout(p1 - p0, OH*OW), p1 - p0 <= kSgemmKC): row p's 16-column piece n sits at n*(p1 - p0) + p*16.
// Row CKK, one past the column matrix, is all ones (the forward's bias row).
// Each row is built in `row` (lay.npad floats, in L1) and copied out in pieces, the padding columns past OH*OW
// zeroed. This replaces writing the column block and then packing it.
// ([[maybe_unused]]: builds without the AVX2 kernel never call it.)
[[maybe_unused]] void im2col_packed(const ConvGeom& g, const float* x, int64_t p0, int64_t p1, const PackedBLayout& lay,
                                    float* row, float* out) {
  const int64_t K = p1 - p0, npad = lay.npad;
  std::fill(row + g.ohw(), row + npad, 0.f);
  KernelPos k(g, p0);
  for (int64_t p = 0; p < K; ++p, k.next()) {
    if (p0 + p < g.ckk()) im2col_row(g, x, k.c, k.kh, k.kw, row);
    else std::fill(row, row + g.ohw(), 1.f);  // row CKK: ones, the bias's row (conv2d folds b into W)
    float* dst = out + p * kSgemmNR;
    // a fixed-size memcpy is inlined as vector moves (std::copy_n became a memmove call per piece)
    for (int64_t n = 0; n < npad; n += kSgemmNR, dst += K * kSgemmNR)
      std::memcpy(dst, row + n, sizeof(float) * kSgemmNR);
  }
}

// The adjoint of im2col_row: x[c, ih, iw] += r[(oh, ow)] for every output position that row (c, kh, kw) read
// from inside the image. For stride 1 with OW == W the row adds to x[c] as one contiguous run at the constant
// flat offset, each value ANDed with its column's mask (the masked ones would land in a neighbouring row); the
// run is clipped to x[c], so nothing outside it is touched.
template <class T>
void col2im_row(const ConvGeom& g, const T* r, int64_t c, int64_t kh, int64_t kw, T* x) {
  if (g.same_width()) {
    const int64_t W = g.W, HW = g.H * W;
    const int64_t oh_lo = std::clamp<int64_t>(g.p.pad_h - kh, 0, g.OH);
    const int64_t oh_hi = std::clamp<int64_t>(g.H + g.p.pad_h - kh, oh_lo, g.OH);
    const int64_t shift = (kh - g.p.pad_h) * W + (kw - g.p.pad_w);
    const int64_t i0 = std::max(oh_lo * W, -shift), i1 = std::min(oh_hi * W, HW - shift);
    const MaskInt<T>* __restrict m = static_cast<const MaskInt<T>*>(g.col_masks) + kw * g.ohw();
    T* __restrict xc = x + c * HW + shift;
    for (int64_t i = i0; i < i1; ++i) xc[i] += std::bit_cast<T>(std::bit_cast<MaskInt<T>>(r[i]) & m[i]);
    return;
  }
  const auto [lo, hi] = valid_cols(g.OW, g.W, g.p.stride_w, g.p.pad_w, kw);
  const int64_t shift = kw - g.p.pad_w;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const int64_t ih = oh * g.p.stride_h - g.p.pad_h + kh;
    if (ih < 0 || ih >= g.H) continue;
    T* __restrict xr = x + (c * g.H + ih) * g.W;
    const T* __restrict ro = r + oh * g.OW;
    if (g.p.stride_w == 1) {  // contiguous: vectorises
      for (int64_t ow = lo; ow < hi; ++ow) xr[ow + shift] += ro[ow];
    } else {
      for (int64_t ow = lo; ow < hi; ++ow) xr[ow * g.p.stride_w + shift] += ro[ow];
    }
  }
}

// Adds rows [p0, p1) of a column-gradient block ([p1 - p0, OH*OW]) into one image's x.
template <class T>
void col2im_rows(const ConvGeom& g, const T* col, int64_t p0, int64_t p1, T* x) {
  for (KernelPos k(g, p0); p0 < p1; ++p0, k.next(), col += g.ohw()) col2im_row(g, col, k.c, k.kh, k.kw, x);
}

// Rows of the column matrix handled together: blocks of about 128 KB (at OH*OW = 196, 160 rows for the weight
// gradient, 162 for the input gradient), so that a block and what the GEMM packs from it stay in L2.
inline int64_t rows_per_block(const ConvGeom& g, int64_t unit) {
  const int64_t rows = (int64_t{1} << 15) / std::max<int64_t>(g.ohw(), 1) / unit * unit;
  return std::max<int64_t>(1, std::min(std::max(rows, unit), g.ckk()));
}

// The values an M x N product of our float32 GEMM computes: whole 6-row tiles by 16-column vectors (the cost
// models of the forward's and backward's forms, ForwardPlan and BackwardPlan).
inline int64_t tile_work(int64_t M, int64_t N) { return (M + kSgemmMR - 1) / kSgemmMR * kSgemmMR * ((N + 15) / 16 * 16); }

// --- conv2d_backward, in named steps

// gb[oc] = sum over n, oh, ow of gy[n, oc, oh, ow], in double.
// The bias gradient of one image, each channel's sum in double (sums[oc]). The backward runs it in each image's
// part while gy[n] is still in L2 from its GEMMs, rather than as one more serial pass over all of gy; the
// per-image sums are then added in image order (bias_grad_from_images), so the result does not depend on the
// thread count.
template <class T>
void bias_sums_of_image(const ConvGeom& g, const T* gy_n, double* sums) {
  for (int64_t oc = 0; oc < g.OC; ++oc) sums[oc] = row_sum_double(gy_n + oc * g.ohw(), g.ohw());
}

template <class T>
void bias_grad_from_images(const ConvGeom& g, const double* sums, T* gb) {
  for (int64_t oc = 0; oc < g.OC; ++oc) {
    double s = 0;
    for (int64_t n = 0; n < g.N; ++n) s += sums[n * g.OC + oc];
    gb[oc] = static_cast<T>(s);
  }
}

// The bias gradient alone (neither other gradient wanted): the same sums, image after image.
template <class T>
void bias_grad(const ConvGeom& g, const T* gy, T* gb) {
  Scratch sums(sizeof(double) * static_cast<size_t>(g.N * g.OC));
  for (int64_t n = 0; n < g.N; ++n) bias_sums_of_image(g, gy + n * g.OC * g.ohw(), sums.as<double>() + n * g.OC);
  bias_grad_from_images(g, sums.as<double>(), gb);
}

// What every image of one backward call shares: the geometry, the tensors, and how each gradient is computed.
//  - The weight gradient of a window of at most 32 values and 3 rows or more at stride 1 (a first layer), in the
//    AVX-512 variant: the direct kernel of conv_direct.h, dot products along the output positions with no copy of
//    gy[n] (the GEMM form below transposes it, which on the CNN's first layer cost half as much as the products).
//    Else with our float32 GEMM where its tiles waste less that way (as on the CNN's second layer):
//    gW^T[CKK, OC] += col(x[n]) @ gy[n]^T with col read from the zero-padded image (ImplicitCols, no im2col) and
//    gy[n]^T packed once per image, summed over the part's images and transposed into place once per part.
//    Otherwise gW[:, block] += gy[n] @ col[block]^T over blocks of column-matrix rows, or for a float64 (Eigen)
//    first layer (CKK < OC) gW^T = col @ gy[n]^T, so that the wider dimension runs along the GEMM's columns.
//  - The input gradient, with our float32 GEMM for stride 1 where it costs less: gx[n]^T = colg^T @ Wf, colg the
//    column matrix of gy[n] zero-padded by the kernel size - 1 - padding and Wf the flipped kernel with its
//    channel axes swapped (a correlation: no col2im), transposed into gx[n]. Otherwise in blocks of
//    column-matrix rows: gcol[block] = W^T[block] @ gy[n], added into gx[n] by col2im while it is in L2; W^T
//    packed once per call, block by block (float32), gy[n] once per image.
template <class T>
struct BackwardPlan {
  static constexpr bool kPacked = std::is_same_v<T, float> && kHaveSgemmKernel;
  const ConvGeom& g;
  const T *x, *w, *gy;
  T *gx, *gw;  // null: not wanted
  bool gw_direct, gw_gather, gx_gather, gw_transposed;
  int64_t wblock, xblock, xblocks, wt_block_size;
  Scratch wt_packed;  // W^T in blocks of xblock rows, or the flipped kernel Wf, packed for the float32 GEMM
  std::optional<ImplicitCols> xcols, gycols;  // col(x[n]) (gw_gather, gw_direct) and colg(gy[n]) (gx_gather)

  BackwardPlan(const ConvGeom& g_, const T* x_, const T* w_, const T* gy_, T* gx_, T* gw_)
      : g(g_),
        x(x_),
        w(w_),
        gy(gy_),
        gx(gx_),
        gw(gw_),
        gw_direct(kPacked && gw_ && conv_direct_weight_grad_fits(g_)),
        gw_gather(kPacked && gw_ && !gw_direct && forward_as_gather(g_) && gw_gather_pays(g_)),
        gx_gather(kPacked && gx_ && input_grad_as_correlation(g_) && gx_gather_pays(g_)),
        gw_transposed(gw_gather || (!kPacked && g_.ckk() < g_.OC)),
        wblock(gw_transposed ? g_.ckk() : rows_per_block(g_, kSgemmNR)),
        xblock(rows_per_block(g_, kSgemmMR)),
        xblocks((g_.ckk() + xblock - 1) / xblock),
        wt_block_size(sgemm_packed_a_size(xblock, g_.OC)),
        wt_packed(!kPacked || !gx_ ? 0
                  : gx_gather ? sizeof(float) * static_cast<size_t>(PackedBLayout(g_.OC * g_.KH * g_.KW, g_.C).size())
                              : sizeof(float) * static_cast<size_t>(xblocks * wt_block_size)) {
    if (gw_gather || gw_direct) xcols.emplace(forward_cols(g));
    if (gx_gather) gycols.emplace(input_grad_cols(g));
    if constexpr (kPacked) {
      if (gx_gather) pack_flipped_weights(g, w, wt_packed.as<float>());
      else if (gx)
        for (int64_t q = 0; q < xblocks; ++q)
          sgemm_pack_a(std::min(xblock, g.ckk() - q * xblock), g.OC, w + q * xblock, 1, g.ckk(),
                       wt_packed.as<float>() + q * wt_block_size);
    }
  }
  int64_t wsize() const { return g.OC * g.ckk(); }
  const T* x_of(int64_t n) const { return x + n * g.C * g.H * g.W; }
  const T* gy_of(int64_t n) const { return gy + n * g.OC * g.ohw(); }  // gy[n] as [OC, OH*OW]

  // As ForwardPlan::gather_pays (values the tiles compute times K, 8 per value copied by im2col or col2im, 16 per
  // value transposed): the weight gradient's gather form drops im2col, and its one transpose is per call.
  static bool gw_gather_pays(const ConvGeom& g) {
    return tile_work(g.ckk(), g.OC) * g.ohw() <= tile_work(g.OC, g.ckk()) * g.ohw() + 8 * g.ckk() * g.ohw();
  }
  static bool gx_gather_pays(const ConvGeom& g) {
    const int64_t hw = g.H * g.W, k = g.OC * g.KH * g.KW;
    return tile_work(hw, g.C) * k + 16 * hw * g.C < tile_work(g.ckk(), g.ohw()) * g.OC + 8 * g.ckk() * g.ohw();
  }
};

// The buffers of one part (thread), sized once and reused for each of its images.
template <class T>
struct PartBuffers {
  Scratch blk, gwT;          // a column-matrix block; gW^T of the part (transposed weight gradient only)
  Scratch gy_a, gw_b, gy_b;  // float32 GEMM only: gy[n] as the gW GEMM's A or (gather) B, col[block]^T packed,
                             // gy[n] as gX's B
  Scratch xpad, gypad;       // gather forms: x[n] and gy[n] zero-padded, then gx[n]^T
  Scratch gw_acc;            // the direct weight gradient's lane sums and padded image
  explicit PartBuffers(const BackwardPlan<T>& b)
      : blk(sizeof(T) * static_cast<size_t>(std::max(b.gw && !b.gw_gather && !b.gw_direct ? b.wblock : 0,
                                                     b.gx && !b.gx_gather ? b.xblock : 0) *
                                            b.g.ohw())),
        gwT(b.gw && b.gw_transposed ? sizeof(T) * static_cast<size_t>(b.wsize()) : 0),
        gy_a(gw_packed(b) ? floats(sgemm_packed_a_size(b.g.OC, b.g.ohw())) : 0),
        gw_b(gw_packed(b)  ? floats(PackedBLayout(b.g.ohw(), b.wblock).size())
             : b.gw_gather ? floats(PackedBLayout(b.g.ohw(), b.g.OC).size())
                           : 0),
        gy_b(BackwardPlan<T>::kPacked && b.gx && !b.gx_gather ? floats(PackedBLayout(b.g.OC, b.g.ohw()).size()) : 0),
        xpad(b.gw_gather ? floats(b.xcols->padded_size()) : 0),
        gypad(b.gx_gather ? floats(b.gycols->padded_size() + b.g.H * b.g.W * b.g.C) : 0),
        gw_acc(b.gw_direct ? floats(conv_direct_weight_grad_size(b.g, *b.xcols)) : 0) {}
  static bool gw_packed(const BackwardPlan<T>& b) {
    return BackwardPlan<T>::kPacked && b.gw && !b.gw_transposed && !b.gw_direct;
  }
  static size_t floats(int64_t n) { return sizeof(float) * static_cast<size_t>(n); }
};

// gW^T (+)= col(x[n]) @ gy[n]^T, into the part's gwT buffer: col read from the padded image (float32), or written
// by im2col (Eigen's GEMM).
template <class T>
void weight_grad_transposed_image(const BackwardPlan<T>& b, int64_t n, PartBuffers<T>& buf, bool acc) {
  const ConvGeom& g = b.g;
  if constexpr (BackwardPlan<T>::kPacked) {
    const ImplicitCols& cols = *b.xcols;
    cols.pad(b.x_of(n), buf.xpad.template as<float>(), acc);  // acc: a later image of the part, borders zero
    sgemm_pack_b(g.ohw(), g.OC, b.gy_of(n), 1, g.ohw(), buf.gw_b.template as<float>());
    sgemm_serial_gather(g.ckk(), g.OC, g.ohw(), buf.xpad.template as<float>(), cols.taps_table(),
                        cols.positions_table(), buf.gw_b.template as<float>(), buf.gwT.template as<float>(), g.OC,
                        acc);
  } else {
    im2col_rows(g, b.x_of(n), 0, g.ckk(), buf.blk.template as<T>());
    gemm_serial(g.ckk(), g.OC, g.ohw(), buf.blk.template as<T>(), g.ohw(), 1, b.gy_of(n), 1, g.ohw(),
                buf.gwT.template as<T>(), g.OC, acc);
  }
}

// The direct form (conv_direct.h): image n's products added into the part's lane sums.
template <class T>
void weight_grad_direct_image(const BackwardPlan<T>& b, int64_t n, bool last, PartBuffers<T>& buf, bool later) {
  if constexpr (BackwardPlan<T>::kPacked)
    conv_direct_weight_grad_image(b.g, *b.xcols, b.x_of(n), b.gy_of(n), buf.gw_acc.template as<float>(), !later,
                                  last ? nullptr : b.gy_of(n + 1));
}

// gW[:, block] (+)= gy[n] @ col(x[n])[block]^T over blocks of column-matrix rows, into gw_part.
template <class T>
void weight_grad_image(const BackwardPlan<T>& b, int64_t n, T* gw_part, PartBuffers<T>& buf, bool acc) {
  const ConvGeom& g = b.g;
  const T* xn = b.x_of(n);
  const T* gyn = b.gy_of(n);
  const int64_t ohw = g.ohw(), ckk = g.ckk();
  if constexpr (BackwardPlan<T>::kPacked) sgemm_pack_a(g.OC, ohw, gyn, ohw, 1, buf.gy_a.template as<float>());
  for (int64_t q0 = 0; q0 < ckk; q0 += b.wblock) {
    const int64_t qb = std::min(b.wblock, ckk - q0);
    if constexpr (BackwardPlan<T>::kPacked) {
      // B = col[block]^T, packed 16 columns (column-matrix rows) at a time straight from an L1-sized piece of
      // im2col, instead of writing the whole block and transposing it from L2
      for (int64_t j = 0; j < qb; j += kSgemmNR) {
        const int64_t nj = std::min(kSgemmNR, qb - j);
        im2col_rows(g, xn, q0 + j, q0 + j + nj, buf.blk.template as<float>());
        sgemm_pack_b_columns(ohw, qb, j, nj, buf.blk.template as<float>(), 1, ohw, buf.gw_b.template as<float>());
      }
      sgemm_serial_packed(g.OC, qb, ohw, nullptr, 0, 0, buf.gy_a.template as<float>(), nullptr, 0, 0,
                          buf.gw_b.template as<float>(), gw_part + q0, ckk, acc);
    } else {
      im2col_rows(g, xn, q0, q0 + qb, buf.blk.template as<T>());
      gemm_serial(g.OC, qb, ohw, gyn, ohw, 1, buf.blk.template as<T>(), 1, ohw, gw_part + q0, ckk, acc);
    }
  }
}

// gx[n] = col2im(W^T @ gy[n]), block by block of column-matrix rows.
template <class T>
void input_grad_image(const BackwardPlan<T>& b, int64_t n, PartBuffers<T>& buf) {
  const ConvGeom& g = b.g;
  const T* gyn = b.gy_of(n);
  const int64_t ohw = g.ohw(), ckk = g.ckk(), chw = g.C * g.H * g.W;
  T* gxn = b.gx + n * chw;
  std::fill(gxn, gxn + chw, T(0));
  if constexpr (BackwardPlan<T>::kPacked) sgemm_pack_b(g.OC, ohw, gyn, ohw, 1, buf.gy_b.template as<float>());
  for (int64_t q = 0; q < b.xblocks; ++q) {
    const int64_t q0 = q * b.xblock, qb = std::min(b.xblock, ckk - q0);
    if constexpr (BackwardPlan<T>::kPacked)
      sgemm_serial_packed(qb, ohw, g.OC, nullptr, 0, 0, b.wt_packed.template as<float>() + q * b.wt_block_size, nullptr,
                          0, 0, buf.gy_b.template as<float>(), buf.blk.template as<float>(), ohw, false);
    else gemm_serial(qb, ohw, g.OC, b.w + q0, 1, ckk, gyn, ohw, 1, buf.blk.template as<T>(), ohw, false);
    col2im_rows(g, buf.blk.template as<T>(), q0, q0 + qb, gxn);
  }
}

// gx[n] = (colg(gy[n])^T @ Wf)^T: the input gradient as a correlation of the padded gy[n] (float32, stride 1).
template <class T>
void input_grad_gather_image(const BackwardPlan<T>& b, int64_t n, PartBuffers<T>& buf, bool later) {
  if constexpr (BackwardPlan<T>::kPacked) {
    const ConvGeom& g = b.g;
    const ImplicitCols& cols = *b.gycols;
    const int64_t hw = g.H * g.W;
    float* gypad = buf.gypad.template as<float>();
    float* gxt = gypad + cols.padded_size();
    cols.pad(b.gy_of(n), gypad, later);  // a later image of the part: the buffer's borders are zero
    sgemm_serial_gather(hw, g.C, cols.taps, gypad, cols.positions_table(), cols.taps_table(),
                        b.wt_packed.template as<float>(), gxt, g.C, false);
    transpose_f32(hw, g.C, gxt, g.C, b.gx + n * g.C * hw, hw);
  }
}

// One part's images [start, end): their weight gradients summed into gw_part, their input gradients written.
template <class T>
void backward_part(const BackwardPlan<T>& b, int64_t start, int64_t end, T* gw_part, double* bias_sums,
                   PartBuffers<T>& buf) {
  for (int64_t n = start; n < end; ++n) {
    const bool acc = n > start;
    if (gw_part && b.gw_direct) weight_grad_direct_image(b, n, n + 1 == end, buf, acc);
    else if (gw_part && b.gw_transposed) weight_grad_transposed_image(b, n, buf, acc);
    else if (gw_part) weight_grad_image(b, n, gw_part, buf, acc);
    if (b.gx_gather) input_grad_gather_image(b, n, buf, acc);
    else if (b.gx) input_grad_image(b, n, buf);
    if (bias_sums) bias_sums_of_image(b.g, b.gy_of(n), bias_sums + n * b.g.OC);
  }
  if constexpr (BackwardPlan<T>::kPacked)
    if (gw_part && b.gw_direct && end > start)
      conv_direct_weight_grad_finish(b.g, buf.gw_acc.template as<float>(), gw_part);
  if (gw_part && b.gw_transposed && end > start) {
    const T* gwT = buf.gwT.template as<T>();
    for (int64_t oc = 0; oc < b.g.OC; ++oc)
      for (int64_t j = 0; j < b.g.ckk(); ++j) gw_part[oc * b.g.ckk() + j] = gwT[j * b.g.OC + oc];
  }
}

template <class T>
void conv2d_backward_typed(const ConvGeom& g, const ConvSplit& sp, const T* x, const T* w, const T* gy, T* gx, T* gw,
                           T* gb) {
  if (!gx && !gw) {
    if (gb) bias_grad(g, gy, gb);
    return;
  }
  const BackwardPlan<T> b(g, x, w, gy, gx, gw);
  if (gw && g.N == 0) std::fill(gw, gw + b.wsize(), T(0));
  // Part 0 sums its weight gradient straight into gw, the others into their own slot here.
  Tensor gw_parts = gw && sp.parts > 1 ? empty({sp.parts - 1, b.wsize()}, {.dtype = dtype_of_v<T>}) : Tensor();
  Scratch bias_sums(gb ? sizeof(double) * static_cast<size_t>(g.N * g.OC) : 0);  // [N, OC]
  double* sums = gb ? bias_sums.as<double>() : nullptr;
  parallel_for(0, sp.parts, 1, [&](int64_t part0, int64_t part1) {
    PartBuffers<T> buf(b);
    for (int64_t part = part0; part < part1; ++part) {
      T* gw_part = !gw ? nullptr : part == 0 ? gw : static_cast<T*>(gw_parts.data_ptr()) + (part - 1) * b.wsize();
      backward_part(b, part * sp.per, std::min(g.N, (part + 1) * sp.per), gw_part, sums, buf);
    }
  });
  if (gb) bias_grad_from_images(g, sums, gb);
  if (gw_parts.defined()) {  // the parts' sums, in part order (the same result for the same thread count)
    const T* parts = static_cast<const T*>(gw_parts.data_ptr());
    for (int64_t q = 0; q < sp.parts - 1; ++q)
      for (int64_t i = 0; i < b.wsize(); ++i) gw[i] += parts[q * b.wsize() + i];
  }
}

// --- conv2d forward with the float32 GEMM

// The forward's two forms for our float32 GEMM, picked by the work each costs (gather_pays):
//  - y[n] = [W | b] @ [col; 1] (Packed): M = OC rows in 6-row tiles, N = OH*OW columns in 32-wide ones (16 at a
//    ragged edge); im2col writes the column matrix's rows straight into the GEMM's packed B layout, one K slice at
//    a time, and the bias is one more column of W against a row of ones.
//  - y[n]^T = col^T @ W^T (Gather): M = OH*OW, N = OC. The GEMM reads col^T from the zero-padded image through
//    offset tables (ImplicitCols, conv_gather.h), with no im2col; the GEMM adds the bias (one per column of
//    y[n]^T) as it stores the first K slice's tiles, and y[n]^T is transposed into y[n] at the end. For the CNN's 32 ->
//    64 channels on 14 x 14 planes the tiles compute 198 x 64 values instead of 66 x 208 (99% useful, not 91%) and the
//    157 K values of im2col go.
// And, ahead of both, for windows of at most 32 values at stride 1 (Direct): conv_direct.h's kernel, rows of y[n]
// computed in registers from the padded image and stored in place (the CNN's first layer, K = 25: 95 -> 117
// GFLOP/s on one AVX-512 core, against the Packed form; the GEMM forms lose there to the short K and the copies).
struct ForwardPlan {
  const ConvGeom& g;
  bool direct, gather;
  int64_t K, kc;  // the packed form's depth (CKK, + 1 with a bias) and its K slices
  Scratch wpack;  // [W | b] packed as the GEMM's A (Packed), W^T as its B (Gather), or for the direct kernel
  std::optional<ImplicitCols> cols;

  ForwardPlan(const ConvGeom& g_, const float* w, const float* b)
      : g(g_),
        direct(conv_direct_fits(g_)),
        gather(!direct && forward_as_gather(g_) && gather_pays(g_)),
        K(b && !gather && !direct ? g_.ckk() + 1 : g_.ckk()),
        kc(sgemm_slice_depth(K)),
        wpack(sizeof(float) * static_cast<size_t>(direct   ? conv_direct_weights_size(g_)
                                                  : gather ? PackedBLayout(K, g_.OC).size()
                                                           : sgemm_packed_a_size(g_.OC, K))) {
    if (direct || gather) cols.emplace(forward_cols(g));
    if (direct) {
      conv_direct_pack_weights(g, w, wpack.as<float>());
      return;
    }
    if (gather) {
      sgemm_pack_b(K, g.OC, w, 1, K, wpack.as<float>());
      return;
    }
    Scratch wb(b ? sizeof(float) * static_cast<size_t>(g.OC * K) : 0);  // [W | b]
    if (b)
      for (int64_t oc = 0; oc < g.OC; ++oc) {
        std::copy_n(w + oc * g.ckk(), g.ckk(), wb.as<float>() + oc * K);
        wb.as<float>()[oc * K + g.ckk()] = b[oc];
      }
    sgemm_pack_a(g.OC, K, b ? wb.as<float>() : w, K, 1, wpack.as<float>());
  }
  // The work of each form in multiply-adds: the values its tiles compute (whole 6-row tiles by 16-column
  // vectors) times K, plus per value copied: im2col's values, or the transposed result's, costed at 8 and 16
  // (~0.25 and ~0.5 cycle a value; the kernel does 32 multiply-adds a cycle). The Gather form wins on the CNN's
  // second layer (K = 800: 10.3 M against 12.3 M) and loses on its first (K = 25, 784 x 32: 1.03 M against
  // 0.86 M; measured 67 against 103 GFLOP/s).
  static bool gather_pays(const ConvGeom& g) {
    const int64_t K = g.ckk();
    return tile_work(g.ohw(), g.OC) * K + 16 * g.ohw() * g.OC < tile_work(g.OC, g.ohw()) * K + 8 * K * g.ohw();
  }
};

// One thread's scratch for the forward: a packed K slice of the column matrix and a row (Packed), the padded
// image and y[n]^T (Gather), or the padded image and the slack the direct kernel reads past it (Direct; zeroed
// once: pad() writes only the image).
struct ForwardBuffers {
  Scratch blk, row;
  explicit ForwardBuffers(const ForwardPlan& f)
      : blk(sizeof(float) * static_cast<size_t>(f.direct   ? f.cols->padded_size() + conv_direct_slack()
                                                : f.gather ? f.cols->padded_size() + f.g.ohw() * f.g.OC
                                                           : PackedBLayout(f.kc, f.g.ohw()).size())),
        row(f.gather || f.direct ? 0 : sizeof(float) * static_cast<size_t>(PackedBLayout(f.kc, f.g.ohw()).npad)) {
    if (f.direct) std::fill_n(blk.as<float>() + f.cols->padded_size(), conv_direct_slack(), 0.f);
  }
};

[[maybe_unused]] void forward_image_direct(const ForwardPlan& f, const float* x, const float* b, float* y,
                                           ForwardBuffers& buf, bool later) {
  f.cols->pad(x, buf.blk.as<float>(), later);  // a later image of the part: the buffer's borders are zero
  conv_direct_forward(f.g, *f.cols, buf.blk.as<float>(), f.wpack.as<float>(), b, y);
}

[[maybe_unused]] void forward_image_gather(const ForwardPlan& f, const float* x, const float* b, float* y,
                                           ForwardBuffers& buf, bool later) {
  const ConvGeom& g = f.g;
  const int64_t ohw = g.ohw();
  float* xpad = buf.blk.as<float>();
  float* yt = xpad + f.cols->padded_size();
  f.cols->pad(x, xpad, later);  // a later image of the part: the buffer's borders are zero
  sgemm_serial_gather(ohw, g.OC, f.K, xpad, f.cols->positions_table(), f.cols->taps_table(), f.wpack.as<float>(), yt,
                      g.OC, false, b);  // the bias added as the first K slice's tiles are stored
  transpose_f32(ohw, g.OC, yt, g.OC, y, ohw);
}

// y = the product for one image, K walked in the GEMM's own slices: im2col writes one slice (~160 KB) and the GEMM
// adds its part while the slice is still in L2.
[[maybe_unused]] void forward_image_packed(const ForwardPlan& f, const float* x, float* y, ForwardBuffers& buf) {
  const ConvGeom& g = f.g;
  const int64_t ohw = g.ohw(), mpad = (g.OC + kSgemmMR - 1) / kSgemmMR * kSgemmMR;
  for (int64_t p0 = 0; p0 < f.K; p0 += f.kc) {
    const int64_t kb = std::min(f.kc, f.K - p0);
    const PackedBLayout lay(kb, ohw);
    im2col_packed(g, x, p0, p0 + kb, lay, buf.row.as<float>(), buf.blk.as<float>());
    sgemm_serial_packed(g.OC, ohw, kb, nullptr, 0, 0, f.wpack.as<float>() + p0 * mpad, nullptr, 0, 0,
                        buf.blk.as<float>(), y, ohw, p0 > 0);
  }
}

// Any floating dtype without our GEMM (double; float where the build has no AVX2 kernel): y starts as the bias
// and gemm_serial adds W @ col over K slices.
template <class T>
void forward_image_plain(const ConvGeom& g, const T* x, const T* w, const T* b, T* y, T* blk) {
  const int64_t ohw = g.ohw(), ckk = g.ckk(), kc = sgemm_slice_depth(ckk);
  if (b)
    for (int64_t oc = 0; oc < g.OC; ++oc) std::fill(y + oc * ohw, y + (oc + 1) * ohw, b[oc]);
  for (int64_t p0 = 0; p0 < ckk; p0 += kc) {
    const int64_t kb = std::min(kc, ckk - p0);
    im2col_rows(g, x, p0, p0 + kb, blk);
    gemm_serial(g.OC, ohw, kb, w + p0, ckk, 1, blk, ohw, 1, y, ohw, b != nullptr || p0 > 0);
  }
}

}  // namespace

void CpuBackend::conv2d(const Tensor& out, const Tensor& x_in, const Tensor& w_in, const Tensor& bias,
                        const Conv2dParams& p) {
  if (detail::conv2d_channels_last(*this, out, x_in, w_in, bias, p)) return;  // the kernels below are NCHW
  if (conv2d_bf16(out, x_in, w_in, bias, p)) return;  // bf16 on a CPU with bf16 dot products
  if (through_float32(out, [&](const Tensor& tmp) {
        conv2d(tmp, upcast(x_in), upcast(w_in), bias.defined() ? upcast(bias) : bias, p);
      }))
    return;
  if (out.numel() == 0) return;
  Tensor x = raw::contiguous(x_in), w = raw::contiguous(w_in), b = bias.defined() ? raw::contiguous(bias) : bias;
  const ConvGeom g0 = geometry(x, w, out.size(2), out.size(3), p);
  const ConvSplit sp(g0, num_threads());
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (!std::is_floating_point_v<T>) {
      throw InternalError("cpu conv2d: floating dtype expected");
    } else {
      ConvGeom g = g0;
      const ColumnMasks<T> masks(g);
      const T* xp = static_cast<const T*>(x.data_ptr());
      const T* wp = static_cast<const T*>(w.data_ptr());
      const T* bp = b.defined() ? static_cast<const T*>(b.data_ptr()) : nullptr;
      T* yp = static_cast<T*>(out.data_ptr());
      const int64_t chw = g.C * g.H * g.W, yhw = g.OC * g.ohw();
      // (a thread normally gets one part; all of them when called from inside a parallel region)
      if constexpr (std::is_same_v<T, float> && kHaveSgemmKernel) {
        const ForwardPlan f(g, wp, bp);
        parallel_for(0, sp.parts, 1, [&](int64_t part0, int64_t part1) {
          ForwardBuffers buf(f);
          for (int64_t n = part0 * sp.per, end = std::min(g.N, part1 * sp.per); n < end; ++n) {
            const bool later = n > part0 * sp.per;
            if (f.direct) forward_image_direct(f, xp + n * chw, bp, yp + n * yhw, buf, later);
            else if (f.gather) forward_image_gather(f, xp + n * chw, bp, yp + n * yhw, buf, later);
            else forward_image_packed(f, xp + n * chw, yp + n * yhw, buf);
          }
        });
      } else {
        parallel_for(0, sp.parts, 1, [&](int64_t part0, int64_t part1) {
          Scratch blk(sizeof(T) * static_cast<size_t>(sgemm_slice_depth(g.ckk()) * g.ohw()));
          for (int64_t n = part0 * sp.per, end = std::min(g.N, part1 * sp.per); n < end; ++n)
            forward_image_plain(g, xp + n * chw, wp, bp, yp + n * yhw, blk.as<T>());
        });
      }
    }
  });
}

void CpuBackend::conv2d_backward(const Conv2dGradArgs& a) {
  const Tensor &gx = a.gx, &gw = a.gw, &gb = a.gb, &gy_in = a.gy, &x_in = a.x, &w_in = a.w;
  const Conv2dParams& p = a.p;
  if (detail::conv2d_backward_channels_last(*this, a)) return;
  if (conv2d_backward_bf16(gy_in, x_in, w_in, gx, gw, gb, p)) return;
  if (is_reduced_float(x_in.dtype())) {
    Tensor gxf = gx.defined() ? float_buffer_like(gx) : gx, gwf = gw.defined() ? float_buffer_like(gw) : gw;
    Tensor gbf = gb.defined() ? float_buffer_like(gb) : gb;
    conv2d_backward(
        {.gx = gxf, .gw = gwf, .gb = gbf, .gy = upcast(gy_in), .x = upcast(x_in), .w = upcast(w_in), .p = p});
    if (gx.defined()) copy(gx, gxf);
    if (gw.defined()) copy(gw, gwf);
    if (gb.defined()) copy(gb, gbf);
    return;
  }
  Tensor gy = raw::contiguous(gy_in), x = raw::contiguous(x_in), w = raw::contiguous(w_in);
  const ConvGeom g0 = geometry(x, w, gy.size(2), gy.size(3), p);
  const ConvSplit sp(g0, num_threads());
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (!std::is_floating_point_v<T>) {
      throw InternalError("cpu conv2d_backward: floating dtype expected");
    } else {
      ConvGeom g = g0;
      const ColumnMasks<T> masks(g);
      auto ptr = [](const Tensor& t) { return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr; };
      conv2d_backward_typed<T>(g, sp, ptr(x), ptr(w), ptr(gy), ptr(gx), ptr(gw), ptr(gb));
    }
  });
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
