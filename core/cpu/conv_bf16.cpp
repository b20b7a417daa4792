// defines: conv2d and its backward in bfloat16 on a CPU with bf16 dot products (bf16_gemm.h): im2col in bf16 and
// the bf16 GEMM, sums in float32, each result rounded once to bf16 (as the float32 path that widens the operands,
// which runs where bf16_gemm_path() is None). The same GEMMs as conv.cpp (Note [Conv work split] there), simpler:
//   forward:  y[n] = W[OC, CKK] @ col(x[n]) [CKK, OH*OW] + b
//   backward: gW += gy[n] @ col(x[n])^T;  gx[n] = col2im(W^T @ gy[n]);  gb = sum of gy
// The column matrix is walked in blocks of rows (block_rows: whole where it is small), so a large one is never held
// whole; the batch is split as in conv.cpp (ConvSplit).
#include <algorithm>
#include <vector>

#include "bf16_gemm.h"
#include "conv_bf16.h"
#include "conv_geom.h"
#include "cpu_backend.h"
#include "parallel.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {
namespace {

// Column-matrix rows per GEMM: as many as keep a block within kColElements (4 MiB of bf16, and the backward's
// float32 gradient block twice that), at least kBlockRows (256 pairs, one K slice of bf16_gemm). Each block is its
// own GEMM, and the backward's GEMMs pack their gy operand again for every block, so ResNet-50's column matrices
// (up to 1.8M elements) go whole: one packing of gy per image.
constexpr int64_t kBlockRows = 512;
constexpr int64_t kColElements = int64_t{1} << 21;
int64_t block_rows(int64_t ckk, int64_t ohw) {
  return std::max<int64_t>(1, std::min(ckk, std::max(kBlockRows, kColElements / std::max<int64_t>(ohw, 1))));
}

// Rows [p0, p1) of one image's column matrix: row (c, kh, kw), column (oh, ow) = x[c, oh*sh - ph + kh,
// ow*sw - pw + kw], 0 outside the image.
void im2col(const ConvGeom& g, const uint16_t* x, int64_t p0, int64_t p1, uint16_t* col) {
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t c = p / (g.KH * g.KW), kh = p / g.KW % g.KH, kw = p % g.KW;
    uint16_t* r = col + (p - p0) * g.ohw();
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const int64_t ih = oh * g.p.stride_h - g.p.pad_h + kh;
      uint16_t* ro = r + oh * g.OW;
      if (ih < 0 || ih >= g.H) {
        std::fill(ro, ro + g.OW, uint16_t{0});
        continue;
      }
      const uint16_t* xr = x + (c * g.H + ih) * g.W;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t iw = ow * g.p.stride_w - g.p.pad_w + kw;
        ro[ow] = iw >= 0 && iw < g.W ? xr[iw] : uint16_t{0};
      }
    }
  }
}

// The adjoint of im2col for rows [p0, p1): x[c, ih, iw] += col[row, (oh, ow)] wherever the row read inside the image.
void col2im_add(const ConvGeom& g, const float* col, int64_t p0, int64_t p1, float* x) {
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t c = p / (g.KH * g.KW), kh = p / g.KW % g.KH, kw = p % g.KW;
    const float* r = col + (p - p0) * g.ohw();
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const int64_t ih = oh * g.p.stride_h - g.p.pad_h + kh;
      if (ih < 0 || ih >= g.H) continue;
      float* xr = x + (c * g.H + ih) * g.W;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t iw = ow * g.p.stride_w - g.p.pad_w + kw;
        if (iw >= 0 && iw < g.W) xr[iw] += r[oh * g.OW + ow];
      }
    }
  }
}

uint16_t to_bf16(float f) { return detail::float_to_bf16_bits(f); }
float from_bf16(uint16_t b) { return detail::bf16_bits_to_float(b); }
const uint16_t* bits(const Tensor& t) { return static_cast<const uint16_t*>(t.data_ptr()); }
uint16_t* bits_mut(const Tensor& t) { return static_cast<uint16_t*>(t.data_ptr()); }

