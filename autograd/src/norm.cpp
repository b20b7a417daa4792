// defines: the public batch_norm, layer_norm and rms_norm of ops.h: fused raw ops (core/src/norm.cpp), each with one
// backward node whose gradients come from a few passes over the data (PyTorch's formulas).
#include <limits>

#include "ember/autograd/engine.h"
#include "ember/autograd/ops.h"
#include "grad_utils.h"

namespace ember {

namespace {
// x viewed as [N, C, S...] with a per-channel [C] tensor broadcast against it.
Tensor per_channel(const Tensor& v, const Tensor& x) {
  Shape s(static_cast<size_t>(x.dim()), 1);
  s[1] = v.size(0);
  return v.reshape(s);
}

// batch_norm built of differentiable ops, for a create_graph pass (autograd::grads_by_recompute): batch statistics
// (biased variance) in training, the statistics the forward used (constants) in evaluation.
Tensor batch_norm_composite(const Tensor& x, const Tensor& w, const Tensor& b, bool training, const Tensor& mean_used,
                            const Tensor& invstd_used, double eps) {
  Tensor y;
  if (training) {
    std::vector<int64_t> dims = {0};
    for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
    const Tensor centered = x - mean(x, dims, true);
    y = centered / sqrt(mean(square(centered), dims, true) + eps);
  } else {
    y = (x - per_channel(mean_used, x)) * per_channel(invstd_used, x);
  }
  if (w.defined()) y = y * per_channel(w, x);
  if (b.defined()) y = y + per_channel(b, x);
  return y;
}

// layer_norm over the last k dims, built of differentiable ops (for a create_graph pass).
Tensor layer_norm_composite(const Tensor& x, int64_t k, const Tensor& w, const Tensor& b, double eps) {
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  const Tensor centered = x - mean(x, dims, true);
  Tensor y = centered / sqrt(mean(square(centered), dims, true) + eps);
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return y;
}
}  // namespace

namespace {
// batch_norm, and batch_norm_relu when relu: one fused raw op forward; backward, the batch-norm gradient passes
// with relu's mask (the saved output > 0) applied as they read the gradient.
Tensor batch_norm_op(const OpDef& def, const Tensor& x_in, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps, bool relu) {
  OpEntry op(def);
  const Tensor& x = op.in(x_in);  // autocast keeps x's dtype: 16-bit in and out, float32 statistics
  raw::BatchNormResult r = raw::batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps, relu);
  if (!op.needs_grad({&x, &weight, &bias})) return r.y;
  const bool x_wants = x.requires_grad(), w_wants = weight.defined() && weight.requires_grad(),
             b_wants = bias.defined() && bias.requires_grad();
  const DType wdt = weight.defined() ? weight.dtype() : x.dtype(), bdt = bias.defined() ? bias.dtype() : x.dtype();
  op.record({x, weight, bias}, {r.y})
      .backward([=, sx = save(x), sw = save(weight), sb = save(bias), sy = relu ? save(r.y) : autograd::SavedTensor(),
                 mean = r.mean, invstd = r.invstd](const Grads& g) -> Grads {
        const Tensor xv = sx.get(), wv = sw.get();
        if (autograd::create_graph_enabled())  // differentiable again: through the composite
          return autograd::grads_by_recompute(
              {xv, wv, sb.get()},
              [&](const std::vector<Tensor>& in) {
                const Tensor y = batch_norm_composite(in[0], in[1], in[2], training, mean, invstd, eps);
                return relu ? ember::relu(y) : y;
              },
              g[0]);
        raw::BatchNormGrads gr = raw::batch_norm_backward(g[0], xv, mean, invstd, wv, training, x_wants, w_wants,
                                                          b_wants, relu ? sy.get() : Tensor());
        return {gr.x, w_wants ? raw::cast(gr.weight, wdt) : Tensor(), b_wants ? raw::cast(gr.bias, bdt) : Tensor()};
      });
  return r.y;
}
}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  return batch_norm_op(opdef::batch_norm, x, running_mean, running_var, weight, bias, training, momentum, eps, false);
}
Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                       const Tensor& bias, bool training, double momentum, double eps) {
  return batch_norm_op(opdef::batch_norm_relu, x, running_mean, running_var, weight, bias, training, momentum, eps,
                       true);
}

