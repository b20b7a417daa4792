// defines: the losses, onehotbatch and clip_grad_norm_. Each loss is a single autograd node whose backward is
// written out (softmax - target, sigmoid - target, ...), which is both faster and free of the kinks a
// composition of abs/relu/log would put into the gradient.
#include "ember/nn/losses.h"

#include <cmath>
#include <vector>

#include "ember/autograd/grad_mode.h"
#include "ember/autograd/node.h"
#include "ember/autograd/ops.h"
#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"

namespace ember::nn {
using autograd::Grads;

namespace {
std::string desc(const Tensor& t) { return detail::str(t.dtype(), t.shape(), " on ", t.device()); }

void check_logits(const char* op, const Tensor& logits) {
  EMBER_CHECK(logits.defined(), Error, op, ": logits are undefined");
  EMBER_CHECK_SHAPE(logits.dim() == 2, op, ": expected logits [N, C], got ", logits.shape());
  EMBER_CHECK_DTYPE(is_floating(logits.dtype()), op, ": logits must be floating point, got ", desc(logits));
}

// -mean(sum(t * log_softmax(z), 1)) and its gradients (softmax(z) * sum(t, 1) - t) / N for the logits and
// -log_softmax(z) / N for `targets` (when given and it requires grad; t is its value in the logits' dtype).
Tensor soft_cross_entropy(const char* op, const Tensor& logits, const Tensor& targets, const Tensor& t) {
  Tensor logp = raw::log_softmax(logits, 1);
  const double n = static_cast<double>(std::max<int64_t>(logits.size(0), 1));
  Tensor loss =
      raw::binary(BinaryOp::Div, raw::unary(UnaryOp::Neg, raw::sum(raw::binary(BinaryOp::Mul, logp, t))), Scalar(n));
  const bool tgrad = targets.defined() && autograd::needs_grad({&targets});
  if (tgrad || autograd::needs_grad({&logits})) {
    std::vector<Tensor> inputs = {logits};
    if (tgrad) inputs.push_back(targets);
    const DType tdtype = tgrad ? targets.dtype() : t.dtype();
    autograd::record(
        op, inputs, {loss},
        [op, n, tgrad, tdtype, slogp = autograd::save(logp), st = autograd::save(t)](const Grads& g) -> Grads {
          const Tensor& tv = st.get(op);
          const Tensor& lp = slogp.get(op);
          Tensor scale = raw::binary(BinaryOp::Div, g[0], Scalar(n));
          Tensor p = raw::unary(UnaryOp::Exp, lp);
          Tensor d = raw::binary(BinaryOp::Sub, raw::binary(BinaryOp::Mul, p, raw::sum(tv, {1}, true)), tv);
          Grads out = {raw::binary(BinaryOp::Mul, d, scale)};
          if (tgrad) out.push_back(raw::cast(raw::binary(BinaryOp::Mul, raw::unary(UnaryOp::Neg, lp), scale), tdtype));
          return out;
        });
  }
  return loss;
}
}  // namespace

Tensor onehotbatch(const Tensor& labels, int64_t num_classes) {
  EMBER_CHECK(labels.defined(), Error, "onehotbatch: labels are undefined");
  EMBER_CHECK_VALUE(num_classes > 0, "onehotbatch: num_classes must be positive, got ", num_classes);
  EMBER_CHECK_DTYPE(!is_floating(labels.dtype()), "onehotbatch: labels must be integers, got ", desc(labels));
  EMBER_CHECK_SHAPE(labels.dim() == 1, "onehotbatch: labels must be 1-D [N], got ", labels.shape());
  if (labels.numel()) {
    // one deliberate host read (on CUDA: one sync) of both bounds; to_vector is allowed where item() is guarded
    const std::vector<double> range = raw::stack({raw::min(labels), raw::max(labels)}, 0).to_vector<double>();
    const double lo = range[0], hi = range[1];
    EMBER_CHECK_INDEX(lo >= 0 && hi < static_cast<double>(num_classes), "onehotbatch: labels must be in [0, ",
                      num_classes, "), got values from ", lo, " to ", hi);
  }
  Tensor classes = arange(num_classes, {.dtype = labels.dtype(), .device = labels.device()});
  return raw::cast(raw::binary(BinaryOp::Eq, raw::unsqueeze(labels, 1), raw::unsqueeze(classes, 0)), kFloat32);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  check_logits("cross_entropy", logits);
  EMBER_CHECK(targets.defined(), Error, "cross_entropy: targets are undefined");
  EMBER_CHECK_DTYPE(targets.dtype() == kInt64 || targets.dtype() == kInt32,
                    "cross_entropy: targets must be class indices (int64), got ", desc(targets),
                    "; for one-hot or soft targets use logitcrossentropy");
  EMBER_CHECK_SHAPE(targets.dim() == 1 && targets.size(0) == logits.size(0), "cross_entropy: logits ", logits.shape(),
                    " and targets ", targets.shape(), " do not match (expected targets [", logits.size(0), "])");
  EMBER_CHECK_DEVICE(targets.device() == logits.device(),
                     "cross_entropy: expected all tensors on the same device, got ", logits.device(), " and ",
                     targets.device());
  if (targets.numel()) {
    // one deliberate host read (on CUDA: one sync) of both bounds; to_vector is allowed where item() is guarded
    const std::vector<double> range = raw::stack({raw::min(targets), raw::max(targets)}, 0).to_vector<double>();
    const double lo = range[0], hi = range[1];
    EMBER_CHECK_INDEX(lo >= 0 && hi < static_cast<double>(logits.size(1)),
                      "cross_entropy: targets must be class indices in [0, ", logits.size(1), ") for logits ",
                      logits.shape(), ", got values from ", lo, " to ", hi);
  }
  return soft_cross_entropy("cross_entropy", logits, Tensor(),
                            raw::cast(onehotbatch(targets, logits.size(1)), logits.dtype()));
}

Tensor logitcrossentropy(const Tensor& logits, const Tensor& targets) {
  check_logits("logitcrossentropy", logits);
  EMBER_CHECK(targets.defined(), Error, "logitcrossentropy: targets are undefined");
  EMBER_CHECK_SHAPE(targets.shape() == logits.shape(), "logitcrossentropy: logits ", logits.shape(), " and targets ",
                    targets.shape(), " must have the same shape (use cross_entropy for class indices)");
  EMBER_CHECK_DEVICE(targets.device() == logits.device(),
                     "logitcrossentropy: expected all tensors on the same device, got ", logits.device(), " and ",
                     targets.device());
  return soft_cross_entropy("logitcrossentropy", logits, targets, raw::cast(targets.detach(), logits.dtype()));
}

Tensor mse_loss(const Tensor& pred, const Tensor& target) {
  EMBER_CHECK(pred.defined() && target.defined(), Error, "mse_loss: undefined argument");
  EMBER_CHECK_SHAPE(pred.shape() == target.shape(), "mse_loss: prediction ", pred.shape(), " and target ",
                    target.shape(), " must have the same shape");
  EMBER_CHECK_DTYPE(is_floating(pred.dtype()), "mse_loss: prediction must be floating point, got ", desc(pred));
  EMBER_CHECK_DEVICE(target.device() == pred.device(), "mse_loss: expected all tensors on the same device, got ",
                     pred.device(), " and ", target.device());
  return mean(square(pred - target));
}

Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& t) {
  EMBER_CHECK(x.defined() && t.defined(), Error, "binary_cross_entropy_with_logits: undefined argument");
  EMBER_CHECK_SHAPE(x.shape() == t.shape(), "binary_cross_entropy_with_logits: logits ", x.shape(), " and targets ",
                    t.shape(), " must have the same shape");
  EMBER_CHECK_DTYPE(is_floating(x.dtype()), "binary_cross_entropy_with_logits: logits must be floating point, got ",
                    desc(x));
  EMBER_CHECK_DEVICE(t.device() == x.device(),
                     "binary_cross_entropy_with_logits: expected all tensors on the same device, got ", x.device(),
                     " and ", t.device());
  Tensor tv = raw::cast(t.detach(), x.dtype());
  // max(x, 0) - x t + log(1 + exp(-|x|)): never exponentiates a large positive number
  Tensor per = raw::binary(
      BinaryOp::Add, raw::binary(BinaryOp::Sub, raw::unary(UnaryOp::Relu, x), raw::binary(BinaryOp::Mul, x, tv)),
      raw::unary(
          UnaryOp::Log,
          raw::binary(BinaryOp::Add, raw::unary(UnaryOp::Exp, raw::unary(UnaryOp::Neg, raw::unary(UnaryOp::Abs, x))),
                      Scalar(1.0))));
  const double n = static_cast<double>(std::max<int64_t>(x.numel(), 1));
  Tensor loss = raw::binary(BinaryOp::Div, raw::sum(per), Scalar(n));
  const bool tgrad = autograd::needs_grad({&t});
  if (tgrad || autograd::needs_grad({&x})) {
    std::vector<Tensor> inputs = {x};
    if (tgrad) inputs.push_back(t);
    // d/dx = (sigmoid(x) - t) / n, d/dt = -x / n
    autograd::record(
        "binary_cross_entropy_with_logits", inputs, {loss},
        [n, tgrad, tdtype = t.dtype(), sx = autograd::save(x), st = autograd::save(tv)](const Grads& g) -> Grads {
          const char* op = "binary_cross_entropy_with_logits";
          const Tensor& xv = sx.get(op);
          Tensor scale = raw::binary(BinaryOp::Div, g[0], Scalar(n));
          Tensor d = raw::binary(BinaryOp::Sub, raw::unary(UnaryOp::Sigmoid, xv), st.get(op));
          Grads out = {raw::binary(BinaryOp::Mul, d, scale)};
          if (tgrad) out.push_back(raw::cast(raw::binary(BinaryOp::Mul, raw::unary(UnaryOp::Neg, xv), scale), tdtype));
          return out;
        });
  }
  return loss;
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  EMBER_CHECK_VALUE(max_norm >= 0, "clip_grad_norm_: max_norm must be >= 0, got ", max_norm);
  NoGradGuard g;
  double sq = 0;
  for (const Tensor& p : params) {
    Tensor gr = p.grad();
    if (gr.defined()) sq += raw::sum(raw::unary(UnaryOp::Square, raw::cast(gr, kFloat64))).cpu().item();
  }
  const double norm = std::sqrt(sq);
  const double scale = max_norm / (norm + 1e-6);
  if (scale < 1) {
    for (const Tensor& p : params) {
      Tensor gr = p.grad();
      if (gr.defined()) raw::binary_(BinaryOp::Mul, gr, Scalar(scale));
    }
  }
  return norm;
}

}  // namespace ember::nn
