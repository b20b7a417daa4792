// defines: the losses, onehotbatch and clip_grad_norm_. cross_entropy, logitcrossentropy and
// binary_cross_entropy_with_logits are each a single autograd node whose backward is written out (softmax - target,
// sigmoid - target, ...), which is both faster and free of the kinks a composition of abs/relu/log would put into
// the gradient; PyTorch's option-taking losses (nll_loss, cross_entropy with options, mse / l1 / huber / smooth_l1)
// are composites of differentiable ops.
#include "ember/nn/losses.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "ember/autograd/engine.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/node.h"
#include "ember/autograd/op_def.h"
#include "ember/autograd/ops.h"
#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"

namespace ember::nn {
namespace opdef = autograd::opdef;
using autograd::Grads;
using autograd::OpEntry;

namespace {
std::string desc(const Tensor& t) { return detail::str(t.dtype(), t.shape(), " on ", t.device()); }

void check_logits(const char* op, const Tensor& logits) {
  EMBER_CHECK(logits.defined(), Error, op, ": logits are undefined");
  EMBER_CHECK_SHAPE(logits.dim() == 2, op, ": expected logits [N, C], got ", logits.shape());
  EMBER_CHECK_DTYPE(is_floating(logits.dtype()), op, ": logits must be floating point, got ", desc(logits));
}

// -mean(sum(t * log_softmax(z), 1)) and its gradients (softmax(z) * sum(t, 1) - t) / N for the logits and
// -log_softmax(z) / N for `targets` (when given and it requires grad; t is its value in the logits' dtype).
Tensor soft_cross_entropy(const OpEntry& op, const Tensor& logits, const Tensor& targets, const Tensor& t) {
  Tensor logp = raw::log_softmax(logits, 1);
  const double n = static_cast<double>(logits.size(0));  // an empty batch: 0 / 0 = nan, as PyTorch
  Tensor loss =
      raw::binary(BinaryOp::Div, raw::unary(UnaryOp::Neg, raw::sum(raw::binary(BinaryOp::Mul, logp, t))), Scalar(n));
  const bool tgrad = targets.defined() && op.needs_grad({&targets});
  if (tgrad || op.needs_grad({&logits})) {
    std::vector<Tensor> inputs = {logits};
    if (tgrad) inputs.push_back(targets);
    const DType tdtype = tgrad ? targets.dtype() : t.dtype();
    op.record(inputs, {loss})
        .backward([n, tgrad, tdtype, sz = autograd::save(logits), st = autograd::save(t),
                   starg = autograd::save(tgrad ? targets : Tensor())](const Grads& g) -> Grads {
          const Tensor z = sz.get(), tv = st.get();
          if (autograd::create_graph_enabled()) {  // differentiable again: through the composite
            std::vector<Tensor> in = {z};
            if (tgrad) in.push_back(starg.get());
            return autograd::grads_by_recompute(
                in,
                [&](const std::vector<Tensor>& v) {
                  const Tensor target = tgrad ? v[1].to(v[0].dtype()) : tv;
                  return -sum(target * log_softmax(v[0], 1)) / n;
                },
                g[0]);
          }
          Tensor scale = raw::binary(BinaryOp::Div, g[0], Scalar(n));
          Tensor p = raw::softmax(z, 1);
          Tensor d = raw::binary(BinaryOp::Sub, raw::binary(BinaryOp::Mul, p, raw::sum(tv, {1}, true)), tv);
          Grads out = {raw::binary(BinaryOp::Mul, d, scale)};
          if (tgrad)
            out.push_back(
                raw::cast(raw::binary(BinaryOp::Mul, raw::unary(UnaryOp::Neg, raw::log_softmax(z, 1)), scale), tdtype));
          return out;
        });
  }
  return loss;
}
}  // namespace

namespace {
// [N, num_classes] float32: row i is 1 at labels[i] (labels already checked).
Tensor one_hot(const Tensor& labels, int64_t num_classes) {
  Tensor classes = arange(num_classes, {.dtype = labels.dtype(), .device = labels.device()});
  return raw::cast(raw::binary(BinaryOp::Eq, raw::unsqueeze(labels, 1), raw::unsqueeze(classes, 0)), kFloat32);
}
}  // namespace

namespace {
// cross_entropy with class indices (checked), on every device: the fused kernels (raw::class_cross_entropy) give each
// row's -log_softmax(z)[i, t_i] and the row statistics, the gradient (softmax(z) - onehot(t)) g / N comes from the
// logits and those statistics in one pass. Nothing of N x C is made besides the gradient itself: 16-bit logits are
// read as they are (computed in float32), no one-hot, no log-softmax. (The one-hot form made and read N x C
// one-hot values in both passes: charlm's [4096, 96] logits spent ~3 ms a step there on one core, the model 167;
// on a GPU, GPT-2's [16384, 50257] float32 one-hot was 3.3 GB.) fp32_out: the loss in float32 (autocast), else in
// the logits' dtype as PyTorch's.
Tensor class_cross_entropy(const OpEntry& op, const Tensor& logits, const Tensor& targets, bool fp32_out) {
  const double n = static_cast<double>(logits.size(0));  // an empty batch: 0 / 0 = nan, as PyTorch
  const raw::ClassCrossEntropy ce = raw::class_cross_entropy(logits, targets);
  const DType compute = ce.loss.dtype();
  Tensor loss = raw::binary(BinaryOp::Div, raw::sum(ce.loss), Scalar(n));
  if (!fp32_out) loss = raw::cast(loss, logits.dtype());
  if (!op.needs_grad({&logits})) return loss;
  op.record({logits}, {loss})
      .backward([n, compute, targets, stats = ce.stats, sz = autograd::save(logits)](const Grads& g) -> Grads {
        const Tensor z = sz.get();
        if (autograd::create_graph_enabled()) {  // differentiable again: through the composite, in `compute`
          const int64_t N = z.size(0), C = z.size(1);
          const Tensor pos =
              arange(N, {.dtype = kInt64, .device = z.device()}) * C + targets.to(kInt64);
          return autograd::grads_by_recompute(
              {z},
              [&](const std::vector<Tensor>& v) {
                return -sum(log_softmax(v[0].to(compute), 1).reshape({-1}).index_select(0, pos)) / n;
              },
              g[0]);
        }
        const Tensor scale = raw::binary(BinaryOp::Div, raw::cast(g[0], compute), Scalar(n));
        return {raw::class_cross_entropy_backward(z, targets, stats, scale)};
      });
  return loss;
}
}  // namespace

Tensor onehotbatch(const Tensor& labels, int64_t num_classes) {
  EMBER_CHECK(labels.defined(), Error, "onehotbatch: labels are undefined");
  EMBER_CHECK_VALUE(num_classes > 0, "onehotbatch: num_classes must be positive, got ", num_classes);
  EMBER_CHECK_DTYPE(!is_floating(labels.dtype()), "onehotbatch: labels must be integers, got ", desc(labels));
  EMBER_CHECK_SHAPE(labels.dim() == 1, "onehotbatch: labels must be 1-D [N], got ", labels.shape());
  // without the host waiting on a GPU (Backend::check_range)
  raw::check_index_range(labels, 0, num_classes, [num_classes](int64_t lo, int64_t hi) {
    return detail::str("onehotbatch: labels must be in [0, ", num_classes, "), got values from ", lo, " to ", hi);
  });
  return one_hot(labels, num_classes);
}

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets) {
  OpEntry op(opdef::cross_entropy);
  // Autocast: every loss is a "float32" op (amp.h), 16-bit inputs computed in float32 — which the fused kernels do
  // reading them as they are, so they are not cast here (the loss is float32 all the same).
  const bool fp32_out = op.computes_in_fp32(logits_in);
  const Tensor& logits = logits_in;
  check_logits(opdef::cross_entropy.name, logits);
  EMBER_CHECK(targets.defined(), Error, opdef::cross_entropy.name, ": targets are undefined");
  EMBER_CHECK_DTYPE(targets.dtype() == kInt64 || targets.dtype() == kInt32, opdef::cross_entropy.name,
                    ": targets must be class indices (int64), got ", desc(targets),
                    "; for one-hot or soft targets use logitcrossentropy");
  EMBER_CHECK_SHAPE(targets.dim() == 1 && targets.size(0) == logits.size(0), opdef::cross_entropy.name, ": logits ",
                    logits.shape(), " and targets ", targets.shape(), " do not match (expected targets [",
                    logits.size(0), "])");
  EMBER_CHECK_DEVICE(targets.device() == logits.device(), opdef::cross_entropy.name,
                     ": expected all tensors on the same device, got ", logits.device(), " and ", targets.device());
  // without the host waiting on a GPU (Backend::check_range)
  raw::check_index_range(targets, 0, logits.size(1),
                         [c = logits.size(1), shape = logits.shape()](int64_t lo, int64_t hi) {
                           return detail::str(opdef::cross_entropy.name, ": targets must be class indices in [0, ", c,
                                              ") for logits ", shape, ", got values from ", lo, " to ", hi);
                         });
  return class_cross_entropy(op, logits, targets, fp32_out);
}