namespace {
// A row norm (layer_norm, rms_norm) of the last k dims, built of differentiable ops (for a create_graph pass).
Tensor row_norm_composite(RowNormKind kind, const Tensor& x, int64_t k, const Tensor& w, const Tensor& b, double eps) {
  if (kind == RowNormKind::LayerNorm) return layer_norm_composite(x, k, w, b, eps);
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  Tensor y = x / sqrt(mean(square(x), dims, true) + eps);
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return y;
}

// One fused kernel forward and one backward (raw::row_norm); an autocast "float32" op. 16-bit inputs compute
// in float32 and round once. A create_graph pass differentiates the composite instead (twice differentiable).
Tensor row_norm(const OpDef& def, RowNormKind kind, const Tensor& x_arg, const std::vector<int64_t>& normalized_shape,
                const Tensor& weight, const Tensor& bias, double eps) {
  OpEntry op(def);
  const Tensor& x_in = op.in(x_arg);
  autograd::check_defined(op.name(), x_in, "x");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  EMBER_CHECK_SHAPE(
      k >= 1 && x_in.dim() >= k && Shape(x_in.shape().end() - k, x_in.shape().end()) == Shape(normalized_shape),
      op.name(), ": input ", x_in.dtype(), x_in.shape(), " does not end in normalized_shape ", Shape(normalized_shape));
  for (const Tensor* t : {&weight, &bias})
    EMBER_CHECK_SHAPE(!t->defined() || t->shape() == Shape(normalized_shape), op.name(), ": ",
                      t == &weight ? "weight " : "bias ", t->shape(), " must have normalized_shape ",
                      Shape(normalized_shape));
  EMBER_CHECK_VALUE(eps >= 0, op.name(), ": eps must be >= 0, got ", eps);
  const Tensor x = autograd::composite_input(op.name(), x_in);
  const Tensor &w = op.in(weight), &b = op.in(bias);
  raw::LayerNormResult r = raw::row_norm(kind, x, k, w, b, eps);
  Tensor y = r.y;
  if (op.needs_grad({&x, &w, &b})) {
    const bool x_wants = x.requires_grad(), w_wants = w.defined() && w.requires_grad(),
               b_wants = b.defined() && b.requires_grad();
    const DType wdt = w.defined() ? w.dtype() : x.dtype(), bdt = b.defined() ? b.dtype() : x.dtype();
    op.record({x, w, b}, {y})
        .backward([=, sx = save(x), sw = save(w), sb = save(b), mean = r.mean, rstd = r.rstd](const Grads& g) -> Grads {
          const Tensor xv = sx.get(), wv = sw.get();
          if (autograd::create_graph_enabled())  // differentiable again: through the composite
            return autograd::grads_by_recompute(
                {xv, wv, sb.get()},
                [&](const std::vector<Tensor>& in) { return row_norm_composite(kind, in[0], k, in[1], in[2], eps); },
                g[0]);
          raw::LayerNormGrads gr = raw::row_norm_backward(kind, g[0], xv, k, mean, rstd, wv, x_wants, w_wants, b_wants);
          return {gr.x, w_wants ? raw::cast(gr.weight, wdt) : Tensor(), b_wants ? raw::cast(gr.bias, bdt) : Tensor()};
        });
  }
  return autograd::composite_result(y, x_in);
}
}  // namespace

Tensor layer_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  return row_norm(opdef::layer_norm, RowNormKind::LayerNorm, x, normalized_shape, weight, bias, eps);
}

// eps by default the machine epsilon of the dtype computed in (PyTorch's: float32's for 16-bit inputs)
Tensor rms_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  const double e = eps ? *eps
                       : (x.defined() && x.dtype() == kFloat64 ? std::numeric_limits<double>::epsilon()
                                                               : std::numeric_limits<float>::epsilon());
  return row_norm(opdef::rms_norm, RowNormKind::RmsNorm, x, normalized_shape, weight, {}, e);
}

}  // namespace ember
