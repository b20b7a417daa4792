// defines: the convolution-and-pooling raw ops: conv2d and its backward, max_pool2d / avg_pool2d and their backward,
// with their argument checks. Shapes are [N, C, H, W]; a channels-last input (or conv weight) gives channels-last
// outputs and gradients (memory_format.h).
#include "ember/internal/conv_channels_last.h"
#include "op_utils.h"

namespace ember::raw {
using detail::describe;

namespace {
std::pair<int64_t, int64_t> pair_arg(const char* op, const char* what, const std::vector<int64_t>& v, int64_t dflt) {
  if (v.empty()) return {dflt, dflt};
  EMBER_CHECK_VALUE(v.size() == 1 || v.size() == 2, op, ": ", what, " must have 1 or 2 values, got ", Shape(v));
  return v.size() == 1 ? std::pair{v[0], v[0]} : std::pair{v[0], v[1]};
}
int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p) { return (in + 2 * p - k) / s + 1; }

}  // namespace

Conv2dParams conv_params(const Tensor& x, const Tensor& w, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& padding) {
  auto [sh, sw] = pair_arg("conv2d", "stride", stride, 1);
  auto [ph, pw] = pair_arg("conv2d", "padding", padding, 0);
  EMBER_CHECK_VALUE(sh > 0 && sw > 0 && ph >= 0 && pw >= 0,
                    "conv2d: stride must be positive and padding non-negative, got stride ", Shape(stride), " padding ",
                    Shape(padding));
  EMBER_CHECK_SHAPE(x.size(2) + 2 * ph >= w.size(2) && x.size(3) + 2 * pw >= w.size(3), "conv2d: kernel ", w.size(2),
                    "x", w.size(3), " is larger than the padded input ", x.size(2) + 2 * ph, "x", x.size(3) + 2 * pw,
                    " (input ", x.shape(), ")");
  return {sh, sw, ph, pw};
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, std::vector<int64_t> stride,
              std::vector<int64_t> padding) {
  detail::check_defined("conv2d", x, "input");
  detail::check_defined("conv2d", w, "weight");
  detail::check_same_device("conv2d", x, w);
  detail::check_floating("conv2d", x);
  detail::check_product_dtypes("conv2d", x, w);
  EMBER_CHECK_SHAPE(x.dim() == 4, "conv2d: expected a 4-D input [N, C, H, W], got ", x.shape());
  EMBER_CHECK_SHAPE(w.dim() == 4, "conv2d: expected a 4-D weight [out_channels, in_channels, kH, kW], got ", w.shape());
  EMBER_CHECK_SHAPE(x.size(1) == w.size(1), "conv2d: input ", x.shape(), " has ", x.size(1), " channels but weight ",
                    w.shape(), " expects ", w.size(1));
  if (b.defined()) {
    detail::check_same_device("conv2d", x, b);
    detail::check_product_dtypes("conv2d", x, b);
    EMBER_CHECK_SHAPE(b.dim() == 1 && b.size(0) == w.size(0), "conv2d: bias ", b.shape(), " does not match ", w.size(0),
                      " output channels");
  }
  Conv2dParams p = conv_params(x, w, stride, padding);
  const int64_t OH = out_size(x.size(2), w.size(2), p.stride_h, p.pad_h),
                OW = out_size(x.size(3), w.size(3), p.stride_w, p.pad_w);
  const MemoryFormat f = detail::conv_memory_format(x, w);
  Tensor out = detail::new_tensor({x.size(0), w.size(0), OH, OW}, x.dtype(), x.device(), f);
  backend_for(x.device()).conv2d(out, contiguous(x, f), contiguous(w, f), b, p);
  return out;
}

Conv2dGrads conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, std::vector<int64_t> stride,
                            std::vector<int64_t> padding, bool need_x, bool need_w, bool need_b) {
  detail::check_same_device("conv2d_backward", gy, x);
  detail::check_same_device("conv2d_backward", x, w);
  Conv2dParams p = conv_params(x, w, stride, padding);
  EMBER_CHECK_SHAPE(gy.dim() == 4 && gy.size(0) == x.size(0) && gy.size(1) == w.size(0) &&
                        gy.size(2) == out_size(x.size(2), w.size(2), p.stride_h, p.pad_h) &&
                        gy.size(3) == out_size(x.size(3), w.size(3), p.stride_w, p.pad_w),
                    "conv2d_backward: gradient ", gy.shape(), " does not match the output of input ", x.shape(),
                    " and weight ", w.shape());
  // The gradients take the forward's layout (gx like x, gw like w, both in the convolution's format).
  const MemoryFormat f = detail::conv_memory_format(x, w);
  Conv2dGrads g;
  if (need_x) g.x = detail::new_tensor(x.shape(), x.dtype(), x.device(), f);
  if (need_w) g.w = detail::new_tensor(w.shape(), w.dtype(), w.device(), f);
  if (need_b) g.b = detail::new_tensor({w.size(0)}, w.dtype(), w.device());
  if (x.numel() == 0 || gy.numel() == 0) {  // nothing flows: zero gradients
    for (Tensor* t : {&g.x, &g.w, &g.b})
      if (t->defined() && t->numel()) backend_for(x.device()).fill(*t, 0);
    return g;
  }
  backend_for(x.device())
      .conv2d_backward({.gx = g.x,
                        .gw = g.w,
                        .gb = g.b,
                        .gy = contiguous(cast(gy, x.dtype()), f),
                        .x = contiguous(x, f),
                        .w = contiguous(w, f),
                        .p = p});
  return g;
}

