// defines: the channels-last CPU convolution and pooling steps of ember/internal/conv_channels_last.h.
#include "ember/internal/conv_channels_last.h"

#include "op_utils.h"

namespace ember::detail {
namespace {

bool channels_last_only(const Tensor& t) {
  return t.defined() && t.suggest_memory_format() == MemoryFormat::ChannelsLast;
}
// 1x1, stride 1, no padding: out[n, :, h, w] = W x[n, :, h, w], one product per pixel.
bool pointwise(const Tensor& w, const Conv2dParams& p) {
  return w.size(2) == 1 && w.size(3) == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0;
}
// A channels-last [N, C, H, W] tensor as its [1, N*H*W, C] rows (a view: they are contiguous in memory).
Tensor as_rows(const Tensor& t) {
  return raw::reshape(raw::permute(t, {0, 2, 3, 1}), {1, t.size(0) * t.size(2) * t.size(3), t.size(1)});
}
// A 1x1 weight [OC, C, 1, 1] as the matrix [1, OC, C] (a view in either layout).
Tensor as_matrix(const Tensor& w) { return raw::reshape(w, {1, w.size(0), w.size(1)}); }
Tensor nchw_buffer(const Tensor& t) {
  return t.defined() ? empty(t.shape(), {.dtype = t.dtype(), .device = t.device()}) : t;
}

}  // namespace

bool conv2d_channels_last(Backend& be, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                          const Conv2dParams& p) {
  if (!channels_last_only(out) || out.numel() == 0) return false;
  if (pointwise(w, p) && x.numel() > 0 && x.is_contiguous(MemoryFormat::ChannelsLast)) {
    be.matmul(as_rows(out), as_rows(x), raw::transpose(as_matrix(w), 1, 2), b.defined() ? raw::contiguous(b) : b);
    return true;
  }
  const Tensor tmp = nchw_buffer(out);
  be.conv2d(tmp, raw::contiguous(x), raw::contiguous(w), b, p);
  be.copy(out, tmp);
  return true;
}

bool conv2d_backward_channels_last(Backend& be, const Conv2dGradArgs& a) {
  const bool rows = pointwise(a.w, a.p) && channels_last_only(a.x) && channels_last_only(a.gy) &&
                    (!a.gx.defined() || a.gx.is_contiguous(MemoryFormat::ChannelsLast));
  if (!rows && !channels_last_only(a.gx) && !channels_last_only(a.gw)) return false;
  if (rows) {
    const Tensor gy = as_rows(a.gy);
    if (a.gx.defined()) be.matmul(as_rows(a.gx), gy, as_matrix(a.w), Tensor());
    if (a.gw.defined()) be.matmul(as_matrix(a.gw), raw::transpose(gy, 1, 2), as_rows(a.x), Tensor());
    if (a.gb.defined()) be.reduce(ReduceOp::Sum, raw::reshape(a.gb, {1, 1, a.gb.numel()}), gy, {0, 1});
    return true;
  }
  const Tensor gx = nchw_buffer(a.gx), gw = nchw_buffer(a.gw);
  be.conv2d_backward({.gx = gx,
                      .gw = gw,
                      .gb = a.gb,
                      .gy = raw::contiguous(a.gy),
                      .x = raw::contiguous(a.x),
                      .w = raw::contiguous(a.w),
                      .p = a.p});
  if (gx.defined()) be.copy(a.gx, gx);
  if (gw.defined()) be.copy(a.gw, gw);
  return true;
}

bool pool2d_channels_last(Backend& be, PoolKind kind, const Tensor& out, const Tensor& x, const Pool2dParams& p) {
  if (out.numel() == 0 || (out.is_contiguous() && x.is_contiguous())) return false;
  const Tensor tmp = out.is_contiguous() ? out : nchw_buffer(out);
  be.pool2d(kind, tmp, raw::contiguous(x), p);
  if (!tmp.is_same(out)) be.copy(out, tmp);
  return true;
}

bool pool2d_backward_channels_last(Backend& be, PoolKind kind, const Tensor& gx, const Tensor& gy, const Tensor& x,
                                   const Pool2dParams& p) {
  if (gx.numel() == 0 || (gx.is_contiguous() && gy.is_contiguous() && x.is_contiguous())) return false;
  const Tensor tmp = gx.is_contiguous() ? gx : nchw_buffer(gx);
  be.pool2d_backward(kind, tmp, raw::contiguous(gy), raw::contiguous(x), p);
  if (!tmp.is_same(gx)) be.copy(gx, tmp);
  return true;
}

}  // namespace ember::detail
