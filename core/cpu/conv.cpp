// defines: the CPU conv2d forward and backward (NCHW) as im2col / col2im around GEMMs. Images are taken in
// chunks of nb whose columns sit side by side, so each GEMM covers a whole chunk (L = nb*OH*OW columns)
// instead of one image: the weights are packed once per chunk, not once per image, and the products are
// large enough for every thread.
//   forward:  col = im2col(x[chunk]) [CKK, L];  yT = W[OC, CKK] @ col;  y[n] = yT[:, n's columns] (+ b)
//   backward: gyT = gy[chunk] as [OC, L];  gW += gyT @ col^T;  gcol = W^T @ gyT;  gx[n] = col2im(gcol[n])
#include <algorithm>
#include <cstring>
#include <utility>

#include "cpu_backend.h"
#include "gemm.h"
#include "parallel.h"

namespace ember::cpu {
namespace {

struct ConvGeom {
  int64_t N, C, H, W, OC, KH, KW, OH, OW;
  Conv2dParams p;
  int64_t ckk() const { return C * KH * KW; }
  int64_t ohw() const { return OH * OW; }
  // Images per chunk: the chunk's column buffer stays under 4 Mi elements.
  int64_t chunk() const { return std::clamp<int64_t>((int64_t{1} << 22) / std::max<int64_t>(ckk() * ohw(), 1), 1, N); }
  // Images per thread in the per-image loops (im2col, col2im, copies): small images stay on one thread.
  int64_t image_grain() const {
    return std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(ckk() * ohw(), 1));
  }
};

// The output columns ow whose input column ow*sw - pw + kw lies inside [0, W): [lo, hi).
inline std::pair<int64_t, int64_t> valid_cols(int64_t OW, int64_t W, int64_t sw, int64_t pw, int64_t kw) {
  // ow*sw >= pw - kw  and  ow*sw <= W - 1 + pw - kw
  int64_t lo = pw - kw <= 0 ? 0 : (pw - kw + sw - 1) / sw;
  int64_t hi = W - 1 + pw - kw < 0 ? 0 : (W - 1 + pw - kw) / sw + 1;
  return {std::min(lo, OW), std::min(std::max(hi, lo), OW)};
}

// im2col for stride 1 with OW == W (e.g. "same" padding): col[(c, kh, kw), oh*W + ow] is x[c] read at the
// flat offset oh*W + ow + (kh - ph)*W + (kw - pw), so each row is one contiguous copy over its valid output
// rows; only the |kw - pw| columns per output row that fall off the left or right edge are then zeroed.
template <class T>
void im2col_same_width(const ConvGeom& g, const T* x, T* col, int64_t ld) {
  const int64_t W = g.W, OHW = g.OH * g.OW;
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      // output rows whose input row oh - ph + kh lies in [0, H)
      const int64_t oh_lo = std::clamp<int64_t>(g.p.pad_h - kh, 0, g.OH);
      const int64_t oh_hi = std::clamp<int64_t>(g.H + g.p.pad_h - kh, oh_lo, g.OH);
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        T* __restrict r = col + ((c * g.KH + kh) * g.KW + kw) * ld;
        const int64_t shift = (kh - g.p.pad_h) * W + (kw - g.p.pad_w);
        const T* xc = x + c * g.H * W;
        for (int64_t i = 0; i < oh_lo * W; ++i) r[i] = T(0);
        std::memcpy(r + oh_lo * W, xc + oh_lo * W + shift, sizeof(T) * static_cast<size_t>((oh_hi - oh_lo) * W));
        for (int64_t i = oh_hi * W; i < OHW; ++i) r[i] = T(0);
        const auto [lo, hi] = valid_cols(g.OW, W, 1, g.p.pad_w, kw);
        // column by column (at most pw of them on each side): a row-wise loop would become a memset call per row
        for (int64_t ow = 0; ow < lo; ++ow)
          for (int64_t oh = oh_lo; oh < oh_hi; ++oh) r[oh * W + ow] = T(0);
        for (int64_t ow = hi; ow < W; ++ow)
          for (int64_t oh = oh_lo; oh < oh_hi; ++oh) r[oh * W + ow] = T(0);
      }
    }
}

