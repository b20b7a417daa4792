// defines: the normalisation raw ops: batch_norm and its backward (PyTorch's formulas), each a few passes of the
// backend's batch-norm kernels (backend.h) after the argument checks; the row norms (layer_norm, rms_norm) and
// their backward, one fused kernel each over the rows.
#include "op_utils.h"

namespace ember::raw {
using detail::describe;

namespace {

// 16-bit floats compute in float32; float32 and float64 in themselves.
DType compute_dtype(const Tensor& x) { return is_reduced_float(x.dtype()) ? kFloat32 : x.dtype(); }

// An optional per-channel tensor, in the compute dtype and contiguous (undefined stays undefined).
Tensor per_channel(const Tensor& t, DType cd) { return t.defined() ? contiguous(cast(t, cd)) : t; }

// What the kernels see of a [N, C, S...] tensor in format f: itself, contiguous; or, channels-last, the [N*H*W, C]
// rows it is in memory (a view; BatchNorm1d's shape: the same per-channel statistics over every row).
Tensor kernel_layout(const Tensor& t, MemoryFormat f) {
  if (f != MemoryFormat::ChannelsLast) return contiguous(t);
  const Tensor nhwc = contiguous(t, f);
  return reshape(permute(nhwc, {0, 2, 3, 1}), {t.size(0) * t.size(2) * t.size(3), t.size(1)});
}

void check_channel_tensor(const char* op, const Tensor& x, const Tensor& t, const char* what) {
  if (!t.defined()) return;
  detail::check_same_device(op, x, t);
  EMBER_CHECK_DTYPE(is_floating(t.dtype()), op, ": ", what, " must be a floating-point tensor, got ", describe(t));
  EMBER_CHECK_SHAPE(t.dim() == 1 && t.size(0) == x.size(1), op, ": ", what, " must have shape [", x.size(1),
                    "] (one value per channel of the input ", x.shape(), "), got ", t.shape());
}

// 1 / sqrt(var + eps)
Tensor invstd_of(const Tensor& var, double eps) {
  return unary(UnaryOp::Reciprocal, unary(UnaryOp::Sqrt, binary(BinaryOp::Add, var, Scalar(eps))));
}

}  // namespace

BatchNormResult batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                           const Tensor& bias, bool training, double momentum, double eps, bool relu) {
  const char* op = relu ? "batch_norm_relu" : "batch_norm";
  detail::check_defined(op, x, "input");
  detail::check_floating(op, x);
  EMBER_CHECK_SHAPE(x.dim() >= 2, op, ": expected an input of at least 2 dims [N, C, ...], got ", x.shape());
  check_channel_tensor(op, x, running_mean, "running_mean");
  check_channel_tensor(op, x, running_var, "running_var");
  check_channel_tensor(op, x, weight, "weight");
  check_channel_tensor(op, x, bias, "bias");
  EMBER_CHECK_VALUE(eps > 0 && momentum >= 0 && momentum <= 1, op, ": need eps > 0 and momentum in [0, 1], got eps ",
                    eps, " and momentum ", momentum);
  EMBER_CHECK_VALUE(running_mean.defined() == running_var.defined(), op,
                    ": running_mean and running_var go together (one of them is undefined)");
  EMBER_CHECK_VALUE(training || running_mean.defined(), op,
                    ": evaluation mode normalises with the running statistics, but none were given");
  const int64_t C = x.size(1), count = C ? x.numel() / C : 0;
  EMBER_CHECK_VALUE(!training || count > 1, op, ": training needs more than one value per channel, got input ",
                    x.shape());

  Backend& be = backend_for(x.device());
  // x stays in its dtype (16-bit elements are widened in the kernels: no float32 copy of x); the statistics and
  // the per-channel tensors are in the compute dtype, float32 for 16-bit x (PyTorch's mixed-dtype batch norm).
  const DType cd = compute_dtype(x);
  const MemoryFormat f = x.suggest_memory_format();  // y keeps x's layout (channels-last stays so)
  const Tensor xc = kernel_layout(x, f);
  Tensor mean, invstd;
  if (training) {
    mean = detail::new_tensor({C}, cd, x.device());
    Tensor var = detail::new_tensor({C}, cd, x.device());
    if (C) be.batch_norm_stats(mean, var, xc);
    invstd = invstd_of(var, eps);
    if (running_mean.defined()) {  // an exponential average; the running variance is the unbiased one
      Tensor rm = running_mean, rv = running_var;
      const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
      binary_(BinaryOp::Mul, rm, Scalar(1 - momentum));
      binary_(BinaryOp::Add, rm, cast(binary(BinaryOp::Mul, mean, Scalar(momentum)), rm.dtype()));
      binary_(BinaryOp::Mul, rv, Scalar(1 - momentum));
      binary_(BinaryOp::Add, rv, cast(binary(BinaryOp::Mul, var, Scalar(momentum * unbias)), rv.dtype()));
    }
  } else {
    mean = per_channel(running_mean, cd);
    invstd = contiguous(invstd_of(cast(running_var, cd), eps));
  }
  Tensor y = detail::new_tensor(x.shape(), x.dtype(), x.device(), f);
  be.batch_norm_elemt({.y = kernel_layout(y, f),
                       .x = xc,
                       .mean = mean,
                       .invstd = invstd,
                       .w = per_channel(weight, cd),
                       .b = per_channel(bias, cd),
                       .relu = relu});
  return {y, mean, invstd};
}

