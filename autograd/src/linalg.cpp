// defines: the public matmul, linear and linear_gelu_linear of ops.h, recording their backward when an input
// requires grad.
#include "ember/autograd/engine.h"
#include "ember/autograd/ops.h"
#include "grad_utils.h"

namespace ember {

// --- linear algebra
Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  OpEntry op(opdef::matmul);
  const Tensor &a = op.in(a_in), &b = op.in(b_in);  // autocast: the product in float16 / bfloat16
  Tensor y = raw::matmul(a, b);
  if (!op.needs_grad({&a, &b})) return y;
  InputInfo ia(a), ib(b);
  op.record({a, b}, {y})
      .backward(
          [ia, ib, sa = save(ib.wants ? a : Tensor()), sb = save(ia.wants ? b : Tensor())](const Grads& g) -> Grads {
            // 1-D operands were a row (left) and a column (right); the gradient of A @ B is G @ B^T and A^T @ G,
            // summed over broadcast batch dims by reduce_to.
            // Recorded ops (they cost nothing extra unless a create_graph pass needs the graph).
            Tensor G = g[0];
            if (ia.shape.size() == 1) G = G.unsqueeze(G.dim() - (ib.shape.size() == 1 ? 0 : 1));
            if (ib.shape.size() == 1) G = G.unsqueeze(G.dim());
            Tensor ga, gb;
            if (ia.wants) {
              Tensor B = sb.get();
              if (B.dim() == 1) B = B.unsqueeze(1);
              ga = matmul(G, B.transpose(-1, -2));
              if (ia.shape.size() == 1) ga = ga.squeeze(-2);
              ga = reduce_to(ga, ia);
            }
            if (ib.wants) {
              Tensor A = sa.get();
              if (A.dim() == 1) A = A.unsqueeze(0);
              gb = matmul(A.transpose(-1, -2), G);
              if (ib.shape.size() == 1) gb = gb.squeeze(-1);
              gb = reduce_to(gb, ib);
            }
            return {ga, gb};
          });
  return y;
}

Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in) {
  OpEntry op(opdef::linear);
  const Tensor &x = op.in(x_in), &w = op.in(w_in), &b = op.in(b_in);
  Tensor y = raw::linear(x, w, b);
  if (!op.needs_grad({&x, &w, &b})) return y;
  InputInfo ix(x), iw(w);
  const bool b_wants = b.defined() && b.requires_grad();
  op.record({x, w, b}, {y})
      .backward([ix, iw, b_wants, sx = save(iw.wants ? x : Tensor()),
                 sw = save(ix.wants ? w : Tensor())](const Grads& g) -> Grads {
        const int64_t out = iw.shape[0], in = iw.shape[1];
        const int64_t rows = Shape(ix.shape.begin(), ix.shape.end() - 1).numel();  // (-1 cannot infer a 0 width)
        Tensor g2 = g[0].reshape({rows, out});  // [N, out]
        Tensor gx, gw, gb;
        if (ix.wants) gx = matmul(g2, sw.get()).reshape(ix.shape);  // g @ W
        if (iw.wants && !autograd::create_graph_enabled()) {
          // g^T @ x with the bias gradient, sum(g), from the same GEMM (cuBLASLt's BGRADB epilogue on CUDA)
          raw::LinearWeightGrads r = raw::linear_weight_grads(g2, sx.get().reshape({rows, in}), b_wants);
          return {gx, r.w, r.b};
        }
        if (iw.wants) gw = matmul(g2.transpose(0, 1), sx.get().reshape({rows, in}));  // recorded: differentiable again
        if (b_wants) gb = sum(g2, {0});
        return {gx, gw, gb};
      });
  return y;
}

namespace {
// linear_gelu_linear built of recorded ops, for a create_graph pass (autograd::grads_by_recompute).
Tensor linear_gelu_linear_composite(const std::vector<Tensor>& in, const GeluOptions& opts) {
  return linear(gelu(linear(in[0], in[1], in[2]), opts), in[3], in[4]);
}
}  // namespace