Pool2dParams pool_params(const char* op, const Tensor& x, const std::vector<int64_t>& kernel,
                         const std::vector<int64_t>& stride, const std::vector<int64_t>& padding) {
  detail::check_defined(op, x, "input");
  detail::check_floating(op, x);
  EMBER_CHECK_SHAPE(x.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got ", x.shape());
  EMBER_CHECK_VALUE(!kernel.empty(), op, ": kernel size is required");
  auto [kh, kw] = pair_arg(op, "kernel", kernel, 0);
  auto [sh, sw] = pair_arg(op, "stride", stride, 0);
  if (stride.empty()) {
    sh = kh;
    sw = kw;
  }  // default stride = kernel size
  auto [ph, pw] = pair_arg(op, "padding", padding, 0);
  EMBER_CHECK_VALUE(kh > 0 && kw > 0 && sh > 0 && sw > 0, op, ": kernel and stride must be positive, got kernel ",
                    Shape(kernel), " stride ", Shape(stride));
  EMBER_CHECK_VALUE(ph >= 0 && pw >= 0 && 2 * ph <= kh && 2 * pw <= kw, op,
                    ": padding must be non-negative and at most half the kernel, got padding ", Shape(padding),
                    " for kernel ", Shape(kernel));
  EMBER_CHECK_SHAPE(x.size(2) + 2 * ph >= kh && x.size(3) + 2 * pw >= kw, op, ": kernel ", kh, "x", kw,
                    " is larger than the padded input ", x.size(2) + 2 * ph, "x", x.size(3) + 2 * pw, " (input ",
                    x.shape(), ")");
  return {kh, kw, sh, sw, ph, pw};
}

namespace {

Shape pool_out_shape(const Tensor& x, const Pool2dParams& p) {
  return {x.size(0), x.size(1), out_size(x.size(2), p.kernel_h, p.stride_h, p.pad_h),
          out_size(x.size(3), p.kernel_w, p.stride_w, p.pad_w)};
}

Tensor pool2d(PoolKind kind, const char* op, const Tensor& x, const std::vector<int64_t>& kernel,
              const std::vector<int64_t>& stride, const std::vector<int64_t>& padding) {
  Pool2dParams p = pool_params(op, x, kernel, stride, padding);
  // in the input's layout, as PyTorch's (a channels-last input gives a channels-last output)
  Tensor out = detail::new_tensor(pool_out_shape(x, p), x.dtype(), x.device(), x.suggest_memory_format());
  if (out.numel()) backend_for(x.device()).pool2d(kind, out, x, p);
  return out;
}

Tensor pool2d_backward(PoolKind kind, const char* op, const Tensor& gy, const Tensor& x,
                       const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                       const std::vector<int64_t>& padding) {
  detail::check_same_device(op, gy, x);
  Pool2dParams p = pool_params(op, x, kernel, stride, padding);
  EMBER_CHECK_SHAPE(gy.shape() == pool_out_shape(x, p), op, "_backward: gradient ", gy.shape(),
                    " does not match the output ", pool_out_shape(x, p));
  // the backend writes every element
  Tensor gx = detail::new_tensor(x.shape(), x.dtype(), x.device(), x.suggest_memory_format());
  if (gy.numel()) backend_for(x.device()).pool2d_backward(kind, gx, cast(gy, x.dtype()), x, p);
  else if (gx.numel()) backend_for(x.device()).fill(gx, 0);
  return gx;
}
}  // namespace

Tensor max_pool2d_backward(const Tensor& gy, const Tensor& x, std::vector<int64_t> k, std::vector<int64_t> s,
                           std::vector<int64_t> p) {
  return pool2d_backward(PoolKind::Max, "max_pool2d", gy, x, k, s, p);
}
Tensor avg_pool2d_backward(const Tensor& gy, const Tensor& x, std::vector<int64_t> k, std::vector<int64_t> s,
                           std::vector<int64_t> p) {
  return pool2d_backward(PoolKind::Avg, "avg_pool2d", gy, x, k, s, p);
}

Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding) {
  return pool2d(PoolKind::Max, "max_pool2d", x, kernel, stride, padding);
}
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding) {
  return pool2d(PoolKind::Avg, "avg_pool2d", x, kernel, stride, padding);
}

}  // namespace ember::raw