Tensor logitcrossentropy(const Tensor& logits_in, const Tensor& targets_in) {
  OpEntry op(opdef::logitcrossentropy);
  const Tensor &logits = op.in(logits_in), &targets = op.in(targets_in);
  check_logits(opdef::logitcrossentropy.name, logits);
  EMBER_CHECK(targets.defined(), Error, opdef::logitcrossentropy.name, ": targets are undefined");
  EMBER_CHECK_SHAPE(targets.shape() == logits.shape(), opdef::logitcrossentropy.name, ": logits ", logits.shape(),
                    " and targets ", targets.shape(),
                    " must have the same shape (use cross_entropy for class indices)");
  EMBER_CHECK_DEVICE(targets.device() == logits.device(), opdef::logitcrossentropy.name,
                     ": expected all tensors on the same device, got ", logits.device(), " and ", targets.device());
  return soft_cross_entropy(op, logits, targets, raw::cast(targets.detach(), logits.dtype()));
}

// --- the composite losses: built of differentiable ops (autograd differentiates them, twice where their ops allow)

namespace {
// The per-element losses `per` reduced; the mean divides by `count` when given (the targets' total weight).
Tensor reduce(const Tensor& per, Reduction r, const Tensor& count = {}) {
  if (r == Reduction::None) return per;
  if (r == Reduction::Sum) return sum(per);
  return count.defined() ? sum(per) / sum(count) : mean(per);
}

// pred and target of an elementwise loss: defined, one shape, floating pred, one device.
void check_pair(const char* op, const Tensor& pred, const Tensor& target) {
  EMBER_CHECK(pred.defined() && target.defined(), Error, op, ": undefined argument");
  EMBER_CHECK_SHAPE(pred.shape() == target.shape(), op, ": prediction ", pred.shape(), " and target ", target.shape(),
                    " must have the same shape");
  EMBER_CHECK_DTYPE(is_floating(pred.dtype()), op, ": prediction must be floating point, got ", desc(pred));
  EMBER_CHECK_DEVICE(target.device() == pred.device(), op, ": expected all tensors on the same device, got ",
                     pred.device(), " and ", target.device());
}

// -weight[t] * log_probs[t] for each target t, and weight[t] (0 for an ignored target: it adds nothing and does not
// count). log_probs [N, C, d...] with targets [N, d...], or [C] with a 0-dim target.
struct TargetTerms {
  Tensor loss, weight;
};
TargetTerms nll_terms(const char* op, const Tensor& lp, const Tensor& targets, int64_t ignore_index,
                      const Tensor& class_weight) {
  EMBER_CHECK(lp.defined() && targets.defined(), Error, op, ": undefined argument");
  EMBER_CHECK_DTYPE(is_floating(lp.dtype()), op, ": the input must be floating point, got ", desc(lp));
  EMBER_CHECK_DTYPE(targets.dtype() == kInt64 || targets.dtype() == kInt32, op,
                    ": targets must be class indices (int64), got ", desc(targets));
  EMBER_CHECK_SHAPE(lp.dim() >= 1, op, ": expected an input [N, C, ...] or [C], got a 0-dim ", desc(lp));
  EMBER_CHECK_DEVICE(targets.device() == lp.device(), op, ": expected all tensors on the same device, got ",
                     lp.device(), " and ", targets.device());
  const int64_t cdim = lp.dim() == 1 ? 0 : 1, classes = lp.size(cdim);
  Shape expect = lp.shape();
  expect.erase(static_cast<size_t>(cdim));
  EMBER_CHECK_SHAPE(targets.shape() == expect, op, ": input ", lp.shape(), " and targets ", targets.shape(),
                    " do not match (expected targets ", expect, ")");
  const TensorOptions like{.dtype = lp.dtype(), .device = lp.device()};
  Tensor w = class_weight;
  if (w.defined()) {
    EMBER_CHECK_SHAPE(w.dim() == 1 && w.size(0) == classes, op, ": weight must be [", classes, "] (one per class of ",
                      lp.shape(), "), got ", w.shape());
    EMBER_CHECK_DEVICE(w.device() == lp.device(), op, ": expected all tensors on the same device, got ", lp.device(),
                       " and ", w.device());
    w = w.to(lp.dtype());
  }
  const Tensor t = targets.to(kInt64);
  const Tensor keep = ne(t, ignore_index);
  const Tensor safe = where(keep, t, zeros({}, {.dtype = kInt64, .device = t.device()}));  // a class to read
  // without the host waiting on a GPU (Backend::check_range)
  raw::check_index_range(safe, 0, classes, [op, classes, ignore_index, input = desc(lp)](int64_t lo, int64_t hi) {
    return detail::str(op, ": targets must be class indices in [0, ", classes, ") or ignore_index ", ignore_index,
                       " for input ", input, ", got values from ", lo, " to ", hi);
  });
  // classes last, so that each target picks along the last dim
  std::vector<int64_t> perm = {0};
  for (int64_t d = 2; d < lp.dim(); ++d) perm.push_back(d);
  perm.push_back(1);
  const Tensor rows = lp.dim() <= 2 ? lp : lp.permute(perm);
  const Tensor picked = gather(rows, -1, safe.unsqueeze(-1)).squeeze(-1);
  Tensor tw = w.defined() ? index_select(w, 0, safe.reshape({-1})).reshape(t.shape()) : ones(t.shape(), like);
  tw = where(keep, tw, zeros({}, like));
  return {-(picked * tw), tw};
}
}  // namespace