// col[(c, kh, kw), (oh, ow)] = x[c, oh*sh - ph + kh, ow*sw - pw + kw], 0 outside the image. The valid columns
// of each row are found once, so the inner loop is a plain (for stride 1: contiguous) copy. Rows are short
// (OW values), so the copies are inline loops rather than memcpy/fill calls.
template <class T>
void im2col(const ConvGeom& g, const T* x, T* col, int64_t ld) {  // ld: row stride of col
  if (g.p.stride_h == 1 && g.p.stride_w == 1 && g.OW == g.W) {
    im2col_same_width(g, x, col, ld);
    return;
  }
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        T* row = col + ((c * g.KH + kh) * g.KW + kw) * ld;
        const auto [lo, hi] = valid_cols(g.OW, g.W, g.p.stride_w, g.p.pad_w, kw);
        const int64_t shift = kw - g.p.pad_w;  // input column = ow * sw + shift
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t ih = oh * g.p.stride_h - g.p.pad_h + kh;
          T* __restrict r = row + oh * g.OW;
          if (ih < 0 || ih >= g.H) {
            for (int64_t ow = 0; ow < g.OW; ++ow) r[ow] = T(0);
            continue;
          }
          const T* __restrict xr = x + (c * g.H + ih) * g.W;
          for (int64_t ow = 0; ow < lo; ++ow) r[ow] = T(0);
          if (g.p.stride_w == 1) {
            for (int64_t ow = lo; ow < hi; ++ow) r[ow] = xr[ow + shift];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) r[ow] = xr[ow * g.p.stride_w + shift];
          }
          for (int64_t ow = hi; ow < g.OW; ++ow) r[ow] = T(0);
        }
      }
}

// The adjoint of im2col: x[c, ih, iw] += col[...] for every (kh, kw, oh, ow) that read it.
template <class T>
void col2im(const ConvGeom& g, const T* col, int64_t ld, T* x) {
  std::fill(x, x + g.C * g.H * g.W, T(0));
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const T* row = col + ((c * g.KH + kh) * g.KW + kw) * ld;
        const auto [lo, hi] = valid_cols(g.OW, g.W, g.p.stride_w, g.p.pad_w, kw);
        const int64_t shift = kw - g.p.pad_w;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t ih = oh * g.p.stride_h - g.p.pad_h + kh;
          if (ih < 0 || ih >= g.H) continue;
          T* __restrict xr = x + (c * g.H + ih) * g.W;
          const T* __restrict r = row + oh * g.OW;
          if (g.p.stride_w == 1) {  // contiguous: vectorises
            for (int64_t ow = lo; ow < hi; ++ow) xr[ow + shift] += r[ow];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) xr[ow * g.p.stride_w + shift] += r[ow];
          }
        }
      }
}

// C (+)= A @ B with every thread: our kernel for float, Eigen (which threads by itself) for double.
void gemm_threads(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* B,
                  int64_t b_rs, int64_t b_cs, float* C, int64_t ldc, bool acc) {
  if (!sgemm(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, ldc, acc, num_threads()))
    gemm_serial(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, ldc, acc);
}
void gemm_threads(int64_t M, int64_t N, int64_t K, const double* A, int64_t a_rs, int64_t a_cs, const double* B,
                  int64_t b_rs, int64_t b_cs, double* C, int64_t ldc, bool acc) {
  gemm_serial(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, ldc, acc);
}

ConvGeom geometry(const Tensor& x, const Tensor& w, int64_t OH, int64_t OW, const Conv2dParams& p) {
  return {x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2), w.size(3), OH, OW, p};
}

}  // namespace

void CpuBackend::conv2d(const Tensor& out, const Tensor& x_in, const Tensor& w_in, const Tensor& bias,
                        const Conv2dParams& p) {
  if (is_reduced_float(out.dtype())) {
    Tensor tmp = float_buffer_like(out);
    conv2d(tmp, upcast(x_in), upcast(w_in), bias.defined() ? upcast(bias) : bias, p);
    copy(out, tmp);
    return;
  }
  if (out.numel() == 0) return;
  Tensor x = raw::contiguous(x_in), w = raw::contiguous(w_in), b = bias.defined() ? raw::contiguous(bias) : bias;
  const ConvGeom g = geometry(x, w, out.size(2), out.size(3), p);
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (!std::is_floating_point_v<T>) {
      throw InternalError("cpu conv2d: floating dtype expected");
    } else {
      const T* xp = static_cast<const T*>(x.data_ptr());
      const T* wp = static_cast<const T*>(w.data_ptr());
      const T* bp = b.defined() ? static_cast<const T*>(b.data_ptr()) : nullptr;
      T* yp = static_cast<T*>(out.data_ptr());
      const int64_t ohw = g.ohw(), nb = g.chunk();
      for (int64_t n0 = 0; n0 < g.N; n0 += nb) {
        const int64_t nc = std::min(nb, g.N - n0), L = nc * ohw;
        Scratch col(sizeof(T) * static_cast<size_t>(g.ckk() * L)), yT(sizeof(T) * static_cast<size_t>(g.OC * L));
        parallel_for(0, nc, g.image_grain(), [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) im2col(g, xp + (n0 + i) * g.C * g.H * g.W, col.as<T>() + i * ohw, L);
        });
        gemm_threads(g.OC, L, g.ckk(), wp, g.ckk(), 1, col.as<T>(), L, 1, yT.as<T>(), L, false);
        // yT[oc, i*ohw + j] -> y[n0 + i, oc, j], adding the bias on the way
        parallel_for(0, nc, g.image_grain(), [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t oc = 0; oc < g.OC; ++oc) {
              const T* src = yT.as<T>() + oc * L + i * ohw;
              T* dst = yp + ((n0 + i) * g.OC + oc) * ohw;
              const T bv = bp ? bp[oc] : T(0);
              for (int64_t j = 0; j < ohw; ++j) dst[j] = src[j] + bv;
            }
        });
      }
    }
  });
}