// Forward: the first GEMM with the bias and GELU in its epilogue (GELU's input kept), the second with its bias.
// Backward, from g [rows, out]: the second layer's weight and bias gradients from one GEMM; the gradient at GELU's
// input and the first bias's from one GEMM (g w2, times gelu'(pre), summed by column); then the first layer's
// input and weight gradients. On CUDA each of those is one cuBLASLt call where ember/internal/gemm_epilogue.h says
// so; elsewhere the backend's separate steps.
Tensor linear_gelu_linear(const Tensor& x_in, const Tensor& w1_in, const Tensor& b1_in, const Tensor& w2_in,
                          const Tensor& b2_in, const GeluOptions& opts) {
  OpEntry op(opdef::linear_gelu_linear);
  const Tensor &x = op.in(x_in), &w1 = op.in(w1_in), &b1 = op.in(b1_in), &w2 = op.in(w2_in), &b2 = op.in(b2_in);
  raw::check_linear(op.name(), x, w1, b1);
  EMBER_CHECK_DTYPE(is_floating(x.dtype()), op.name(), ": needs floating tensors, got ", x.dtype());
  EMBER_CHECK_SHAPE(w2.dim() == 2 && w2.size(1) == w1.size(0), op.name(), ": the second weight ", w2.shape(),
                    " does not take the first layer's ", w1.size(0), " features (expected [out, ", w1.size(0), "])");
  const bool tanh = opts.approximate == GeluApproximate::Tanh;
  const raw::LinearGeluResult h = raw::linear_gelu(x, w1, b1, tanh);
  raw::check_linear(op.name(), h.y, w2, b2);
  Tensor y = raw::linear(h.y, w2, b2);
  if (!op.needs_grad({&x, &w1, &b1, &w2, &b2})) return y;
  const bool wants[5] = {x.requires_grad(),
                         w1.requires_grad(),
                         b1.defined() && b1.requires_grad(),
                         w2.requires_grad(),
                         b2.defined() && b2.requires_grad()};
  const Shape x_shape = x.shape();
  const int64_t rows = Shape(x_shape.begin(), x_shape.end() - 1).numel();  // explicit: -1 cannot infer a 0 width
  op.record({x, w1, b1, w2, b2}, {y})
      .backward([=, sx = save(x), sw1 = save(w1), sb1 = save(b1), sw2 = save(w2), sb2 = save(b2), spre = save(h.pre),
                 sh = save(h.y)](const Grads& g) -> Grads {
        if (autograd::create_graph_enabled())
          return autograd::grads_by_recompute(
              {sx.get(), sw1.get(), sb1.get(), sw2.get(), sb2.get()},
              [&](const std::vector<Tensor>& in) { return linear_gelu_linear_composite(in, opts); }, g[0]);
        const Tensor w1v = sw1.get(), w2v = sw2.get();
        const Tensor g2 = raw::reshape(raw::contiguous(g[0]), {rows, w2v.size(0)});
        Grads r(5);
        if (wants[3]) {
          raw::LinearWeightGrads l2 = raw::linear_weight_grads(g2, raw::reshape(sh.get(), {rows, w2v.size(1)}), wants[4]);
          r[3] = l2.w;
          r[4] = l2.b;
        } else if (wants[4]) {
          r[4] = raw::sum(g2, {0}, false);
        }
        if (!(wants[0] || wants[1] || wants[2])) return r;
        const raw::GeluInputGrads d =
            raw::linear_gelu_input_grads(g2, w2v, raw::reshape(spre.get(), {rows, w2v.size(1)}), tanh, wants[2]);
        r[2] = d.b;
        if (wants[0]) r[0] = raw::reshape(raw::matmul(d.pre, w1v), x_shape);
        if (wants[1]) r[1] = raw::matmul(raw::transpose(d.pre, 0, 1), raw::reshape(sx.get(), {rows, w1v.size(1)}));
        return r;
      });
  return y;
}

}  // namespace ember
