// defines: the CPU conv2d forward and backward (NCHW) as im2col / col2im around GEMMs, one image per thread.
//   forward:  col = im2col(x[n]) [C*KH*KW, OH*OW];  y[n] = W[OC, CKK] @ col (+ b)
//   backward: gW += gy[n] @ col^T;  gcol = W^T @ gy[n];  gx[n] = col2im(gcol);  gb = sum of gy over n, oh, ow
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
  // Images per thread at least: tiny convolutions stay on one thread (a fork/join costs more than they do,
  // and far more when the cores are oversubscribed).
  int64_t image_grain() const {
    return std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(OC * ckk() * ohw(), 1));
  }
};

// The output columns ow whose input column ow*sw - pw + kw lies inside [0, W): [lo, hi).
inline std::pair<int64_t, int64_t> valid_cols(int64_t OW, int64_t W, int64_t sw, int64_t pw, int64_t kw) {
  // ow*sw >= pw - kw  and  ow*sw <= W - 1 + pw - kw
  int64_t lo = pw - kw <= 0 ? 0 : (pw - kw + sw - 1) / sw;
  int64_t hi = W - 1 + pw - kw < 0 ? 0 : (W - 1 + pw - kw) / sw + 1;
  return {std::min(lo, OW), std::min(std::max(hi, lo), OW)};
}

// col[(c, kh, kw), (oh, ow)] = x[c, oh*sh - ph + kh, ow*sw - pw + kw], 0 outside the image. The valid columns
// of each row are found once, so the inner loop is a plain (for stride 1: contiguous) copy.
template <class T>
void im2col(const ConvGeom& g, const T* x, T* col) {
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        T* row = col + ((c * g.KH + kh) * g.KW + kw) * g.ohw();
        const auto [lo, hi] = valid_cols(g.OW, g.W, g.p.stride_w, g.p.pad_w, kw);
        const int64_t shift = kw - g.p.pad_w;  // input column = ow * sw + shift
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t ih = oh * g.p.stride_h - g.p.pad_h + kh;
          T* r = row + oh * g.OW;
          if (ih < 0 || ih >= g.H) { std::fill(r, r + g.OW, T(0)); continue; }
          const T* xr = x + (c * g.H + ih) * g.W;
          std::fill(r, r + lo, T(0));
          if (g.p.stride_w == 1) {
            std::copy(xr + lo + shift, xr + hi + shift, r + lo);
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) r[ow] = xr[ow * g.p.stride_w + shift];
          }
          std::fill(r + hi, r + g.OW, T(0));
        }
      }
}

// The adjoint of im2col: x[c, ih, iw] += col[...] for every (kh, kw, oh, ow) that read it.
template <class T>
void col2im(const ConvGeom& g, const T* col, T* x) {
  std::fill(x, x + g.C * g.H * g.W, T(0));
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const T* row = col + ((c * g.KH + kh) * g.KW + kw) * g.ohw();
        const auto [lo, hi] = valid_cols(g.OW, g.W, g.p.stride_w, g.p.pad_w, kw);
        const int64_t shift = kw - g.p.pad_w;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t ih = oh * g.p.stride_h - g.p.pad_h + kh;
          if (ih < 0 || ih >= g.H) continue;
          T* xr = x + (c * g.H + ih) * g.W;
          const T* r = row + oh * g.OW;
          for (int64_t ow = lo; ow < hi; ++ow) xr[ow * g.p.stride_w + shift] += r[ow];
        }
      }
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
      parallel_for(0, g.N, g.image_grain(), [&](int64_t n0, int64_t n1) {
        Scratch col(sizeof(T) * static_cast<size_t>(g.ckk() * g.ohw()));
        for (int64_t n = n0; n < n1; ++n) {
          im2col(g, xp + n * g.C * g.H * g.W, col.as<T>());
          T* yn = yp + n * g.OC * g.ohw();
          gemm_serial(g.OC, g.ohw(), g.ckk(), wp, g.ckk(), 1, col.as<T>(), g.ohw(), 1, yn, g.ohw(), false);
          if (bp)
            for (int64_t oc = 0; oc < g.OC; ++oc)
              for (int64_t i = 0; i < g.ohw(); ++i) yn[oc * g.ohw() + i] += bp[oc];
        }
      });
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
      const int64_t wsize = g.OC * g.ckk();
      // Each thread sums its images' weight gradients into a private buffer; the buffers are added after.
      const int nt = std::max<int>(1, std::min<int64_t>(num_threads(), (g.N + g.image_grain() - 1) / g.image_grain()));
      Scratch partial(gw.defined() ? sizeof(T) * static_cast<size_t>(wsize * nt) : 0);
      if (gw.defined()) std::fill(partial.as<T>(), partial.as<T>() + wsize * nt, T(0));
      const int64_t per = (g.N + nt - 1) / nt;
      parallel_for(0, nt, 1, [&](int64_t t0, int64_t t1) {
        Scratch col(sizeof(T) * static_cast<size_t>(g.ckk() * g.ohw()));
        for (int64_t t = t0; t < t1; ++t)
          for (int64_t n = t * per; n < std::min(g.N, (t + 1) * per); ++n) {
            const T* gyn = gyp + n * g.OC * g.ohw();
            if (gw.defined()) {  // gW[OC, CKK] += gy[n][OC, OHW] @ col^T
              im2col(g, xp + n * g.C * g.H * g.W, col.as<T>());
              gemm_serial(g.OC, g.ckk(), g.ohw(), gyn, g.ohw(), 1, col.as<T>(), 1, g.ohw(), partial.as<T>() + t * wsize,
                          g.ckk(), true);
            }
            if (gx.defined()) {  // gcol[CKK, OHW] = W^T @ gy[n]; gx[n] = col2im(gcol)
              gemm_serial(g.ckk(), g.ohw(), g.OC, wp, 1, g.ckk(), gyn, g.ohw(), 1, col.as<T>(), g.ohw(), false);
              col2im(g, col.as<T>(), static_cast<T*>(gx.data_ptr()) + n * g.C * g.H * g.W);
            }
          }
      });
      if (gw.defined()) {
        T* gwp = static_cast<T*>(gw.data_ptr());
        for (int64_t i = 0; i < wsize; ++i) {
          T s = 0;
          for (int t = 0; t < nt; ++t) s += partial.as<T>()[t * wsize + i];
          gwp[i] = s;
        }
      }
    }
  });
}

}  // namespace ember::cpu