Tensor nll_loss(const Tensor& log_probs_in, const Tensor& targets, const NllLossOptions& opts) {
  OpEntry op(opdef::nll_loss);
  const Tensor& log_probs = op.in(log_probs_in);
  const TargetTerms terms = nll_terms(opdef::nll_loss.name, log_probs, targets, opts.ignore_index, opts.weight);
  return reduce(terms.loss, opts.reduction, terms.weight);
}

// PyTorch's (1.13) label smoothing: (1 - s) nll + s / C * smooth, where smooth is -sum over the classes of
// weight[c] * log_probs[c] (0 for an ignored target), reduced as nll is (the mean divides by the same weights).
Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets, const CrossEntropyOptions& opts) {
  OpEntry op(opdef::cross_entropy);
  const Tensor& logits = op.in(logits_in);
  EMBER_CHECK(logits.defined(), Error, opdef::cross_entropy.name, ": logits are undefined");
  EMBER_CHECK_DTYPE(is_floating(logits.dtype()), opdef::cross_entropy.name, ": logits must be floating point, got ",
                    desc(logits));
  EMBER_CHECK_SHAPE(logits.dim() >= 1, opdef::cross_entropy.name, ": expected logits [N, C, ...] or [C], got a 0-dim ",
                    desc(logits));
  const double s = opts.label_smoothing;
  EMBER_CHECK_VALUE(s >= 0 && s <= 1, opdef::cross_entropy.name, ": label_smoothing must be in [0, 1], got ", s);
  const int64_t cdim = logits.dim() == 1 ? 0 : 1;
  const Tensor lp = log_softmax(logits, cdim);
  const TargetTerms terms = nll_terms(opdef::cross_entropy.name, lp, targets, opts.ignore_index, opts.weight);
  const Tensor nll = reduce(terms.loss, opts.reduction, terms.weight);
  if (s == 0) return nll;
  Tensor per_class = lp;
  if (opts.weight.defined()) {
    Shape ws(static_cast<size_t>(lp.dim()), 1);
    ws[static_cast<size_t>(cdim)] = lp.size(cdim);
    per_class = lp * opts.weight.to(lp.dtype()).reshape(ws);
  }
  const Tensor ignored = eq(targets.to(kInt64), opts.ignore_index);
  const Tensor smooth = masked_fill(-sum(per_class, {cdim}), ignored, 0.0);
  return nll * (1 - s) + reduce(smooth, opts.reduction, terms.weight) * (s / static_cast<double>(lp.size(cdim)));
}

