// defines: the public batch_norm of ops.h: the fused raw op (core/src/norm.cpp) with one backward node whose
// gradients come from two passes over the data (PyTorch's formulas).
#include "ember/autograd/ops.h"
#include "grad_utils.h"

namespace ember {

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  raw::BatchNormResult r = raw::batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps);
  if (!needs_grad({&x, &weight, &bias})) return r.y;
  const bool x_wants = x.requires_grad(), w_wants = weight.defined() && weight.requires_grad(),
             b_wants = bias.defined() && bias.requires_grad();
  const DType wdt = weight.defined() ? weight.dtype() : x.dtype(), bdt = bias.defined() ? bias.dtype() : x.dtype();
  record("batch_norm", {x, weight, bias}, {r.y},
         [=, sx = save(x), sw = save(weight), mean = r.mean, invstd = r.invstd](const Grads& g) -> Grads {
           raw::BatchNormGrads gr = raw::batch_norm_backward(g[0], sx.get("batch_norm"), mean, invstd,
                                                             sw.get("batch_norm"), training, x_wants, w_wants, b_wants);
           return {gr.x, w_wants ? raw::cast(gr.weight, wdt) : Tensor(), b_wants ? raw::cast(gr.bias, bdt) : Tensor()};
         });
  return r.y;
}

}  // namespace ember
