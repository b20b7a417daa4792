// defines: the public conv2d, max_pool2d and avg_pool2d of ops.h, recording their backward when an input
// requires grad.
#include "ember/autograd/ops.h"
#include "grad_utils.h"

namespace ember {

// --- convolution family
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, std::vector<int64_t> s, std::vector<int64_t> p) {
  Tensor y = raw::conv2d(x, w, b, s, p);
  if (!needs_grad({&x, &w, &b})) return y;
  const bool nx = x.requires_grad(), nw = w.requires_grad(), nb = b.defined() && b.requires_grad();
  record("conv2d", {x, w, b}, {y}, [s, p, nx, nw, nb, sx = save(x), sw = save(w)](const Grads& g) -> Grads {
    raw::Conv2dGrads r = raw::conv2d_backward(g[0], sx.get("conv2d"), sw.get("conv2d"), s, p, nx, nw, nb);
    return {r.x, r.w, r.b};
  });
  return y;
}
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p) {
  Tensor y = raw::max_pool2d(x, k, s, p);
  if (!needs_grad({&x})) return y;
  record("max_pool2d", {x}, {y}, [k, s, p, sx = save(x)](const Grads& g) -> Grads {
    return {raw::max_pool2d_backward(g[0], sx.get("max_pool2d"), k, s, p)};
  });
  return y;
}
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p) {
  Tensor y = raw::avg_pool2d(x, k, s, p);
  if (!needs_grad({&x})) return y;
  record("avg_pool2d", {x}, {y}, [k, s, p, sx = save(x)](const Grads& g) -> Grads {
    return {raw::avg_pool2d_backward(g[0], sx.get("avg_pool2d"), k, s, p)};
  });
  return y;
}

}  // namespace ember
