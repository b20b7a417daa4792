// defines: the public matmul and linear of ops.h, recording their backward when an input requires grad.
#include "ember/autograd/ops.h"
#include "grad_utils.h"

namespace ember {

// --- linear algebra
Tensor matmul(const Tensor& a, const Tensor& b) {
  Tensor y = raw::matmul(a, b);
  if (!needs_grad({&a, &b})) return y;
  InputInfo ia(a), ib(b);
  record("matmul", {a, b}, {y},
         [ia, ib, sa = save(ib.wants ? a : Tensor()), sb = save(ia.wants ? b : Tensor())](const Grads& g) -> Grads {
           // 1-D operands were a row (left) and a column (right); the gradient of A @ B is G @ B^T and A^T @ G,
           // summed over broadcast batch dims by reduce_to.
           Tensor G = g[0];
           if (ia.shape.size() == 1) G = raw::unsqueeze(G, G.dim() - (ib.shape.size() == 1 ? 0 : 1));
           if (ib.shape.size() == 1) G = raw::unsqueeze(G, G.dim());
           Tensor ga, gb;
           if (ia.wants) {
             Tensor B = sb.get("matmul");
             if (B.dim() == 1) B = raw::unsqueeze(B, 1);
             ga = raw::matmul(G, raw::transpose(B, -1, -2));
             if (ia.shape.size() == 1) ga = raw::squeeze(ga, -2);
             ga = reduce_to(ga, ia);
           }
           if (ib.wants) {
             Tensor A = sa.get("matmul");
             if (A.dim() == 1) A = raw::unsqueeze(A, 0);
             gb = raw::matmul(raw::transpose(A, -1, -2), G);
             if (ib.shape.size() == 1) gb = raw::squeeze(gb, -1);
             gb = reduce_to(gb, ib);
           }
           return {ga, gb};
         });
  return y;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor y = raw::linear(x, w, b);
  if (!needs_grad({&x, &w, &b})) return y;
  InputInfo ix(x), iw(w);
  const bool b_wants = b.defined() && b.requires_grad();
  record("linear", {x, w, b}, {y},
         [ix, iw, b_wants, sx = save(iw.wants ? x : Tensor()),
          sw = save(ix.wants ? w : Tensor())](const Grads& g) -> Grads {
           const int64_t out = iw.shape[0], in = iw.shape[1];
           Tensor g2 = raw::reshape(g[0], {-1, out});  // [N, out]
           Tensor gx, gw, gb;
           if (ix.wants) gx = raw::reshape(raw::matmul(g2, sw.get("linear")), ix.shape);  // g @ W
           if (iw.wants)
             gw = raw::matmul(raw::transpose(g2, 0, 1), raw::reshape(sx.get("linear"), {-1, in}));  // g^T @ x
           if (b_wants) gb = raw::sum(g2, {0});
           return {gx, gw, gb};
         });
  return y;
}

}  // namespace ember
