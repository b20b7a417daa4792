// defines: scaled_dot_product_attention of ops.h: the tiled primitive (raw::attention) with its backward, which
// keeps q, k, v, the output and the per-row log-sum-exp (never the [Tq, Tk] weights); and, for dropout_p > 0,
// the plain composite softmax(q k^T * scale + mask) v built of public ops.
#include <cmath>
#include <limits>

#include "ember/autograd/engine.h"
#include "ember/autograd/ops.h"
#include "grad_utils.h"

namespace ember {

namespace {

// The composite, for dropout and for a create_graph pass (dropout_p 0: no mask drawn): the weights are
// materialised, so memory is quadratic in T.
Tensor attention_composite(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& o) {
  const int64_t tq = q.size(-2), tk = k.size(-2);
  const double scale = o.scale != 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor s = matmul(q, k.transpose(-2, -1)) * scale;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (o.causal) {
    const Tensor i = arange(tq, {.dtype = kInt64, .device = q.device()}).unsqueeze(1);
    const Tensor j = arange(tk, {.dtype = kInt64, .device = q.device()}).unsqueeze(0);
    s = where(le(j, i), s, full({}, neg_inf, {.dtype = s.dtype(), .device = q.device()}));
  }
  if (o.mask.defined()) {
    s = o.mask.dtype() == kBool ? where(o.mask, s, full({}, neg_inf, {.dtype = s.dtype(), .device = q.device()}))
                                : s + o.mask;
  }
  Tensor w = softmax(s, -1);
  // a row with every key masked out: 0, as the tiled kernel (softmax gives NaN there)
  w = where(eq(w, w), w, zeros({}, {.dtype = w.dtype(), .device = w.device()}));
  if (o.dropout_p == 0) return matmul(w, v);
  Tensor keep = ge(rand(w.shape(), {.dtype = w.dtype(), .device = w.device()}), o.dropout_p).to(w.dtype());
  return matmul(w * (keep * (1.0 / (1.0 - o.dropout_p))), v);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    const SdpaOptions& opts_in) {
  OpEntry op(opdef::scaled_dot_product_attention);
  // Autocast: q, k, v (and an additive mask) in the low dtype; the kernel keeps its softmax in float32.
  const Tensor &q = op.in(q_in), &k = op.in(k_in), &v = op.in(v_in);
  SdpaOptions opts = opts_in;
  if (opts.mask.defined() && opts.mask.dtype() != kBool && opts.mask.dtype() != q.dtype() &&
      is_floating(opts.mask.dtype()) && q.dtype() != q_in.dtype())
    opts.mask = opts.mask.to(q.dtype());
  EMBER_CHECK_VALUE(opts.dropout_p >= 0 && opts.dropout_p < 1, op.name(), ": dropout_p must be in [0, 1), got ",
                    opts.dropout_p);
  EMBER_CHECK_VALUE(!(opts.mask.defined() && opts.mask.dtype() != kBool && opts.mask.requires_grad()), op.name(),
                    ": gradients for an additive mask are not supported (pass mask.detach())");
  if (opts.dropout_p > 0) {
    raw::check_attention(q, k, v, opts.mask, opts.scale);  // the composite's ops would name themselves
    return attention_composite(q, k, v, opts);
  }
  raw::AttentionResult r = raw::attention(q, k, v, opts.mask, opts.scale, opts.causal);
  if (!op.needs_grad({&q, &k, &v})) return r.out;
  const InputInfo iq(q), ik(k), iv(v);
  op.record({q, k, v}, {r.out})
      .backward([sq = save(q), sk = save(k), sv = save(v), so = save(r.out), lse = r.lse, opts, iq, ik,
                 iv](const Grads& g) -> Grads {
        if (autograd::create_graph_enabled())  // differentiable again: through the composite
          return autograd::grads_by_recompute(
              {sq.get(), sk.get(), sv.get()},
              [&opts](const std::vector<Tensor>& in) { return attention_composite(in[0], in[1], in[2], opts); }, g[0]);
        raw::AttentionGrads d = raw::attention_backward(g[0], sq.get(), sk.get(), sv.get(), so.get(), lse, opts.mask,
                                                        opts.scale, opts.causal);
        return {iq.wants ? d.q : Tensor{}, ik.wants ? d.k : Tensor{}, iv.wants ? d.v : Tensor{}};
      });
  return r.out;
}

}  // namespace ember
