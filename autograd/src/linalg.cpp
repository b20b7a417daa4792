// defines: the public matmul and linear of ops.h, recording their backward when an input requires grad.
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
        Tensor g2 = g[0].reshape({-1, out});  // [N, out]
        Tensor gx, gw, gb;
        if (ix.wants) gx = matmul(g2, sw.get()).reshape(ix.shape);                  // g @ W
        if (iw.wants) gw = matmul(g2.transpose(0, 1), sx.get().reshape({-1, in}));  // g^T @ x
        if (b_wants) gb = sum(g2, {0});
        return {gx, gw, gb};
      });
  return y;
}

}  // namespace ember