// The images of each part (ConvSplit) on one thread, one after the other; with one part the GEMMs thread instead.
template <class F>
void for_parts(const ConvGeom& g, const ConvSplit& sp, const F& f) {  // f(part, first image, end image)
  if (sp.parts == 1) return f(int64_t{0}, int64_t{0}, g.N);
  run_chunks(num_threads(), sp.parts, [&](int64_t q) { f(q, q * sp.per, std::min(g.N, (q + 1) * sp.per)); });
}
int gemm_threads(const ConvSplit& sp) { return sp.parts == 1 ? num_threads() : 1; }

bool all_bf16(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined() && t->dtype() != kBFloat16) return false;
  return true;
}

}  // namespace

bool conv2d_bf16(const Tensor& out, const Tensor& x_in, const Tensor& w_in, const Tensor& bias, const Conv2dParams& p) {
  if (bf16_gemm_path() == Bf16Path::None || !all_bf16({&out, &x_in, &w_in, &bias})) return false;
  if (out.numel() == 0) return true;
  const Tensor x = raw::contiguous(x_in), w = raw::contiguous(w_in), b = bias.defined() ? raw::contiguous(bias) : bias;
  const ConvGeom g = geometry(x, w, out.size(2), out.size(3), p);
  const int64_t ohw = g.ohw(), ckk = g.ckk(), chw = g.C * g.H * g.W;
  const int64_t rows = block_rows(ckk, ohw);
  const ConvSplit sp(g, num_threads());
  for_parts(g, sp, [&](int64_t, int64_t n0, int64_t n1) {
    Scratch col(sizeof(uint16_t) * static_cast<size_t>(rows * ohw));
    Scratch y(sizeof(float) * static_cast<size_t>(g.OC * ohw));
    for (int64_t n = n0; n < n1; ++n) {
      if (ckk == 0) std::fill(y.as<float>(), y.as<float>() + g.OC * ohw, 0.0f);
      for (int64_t p0 = 0; p0 < ckk; p0 += rows) {
        const int64_t kb = std::min(rows, ckk - p0);
        im2col(g, bits(x) + n * chw, p0, p0 + kb, col.as<uint16_t>());
        bf16_gemm(g.OC, ohw, kb, bits(w) + p0, ckk, 1, col.as<uint16_t>(), ohw, 1, y.as<float>(), ohw, p0 > 0,
                  gemm_threads(sp));
      }
      uint16_t* yo = bits_mut(out) + n * g.OC * ohw;
      for (int64_t oc = 0; oc < g.OC; ++oc) {
        const float bo = b.defined() ? from_bf16(bits(b)[oc]) : 0.0f;
        const float* yr = y.as<float>() + oc * ohw;
        for (int64_t i = 0; i < ohw; ++i) yo[oc * ohw + i] = to_bf16(yr[i] + bo);
      }
    }
  });
  return true;
}