Tensor mse_loss(const Tensor& pred_in, const Tensor& target_in, const LossOptions& opts) {
  OpEntry op(opdef::mse_loss);
  const Tensor &pred = op.in(pred_in), &target = op.in(target_in);
  check_pair(opdef::mse_loss.name, pred, target);
  return reduce(square(pred - target), opts.reduction);
}

Tensor l1_loss(const Tensor& pred_in, const Tensor& target_in, const LossOptions& opts) {
  OpEntry op(opdef::l1_loss);
  const Tensor &pred = op.in(pred_in), &target = op.in(target_in);
  check_pair(opdef::l1_loss.name, pred, target);
  return reduce(abs(pred - target), opts.reduction);  // the gradient at pred == target is 0, as PyTorch's
}

Tensor huber_loss(const Tensor& pred_in, const Tensor& target_in, const HuberLossOptions& opts) {
  OpEntry op(opdef::huber_loss);
  const Tensor &pred = op.in(pred_in), &target = op.in(target_in);
  check_pair(opdef::huber_loss.name, pred, target);
  const double delta = opts.delta;
  EMBER_CHECK_VALUE(delta > 0, opdef::huber_loss.name, ": delta must be positive, got ", delta);
  const Tensor d = pred - target, ad = abs(d);
  return reduce(where(lt(ad, delta), square(d) * 0.5, (ad - 0.5 * delta) * delta), opts.reduction);
}