BatchNormGrads batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                   const Tensor& weight, bool training, bool need_x, bool need_weight, bool need_bias,
                                   const Tensor& relu_y) {
  const char* op = "batch_norm_backward";
  detail::check_same_device(op, grad_out, x);
  EMBER_CHECK_SHAPE(grad_out.shape() == x.shape(), op, ": gradient ", grad_out.shape(), " does not match the input ",
                    x.shape());
  if (relu_y.defined()) {
    detail::check_same_device(op, relu_y, x);
    EMBER_CHECK_SHAPE(relu_y.shape() == x.shape(), op, ": the ReLU output ", relu_y.shape(),
                      " does not match the input ", x.shape());
  }
  Backend& be = backend_for(x.device());
  const DType cd = compute_dtype(x);
  const MemoryFormat f = x.suggest_memory_format();
  const Tensor dy = kernel_layout(cast(grad_out, x.dtype()), f), xc = kernel_layout(x, f), w = per_channel(weight, cd);
  const Tensor mask = relu_y.defined() ? kernel_layout(cast(relu_y, x.dtype()), f) : Tensor();
  const int64_t C = x.size(1), count = C ? x.numel() / C : 0;
  BatchNormGrads g;
  Tensor sum_dy, sum_dy_xmu;
  if (training || need_weight || need_bias) {
    sum_dy = detail::new_tensor({C}, cd, x.device());
    sum_dy_xmu = detail::new_tensor({C}, cd, x.device());
    if (C)
      be.batch_norm_backward_reduce(
          {.sum_dy = sum_dy, .sum_dy_xmu = sum_dy_xmu, .dy = dy, .x = xc, .mean = mean, .relu_y = mask});
  }
  if (need_x) {
    Tensor dx = detail::new_tensor(x.shape(), x.dtype(), x.device(), f);
    be.batch_norm_backward_elemt({.dx = kernel_layout(dx, f),
                                  .dy = dy,
                                  .x = xc,
                                  .mean = mean,
                                  .invstd = invstd,
                                  .w = w,
                                  .sum_dy = training ? sum_dy : Tensor(),
                                  .sum_dy_xmu = training ? sum_dy_xmu : Tensor(),
                                  .count = count,
                                  .relu_y = mask});
    g.x = dx;
  }
  if (need_weight) g.weight = binary(BinaryOp::Mul, sum_dy_xmu, invstd);
  if (need_bias) g.bias = sum_dy;
  return g;
}

namespace {
// x viewed as [N, D] rows of the last k dims, contiguous in the compute dtype.
Tensor as_rows(const Tensor& x, int64_t k, DType cd) {
  int64_t N = 1, D = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < x.dim() - k ? N : D) *= x.size(d);
  return reshape(contiguous(cast(x, cd)), {N, D});
}
// weight / bias flattened to [D], contiguous in the compute dtype (undefined stays undefined)
Tensor as_row_param(const Tensor& t, DType cd) { return t.defined() ? reshape(contiguous(cast(t, cd)), {-1}) : t; }
}  // namespace