bool conv2d_backward_bf16(const Tensor& gy_in, const Tensor& x_in, const Tensor& w_in, const Tensor& gx,
                          const Tensor& gw, const Tensor& gb, const Conv2dParams& p) {
  if (bf16_gemm_path() == Bf16Path::None || !all_bf16({&gy_in, &x_in, &w_in, &gx, &gw, &gb})) return false;
  const Tensor gy = raw::contiguous(gy_in), x = raw::contiguous(x_in), w = raw::contiguous(w_in);
  const ConvGeom g = geometry(x, w, gy.size(2), gy.size(3), p);
  const int64_t ohw = g.ohw(), ckk = g.ckk(), chw = g.C * g.H * g.W;
  const int64_t rows = block_rows(ckk, ohw);
  const int64_t wsize = g.OC * ckk;
  const ConvSplit sp(g, num_threads());
  // Each part sums its images' weight gradient in float32 here; the parts are added at the end.
  std::vector<float> gw_parts(gw.defined() ? static_cast<size_t>(sp.parts * wsize) : 0, 0.0f);
  // W^T [CKK, OC] once per call: the input gradient's GEMMs read W^T's rows as pairs of adjacent bf16 (one load a
  // pair when the GEMM packs them), where W itself would be gathered at a stride of CKK for every image.
  Scratch wt_buf(sizeof(uint16_t) * static_cast<size_t>(gx.defined() ? wsize : 0));
  uint16_t* wt = wt_buf.as<uint16_t>();
  if (gx.defined())
    for (int64_t oc = 0; oc < g.OC; ++oc)
      for (int64_t k = 0; k < ckk; ++k) wt[k * g.OC + oc] = bits(w)[oc * ckk + k];
  if (g.N > 0 && ohw > 0 && (gx.defined() || gw.defined())) {
    for_parts(g, sp, [&](int64_t q, int64_t n0, int64_t n1) {
      Scratch col(sizeof(uint16_t) * static_cast<size_t>(gw.defined() ? rows * ohw : 0));
      Scratch gcol(sizeof(float) * static_cast<size_t>(gx.defined() ? rows * ohw : 0));
      Scratch gxf(sizeof(float) * static_cast<size_t>(gx.defined() ? chw : 0));
      for (int64_t n = n0; n < n1; ++n) {
        const uint16_t* gyn = bits(gy) + n * g.OC * ohw;
        if (gx.defined()) std::fill(gxf.as<float>(), gxf.as<float>() + chw, 0.0f);
        for (int64_t p0 = 0; p0 < ckk; p0 += rows) {
          const int64_t kb = std::min(rows, ckk - p0);
          if (gw.defined()) {  // gW[:, p0 : p0 + kb] += gy[n] [OC, OHW] @ col^T [OHW, kb]
            im2col(g, bits(x) + n * chw, p0, p0 + kb, col.as<uint16_t>());
            bf16_gemm(g.OC, kb, ohw, gyn, ohw, 1, col.as<uint16_t>(), 1, ohw, gw_parts.data() + q * wsize + p0, ckk,
                      true, gemm_threads(sp));
          }
          if (gx.defined()) {  // gcol [kb, OHW] = W^T[p0 : p0 + kb, :] @ gy[n], then into gx[n] by col2im
            bf16_gemm(kb, ohw, g.OC, wt + p0 * g.OC, g.OC, 1, gyn, ohw, 1, gcol.as<float>(), ohw, false,
                      gemm_threads(sp));
            col2im_add(g, gcol.as<float>(), p0, p0 + kb, gxf.as<float>());
          }
        }
        if (gx.defined()) {
          uint16_t* gxo = bits_mut(gx) + n * chw;
          for (int64_t i = 0; i < chw; ++i) gxo[i] = to_bf16(gxf.as<float>()[i]);
        }
      }
    });
  } else if (gx.defined()) {
    std::fill(bits_mut(gx), bits_mut(gx) + gx.numel(), uint16_t{0});
  }
  if (gw.defined()) {
    for (int64_t i = 0; i < wsize; ++i) {
      float s = 0.0f;
      for (int64_t q = 0; q < sp.parts; ++q) s += gw_parts[q * wsize + i];
      bits_mut(gw)[i] = to_bf16(s);
    }
  }
  if (gb.defined()) {  // in double, as conv.cpp's bias gradient
    for (int64_t oc = 0; oc < g.OC; ++oc) {
      double s = 0.0;
      for (int64_t n = 0; n < g.N; ++n) {
        const uint16_t* r = bits(gy) + (n * g.OC + oc) * ohw;
        for (int64_t i = 0; i < ohw; ++i) s += from_bf16(r[i]);
      }
      bits_mut(gb)[oc] = to_bf16(static_cast<float>(s));
    }
  }
  return true;
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