Tensor smooth_l1_loss(const Tensor& pred_in, const Tensor& target_in, const SmoothL1LossOptions& opts) {
  OpEntry op(opdef::smooth_l1_loss);
  const Tensor &pred = op.in(pred_in), &target = op.in(target_in);
  check_pair(opdef::smooth_l1_loss.name, pred, target);
  const double beta = opts.beta;
  EMBER_CHECK_VALUE(beta >= 0, opdef::smooth_l1_loss.name, ": beta must be non-negative, got ", beta);
  if (beta == 0) return l1_loss(pred, target, {.reduction = opts.reduction});  // no division by 0, as PyTorch
  const Tensor d = pred - target, ad = abs(d);
  return reduce(where(lt(ad, beta), square(d) * (0.5 / beta), ad - 0.5 * beta), opts.reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& x_in, const Tensor& t_in) {
  OpEntry op(opdef::binary_cross_entropy_with_logits);
  const Tensor &x = op.in(x_in), &t = op.in(t_in);
  EMBER_CHECK(x.defined() && t.defined(), Error, opdef::binary_cross_entropy_with_logits.name, ": undefined argument");
  EMBER_CHECK_SHAPE(x.shape() == t.shape(), opdef::binary_cross_entropy_with_logits.name, ": logits ", x.shape(),
                    " and targets ", t.shape(), " must have the same shape");
  EMBER_CHECK_DTYPE(is_floating(x.dtype()), opdef::binary_cross_entropy_with_logits.name,
                    ": logits must be floating point, got ", desc(x));
  EMBER_CHECK_DEVICE(t.device() == x.device(), opdef::binary_cross_entropy_with_logits.name,
                     ": expected all tensors on the same device, got ", x.device(), " and ", t.device());
  Tensor tv = raw::cast(t.detach(), x.dtype());
  // max(x, 0) - x t + log(1 + exp(-|x|)): never exponentiates a large positive number
  Tensor per = raw::binary(
      BinaryOp::Add, raw::binary(BinaryOp::Sub, raw::unary(UnaryOp::Relu, x), raw::binary(BinaryOp::Mul, x, tv)),
      raw::unary(
          UnaryOp::Log,
          raw::binary(BinaryOp::Add, raw::unary(UnaryOp::Exp, raw::unary(UnaryOp::Neg, raw::unary(UnaryOp::Abs, x))),
                      Scalar(1.0))));
  const double n = static_cast<double>(x.numel());  // empty: 0 / 0 = nan, as PyTorch
  Tensor loss = raw::binary(BinaryOp::Div, raw::sum(per), Scalar(n));
  const bool tgrad = op.needs_grad({&t});
  if (tgrad || op.needs_grad({&x})) {
    std::vector<Tensor> inputs = {x};
    if (tgrad) inputs.push_back(t);
    // d/dx = (sigmoid(x) - t) / n, d/dt = -x / n
    op.record(inputs, {loss})
        .backward([n, tgrad, tdtype = t.dtype(), sx = autograd::save(x), st = autograd::save(tv),
                   starg = autograd::save(tgrad ? t : Tensor())](const Grads& g) -> Grads {
          const Tensor xv = sx.get();
          if (autograd::create_graph_enabled()) {  // differentiable again: through the composite
            std::vector<Tensor> in = {xv};
            if (tgrad) in.push_back(starg.get());
            const Tensor tc = st.get();
            return autograd::grads_by_recompute(
                in,
                [&](const std::vector<Tensor>& v) {
                  const Tensor target = tgrad ? v[1].to(v[0].dtype()) : tc;
                  return sum(relu(v[0]) - v[0] * target + log1p(exp(-abs(v[0])))) / n;
                },
                g[0]);
          }
          Tensor scale = raw::binary(BinaryOp::Div, g[0], Scalar(n));
          Tensor d = raw::binary(BinaryOp::Sub, raw::unary(UnaryOp::Sigmoid, xv), st.get());
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
  // Each gradient's sum of squares stays on its device; they are added there and read once per device (one host
  // wait for a model on one GPU, not one per parameter).
  std::vector<std::pair<Device, std::vector<Tensor>>> per_device;
  for (const Tensor& p : params) {
    Tensor gr = p.grad();
    if (!gr.defined()) continue;
    auto at = std::find_if(per_device.begin(), per_device.end(), [&](const auto& e) { return e.first == gr.device(); });
    if (at == per_device.end()) at = per_device.insert(per_device.end(), {gr.device(), {}});
    at->second.push_back(raw::sum(raw::unary(UnaryOp::Square, raw::cast(gr, kFloat64))));
  }
  double sq = 0;
  for (const auto& [device, sums] : per_device) sq += raw::sum(raw::stack(sums, 0)).to_vector<double>()[0];
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
