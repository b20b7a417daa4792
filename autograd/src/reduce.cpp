// defines: the public reductions (sum, mean, max, min, var, argmax, argmin) and softmax / log_softmax of ops.h,
// each recording its backward when an input requires grad.
#include <algorithm>

#include "ember/autograd/ops.h"
#include "grad_utils.h"

namespace ember {

namespace {
// The dims a reduction used, normalised and sorted (empty = all).
std::vector<int64_t> norm_dims(const Shape& shape, const std::vector<int64_t>& dims) {
  std::vector<int64_t> d;
  const int64_t n = static_cast<int64_t>(shape.size());
  if (dims.empty()) {
    for (int64_t i = 0; i < n; ++i) d.push_back(i);
  } else {
    for (int64_t i : dims) d.push_back(normalize_dim(i, n, "reduce"));
  }
  std::sort(d.begin(), d.end());
  return d;
}
// A reduction's gradient brought back to the input's rank (reduced dims as size 1).
Tensor unsqueeze_reduced(const Tensor& g, const Shape& in_shape, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim || in_shape.empty()) return g;
  Shape s = in_shape;
  for (int64_t d : dims) s[static_cast<size_t>(d)] = 1;
  return g.reshape(s);
}
int64_t count_of(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t c = 1;
  for (int64_t d : dims) c *= shape[static_cast<size_t>(d)];
  return c;
}

Tensor sum_impl(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool is_mean) {
  Tensor y = is_mean ? raw::mean(x, dims, keepdim) : raw::sum(x, dims, keepdim);
  if (!needs_grad({&x})) return y;
  InputInfo ix(x);
  std::vector<int64_t> d = norm_dims(x.shape(), dims);
  const double scale = is_mean ? 1.0 / static_cast<double>(std::max<int64_t>(count_of(x.shape(), d), 1)) : 1.0;
  record(is_mean ? "mean" : "sum", {x}, {y}, [ix, d, keepdim, scale](const Grads& g) -> Grads {
    Tensor gk = unsqueeze_reduced(g[0], ix.shape, d, keepdim);
    if (scale != 1.0) gk = gk * scale;
    if (autograd::create_graph_enabled()) return {gk.expand(ix.shape).to(ix.dtype)};
    return {raw::cast(raw::expand(gk, ix.shape), ix.dtype)};
  });
  return y;
}

// max/min over dims: the gradient is shared by the elements equal to the result (evenly among ties).
Tensor extremum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool is_max) {
  Tensor y = is_max ? raw::max(x, dims, keepdim) : raw::min(x, dims, keepdim);
  if (!needs_grad({&x})) return y;
  InputInfo ix(x);
  std::vector<int64_t> d = norm_dims(x.shape(), dims);
  const char* name = is_max ? "max" : "min";
  record(name, {x}, {y}, [ix, d, keepdim, name, sx = save(x), sy = save(y)](const Grads& g) -> Grads {
    const Tensor& xv = sx.get(name);
    Tensor yk = unsqueeze_reduced(sy.get(name), ix.shape, d, keepdim);
    Tensor mask = eq(xv, yk).to(g[0].dtype());
    Tensor ties = raw::sum(mask, d, true);
    return {mask * (unsqueeze_reduced(g[0], ix.shape, d, keepdim) / ties)};
  });
  return y;
}
}  // namespace

Tensor sum(const Tensor& x) { return sum_impl(x, {}, false, false); }
Tensor sum(const Tensor& x, const std::vector<int64_t>& d, bool k) { return sum_impl(x, d, k, false); }
Tensor mean(const Tensor& x) { return sum_impl(x, {}, false, true); }
Tensor mean(const Tensor& x, const std::vector<int64_t>& d, bool k) { return sum_impl(x, d, k, true); }
Tensor max(const Tensor& x) { return extremum(x, {}, false, true); }
Tensor max(const Tensor& x, const std::vector<int64_t>& d, bool k) { return extremum(x, d, k, true); }
Tensor min(const Tensor& x) { return extremum(x, {}, false, false); }
Tensor min(const Tensor& x, const std::vector<int64_t>& d, bool k) { return extremum(x, d, k, false); }
Tensor var(const Tensor& x) { return var(x, {}, false, 1); }
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, int64_t correction) {
  Tensor y = raw::var(x, dims, keepdim, correction);
  if (!needs_grad({&x})) return y;
  InputInfo ix(x);
  std::vector<int64_t> d = norm_dims(x.shape(), dims);
  const double denom = static_cast<double>(std::max<int64_t>(count_of(x.shape(), d) - correction, 0));
  // d var / dx = 2 (x - mean) / (N - correction)
  record("var", {x}, {y}, [ix, d, keepdim, denom, sx = save(x)](const Grads& g) -> Grads {
    const Tensor& xv = sx.get("var");
    Tensor centered = raw::binary(BinaryOp::Sub, xv, raw::mean(xv, d, true));
    return {unsqueeze_reduced(g[0], ix.shape, d, keepdim) * centered * (2.0 / denom)};
  });
  return y;
}
Tensor argmax(const Tensor& x, int64_t d, bool k) { return raw::argmax(x, d, k); }
Tensor argmin(const Tensor& x, int64_t d, bool k) { return raw::argmin(x, d, k); }

// --- softmax family
Tensor softmax(const Tensor& x, int64_t dim) {
  Tensor y = raw::softmax(x, dim);
  if (!needs_grad({&x})) return y;
  const int64_t d = x.dim() == 0 ? 0 : normalize_dim(dim, x.dim(), "softmax");
  record("softmax", {x}, {y}, [d, sy = save(y)](const Grads& g) -> Grads {
    const Tensor& yv = sy.get("softmax");  // dx = y * (g - sum(g * y))
    if (yv.dim() == 0) return {zeros_like(yv)};
    return {yv * (g[0] - raw::sum(g[0] * yv, {d}, true))};
  });
  return y;
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  Tensor y = raw::log_softmax(x, dim);
  if (!needs_grad({&x})) return y;
  const int64_t d = x.dim() == 0 ? 0 : normalize_dim(dim, x.dim(), "log_softmax");
  record("log_softmax", {x}, {y}, [d, sy = save(y)](const Grads& g) -> Grads {
    const Tensor& yv = sy.get("log_softmax");  // dx = g - softmax * sum(g)
    if (yv.dim() == 0) return {zeros_like(yv)};
    return {g[0] - raw::unary(UnaryOp::Exp, yv) * raw::sum(g[0], {d}, true)};
  });
  return y;
}

}  // namespace ember