LayerNormResult row_norm(RowNormKind kind, const Tensor& x, int64_t k, const Tensor& weight, const Tensor& bias,
                         double eps) {
  const char* op = name(kind);
  detail::check_defined(op, x, "input");
  detail::check_floating(op, x);
  EMBER_CHECK_SHAPE(k >= 1 && k <= x.dim(), op, ": cannot normalise the last ", k, " dims of ", describe(x));
  const Shape tail(x.shape().end() - k, x.shape().end());
  for (const Tensor* t : {&weight, &bias}) {
    if (!t->defined()) continue;
    detail::check_same_device(op, x, *t);
    EMBER_CHECK_DTYPE(is_floating(t->dtype()), op, ": ", t == &weight ? "weight" : "bias",
                      " must be a floating-point tensor, got ", describe(*t));
    EMBER_CHECK_SHAPE(t->shape() == tail, op, ": ", t == &weight ? "weight " : "bias ", t->shape(),
                      " must have the normalised shape ", tail, " of the input ", x.shape());
  }
  EMBER_CHECK_VALUE(eps >= 0, op, ": eps must be >= 0, got ", eps);
  const DType cd = compute_dtype(x);
  const Tensor xr = as_rows(x, k, cd);
  const int64_t N = xr.size(0), D = xr.size(1);
  Tensor y = detail::new_tensor({N, D}, cd, x.device());
  Tensor mean = detail::new_tensor({N}, cd, x.device()), rstd = detail::new_tensor({N}, cd, x.device());
  const RowNorm norm{.kind = kind, .rows = N, .cols = D, .eps = eps};
  backend_for(x.device())
      .row_norm({.norm = norm,
                 .y = y,
                 .mean = mean,
                 .rstd = rstd,
                 .x = xr,
                 .w = as_row_param(weight, cd),
                 .b = as_row_param(bias, cd)});
  return {cast(reshape(y, x.shape()), x.dtype()), mean, rstd};
}

LayerNormGrads row_norm_backward(RowNormKind kind, const Tensor& grad_out, const Tensor& x, int64_t k,
                                 const Tensor& mean, const Tensor& rstd, const Tensor& weight, bool need_x,
                                 bool need_weight, bool need_bias) {
  const char* op = name(kind, /*backward=*/true);  // (no string built per call: this runs every backward)
  detail::check_same_device(op, grad_out, x);
  EMBER_CHECK_SHAPE(grad_out.shape() == x.shape(), op, ": gradient ", grad_out.shape(), " does not match the input ",
                    x.shape());
  EMBER_CHECK_SHAPE(k >= 1 && k <= x.dim(), op, ": cannot normalise the last ", k, " dims of ", describe(x));
  const DType cd = compute_dtype(x);
  const Tensor xr = as_rows(x, k, cd), dy = as_rows(grad_out, k, cd);
  const Shape tail(x.shape().end() - k, x.shape().end());
  for (const Tensor* t : {&mean, &rstd}) {
    detail::check_defined(op, *t, t == &mean ? "mean" : "rstd");
    detail::check_same_device(op, x, *t);
    EMBER_CHECK_SHAPE(t->dtype() == cd && t->dim() == 1 && t->size(0) == xr.size(0) && t->is_contiguous(), op, ": ",
                      t == &mean ? "mean " : "rstd ", describe(*t), " must be the forward's: [", xr.size(0), "] ", cd);
  }
  if (weight.defined()) {
    detail::check_same_device(op, x, weight);
    EMBER_CHECK_SHAPE(weight.shape() == tail && is_floating(weight.dtype()), op, ": weight ", describe(weight),
                      " must be a floating-point tensor of the normalised shape ", tail);
  }
  LayerNormGrads g;
  Tensor dx = need_x ? detail::new_tensor(xr.shape(), cd, x.device()) : Tensor();
  if (need_weight) g.weight = detail::new_tensor(tail, cd, x.device());
  if (need_bias) g.bias = detail::new_tensor(tail, cd, x.device());
  const RowNorm norm{.kind = kind, .rows = xr.size(0), .cols = xr.size(1)};
  backend_for(x.device())
      .row_norm_backward({.norm = norm,
                          .dx = dx,
                          .dw = need_weight ? reshape(g.weight, {-1}) : Tensor(),
                          .db = need_bias ? reshape(g.bias, {-1}) : Tensor(),
                          .dy = dy,
                          .x = xr,
                          .mean = mean,
                          .rstd = rstd,
                          .w = as_row_param(weight, cd)});
  if (need_x) g.x = cast(reshape(dx, x.shape()), x.dtype());
  return g;
}

}  // namespace ember::raw