void CpuBackend::conv2d_backward(const Tensor& gy_in, const Tensor& x_in, const Tensor& w_in, const Tensor& gx,
                                 const Tensor& gw, const Tensor& gb, const Conv2dParams& p) {
  if (is_reduced_float(x_in.dtype())) {
    Tensor gxf = gx.defined() ? float_buffer_like(gx) : gx, gwf = gw.defined() ? float_buffer_like(gw) : gw;
    Tensor gbf = gb.defined() ? float_buffer_like(gb) : gb;
    conv2d_backward(upcast(gy_in), upcast(x_in), upcast(w_in), gxf, gwf, gbf, p);
    if (gx.defined()) copy(gx, gxf);
    if (gw.defined()) copy(gw, gwf);
    if (gb.defined()) copy(gb, gbf);
    return;
  }
  Tensor gy = raw::contiguous(gy_in), x = raw::contiguous(x_in), w = raw::contiguous(w_in);
  const ConvGeom g = geometry(x, w, gy.size(2), gy.size(3), p);
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (!std::is_floating_point_v<T>) {
      throw InternalError("cpu conv2d_backward: floating dtype expected");
    } else {
      const T* xp = static_cast<const T*>(x.data_ptr());
      const T* wp = static_cast<const T*>(w.data_ptr());
      const T* gyp = static_cast<const T*>(gy.data_ptr());
      if (gb.defined()) {
        T* gbp = static_cast<T*>(gb.data_ptr());
        for (int64_t oc = 0; oc < g.OC; ++oc) {
          double s = 0;
          for (int64_t n = 0; n < g.N; ++n) {
            const T* r = gyp + (n * g.OC + oc) * g.ohw();
            for (int64_t i = 0; i < g.ohw(); ++i) s += r[i];
          }
          gbp[oc] = static_cast<T>(s);
        }
      }
      if (!gx.defined() && !gw.defined()) return;
      const int64_t ohw = g.ohw(), nb = g.chunk();
      T* gwp = gw.defined() ? static_cast<T*>(gw.data_ptr()) : nullptr;
      T* gxp = gx.defined() ? static_cast<T*>(gx.data_ptr()) : nullptr;
      for (int64_t n0 = 0; n0 < g.N; n0 += nb) {
        const int64_t nc = std::min(nb, g.N - n0), L = nc * ohw;
        Scratch gyT(sizeof(T) * static_cast<size_t>(g.OC * L)), col(sizeof(T) * static_cast<size_t>(g.ckk() * L));
        // gy[n0 + i, oc, j] -> gyT[oc, i*ohw + j]
        parallel_for(0, nc, g.image_grain(), [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t oc = 0; oc < g.OC; ++oc)
              std::copy_n(gyp + ((n0 + i) * g.OC + oc) * ohw, ohw, gyT.as<T>() + oc * L + i * ohw);
        });
        if (gwp) {  // gW[OC, CKK] (+)= gyT[OC, L] @ col^T
          parallel_for(0, nc, g.image_grain(), [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i) im2col(g, xp + (n0 + i) * g.C * g.H * g.W, col.as<T>() + i * ohw, L);
          });
          gemm_threads(g.OC, g.ckk(), L, gyT.as<T>(), L, 1, col.as<T>(), 1, L, gwp, g.ckk(), n0 > 0);
        }
        if (gxp) {  // gcol[CKK, L] = W^T @ gyT (reusing the column buffer), then gx[n] = col2im(gcol[n])
          gemm_threads(g.ckk(), L, g.OC, wp, 1, g.ckk(), gyT.as<T>(), L, 1, col.as<T>(), L, false);
          parallel_for(0, nc, g.image_grain(), [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i) col2im(g, col.as<T>() + i * ohw, L, gxp + (n0 + i) * g.C * g.H * g.W);
          });
        }
      }
    }
  });
}

}  // namespace ember::cpu
