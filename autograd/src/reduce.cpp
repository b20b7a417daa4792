// defines: the public reductions (sum, mean, max, min, var, argmax, argmin, logsumexp, norm, cumsum) and softmax /
// log_softmax of ops.h, each recording its backward when an input requires grad (logsumexp and norm are
// composites: autograd differentiates them).
#include <algorithm>
#include <cmath>
#include <limits>

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
// The dims of a composite reduction, checked in its own name: normalised, sorted, each once (empty = all).
std::vector<int64_t> checked_dims(const char* op, const Tensor& x, const std::vector<int64_t>& dims) {
  if (dims.empty()) return norm_dims(x.shape(), dims);
  std::vector<int64_t> d;
  for (int64_t i : dims) {
    const int64_t n = normalize_dim(i, x.dim(), op);
    if (x.dim() == 0) continue;  // a 0-dim tensor reduces over nothing
    EMBER_CHECK_INDEX(std::find(d.begin(), d.end(), n) == d.end(), op, ": dim ", n, " appears more than once in ",
                      Shape(dims));
    d.push_back(n);
  }
  std::sort(d.begin(), d.end());
  return d;
}

Tensor sum_impl(const Tensor& x_in, const std::vector<int64_t>& dims, bool keepdim, bool is_mean) {
  OpEntry op(is_mean ? opdef::mean : opdef::sum);
  const Tensor& x = op.in(x_in);
  Tensor y = is_mean ? raw::mean(x, dims, keepdim) : raw::sum(x, dims, keepdim);
  if (!op.needs_grad({&x})) return y;
  InputInfo ix(x);
  std::vector<int64_t> d = norm_dims(x.shape(), dims);
  const double scale = is_mean ? 1.0 / static_cast<double>(std::max<int64_t>(count_of(x.shape(), d), 1)) : 1.0;
  op.record({x}, {y}).backward([ix, d, keepdim, scale](const Grads& g) -> Grads {
    Tensor gk = unsqueeze_reduced(g[0], ix.shape, d, keepdim);
    if (scale != 1.0) gk = gk * scale;
    if (autograd::create_graph_enabled()) return {gk.expand(ix.shape).to(ix.dtype)};
    return {raw::cast(raw::expand(gk, ix.shape), ix.dtype)};
  });
  return y;
}

// max/min over dims: the gradient is shared by the elements equal to the result (evenly among ties).
Tensor extremum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool is_max) {
  OpEntry op(is_max ? opdef::max : opdef::min);
  Tensor y = is_max ? raw::max(x, dims, keepdim) : raw::min(x, dims, keepdim);
  if (!op.needs_grad({&x})) return y;
  InputInfo ix(x);
  std::vector<int64_t> d = norm_dims(x.shape(), dims);
  op.record({x}, {y}).backward([ix, d, keepdim, sx = save(x), sy = save(y)](const Grads& g) -> Grads {
    const Tensor xv = sx.get();
    Tensor yk = unsqueeze_reduced(sy.get(), ix.shape, d, keepdim);
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
  OpEntry op(opdef::var);
  Tensor y = raw::var(x, dims, keepdim, correction);
  if (!op.needs_grad({&x})) return y;
  InputInfo ix(x);
  std::vector<int64_t> d = norm_dims(x.shape(), dims);
  const double denom = static_cast<double>(std::max<int64_t>(count_of(x.shape(), d) - correction, 0));
  // d var / dx = 2 (x - mean) / (N - correction)
  op.record({x}, {y}).backward([ix, d, keepdim, denom, sx = save(x)](const Grads& g) -> Grads {
    const Tensor xv = sx.get();
    Tensor centered = xv - mean(xv, d, true);
    return {unsqueeze_reduced(g[0], ix.shape, d, keepdim) * centered * (2.0 / denom)};
  });
  return y;
}
Tensor argmax(const Tensor& x, int64_t d, bool k) { return raw::argmax(x, d, k); }
Tensor argmin(const Tensor& x, int64_t d, bool k) { return raw::argmin(x, d, k); }

Tensor logsumexp(const Tensor& x_arg, const std::vector<int64_t>& dims, bool keepdim) {
  OpEntry op(opdef::logsumexp);
  const Tensor& x_in = op.in(x_arg);
  const Tensor x = autograd::composite_input(op.name(), x_in);  // integers give float32
  const std::vector<int64_t> d = checked_dims(op.name(), x, dims);
  // The shift m: the max over dims, a constant to autograd (the result does not depend on it). It is 0 where the
  // max is not finite (an all -inf slice: no -inf - -inf; +inf and NaN reach the sum as they are) and for an
  // empty slice (whose sum is 0: log gives -inf, as PyTorch's).
  Tensor m;
  if (count_of(x.shape(), d) == 0) {
    Shape ks = x.shape();
    for (int64_t k : d) ks[static_cast<size_t>(k)] = 1;
    m = zeros(ks, {.dtype = x.dtype(), .device = x.device()});
  } else {
    m = raw::max(x, d, true);
    const Tensor finite =
        raw::binary(BinaryOp::Lt, raw::unary(UnaryOp::Abs, m), Scalar(std::numeric_limits<double>::infinity()));
    m = raw::where(finite, m, zeros({}, {.dtype = x.dtype(), .device = x.device()}));
  }
  const Tensor s = sum(exp(x - m), d, keepdim);
  return autograd::composite_result(log(s) + (keepdim ? m : m.reshape(s.shape())), x_in);
}

Tensor norm(const Tensor& x_arg, double p, const std::vector<int64_t>& dims, bool keepdim) {
  OpEntry op(opdef::norm);
  const Tensor& x_in = op.in(x_arg);
  autograd::check_defined(op.name(), x_in, "x");
  EMBER_CHECK_DTYPE(is_floating(x_in.dtype()), op.name(), ": expected a floating-point tensor, got ", x_in.dtype(),
                    x_in.shape(), " (convert with .to(kFloat32))");
  EMBER_CHECK_VALUE(p >= 1 || std::isinf(p), op.name(), ": p must be >= 1, inf or -inf, got ", p);
  const std::vector<int64_t> d = checked_dims(op.name(), x_in, dims);
  if (std::isinf(p)) {  // the largest (smallest) |x|, which an empty slice does not have (exact in any dtype)
    EMBER_CHECK_INDEX(count_of(x_in.shape(), d) > 0, op.name(), ": the ", p > 0 ? "inf" : "-inf", "-norm over dims ",
                      Shape(d), " of ", x_in.dtype(), x_in.shape(), " reduces an empty slice");
    return p > 0 ? max(abs(x_in), d, keepdim) : min(abs(x_in), d, keepdim);
  }
  const Tensor x = autograd::composite_input(op.name(), x_in);
  if (p == 1) return autograd::composite_result(sum(abs(x), d, keepdim), x_in);
  // (sum |x|^p)^(1/p). Where the sum is 0 the root's derivative is infinite and the gradient would be 0 * inf =
  // NaN: there the root is taken of 1 instead and the result replaced by 0, so the gradient is 0, as PyTorch's.
  const Tensor s = p == 2 ? sum(square(x), d, keepdim) : sum(pow(abs(x), p), d, keepdim);
  const Tensor is_zero = eq(s, 0.0);
  const TensorOptions like{.dtype = s.dtype(), .device = s.device()};
  const Tensor s_safe = where(is_zero, full({}, 1.0, like), s);
  return autograd::composite_result(where(is_zero, zeros({}, like), p == 2 ? sqrt(s_safe) : pow(s_safe, 1.0 / p)),
                                    x_in);
}

namespace {
// cumsum from the start (reverse: from the end). Its gradient is the running sum of the gradient taken the other
// way, itself a recorded op: differentiable again.
Tensor cumsum_dir(const Tensor& x_in, int64_t dim, bool reverse) {
  OpEntry op(opdef::cumsum);
  const Tensor& x = op.in(x_in);
  Tensor y = raw::cumsum(x, dim, reverse);
  if (!op.needs_grad({&x})) return y;
  op.record({x}, {y}).backward([dim, reverse](const Grads& g) -> Grads { return {cumsum_dir(g[0], dim, !reverse)}; });
  return y;
}
}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim) { return cumsum_dir(x, dim, false); }

// --- softmax family
Tensor softmax(const Tensor& x_in, int64_t dim) {
  OpEntry op(opdef::softmax);
  const Tensor& x = op.in(x_in);
  Tensor y = raw::softmax(x, dim);
  if (!op.needs_grad({&x})) return y;
  const int64_t d = x.dim() == 0 ? 0 : normalize_dim(dim, x.dim(), op.name());
  op.record({x}, {y}).backward([d, sy = save(y)](const Grads& g) -> Grads {
    const Tensor yv = sy.get();  // dx = y * (g - sum(g * y))
    if (yv.dim() == 0) return {zeros_like(yv)};
    return {yv * (g[0] - sum(g[0] * yv, {d}, true))};  // differentiable ops: a create_graph pass records them
  });
  return y;
}
Tensor log_softmax(const Tensor& x_in, int64_t dim) {
  OpEntry op(opdef::log_softmax);
  const Tensor& x = op.in(x_in);
  Tensor y = raw::log_softmax(x, dim);
  if (!op.needs_grad({&x})) return y;
  const int64_t d = x.dim() == 0 ? 0 : normalize_dim(dim, x.dim(), op.name());
  op.record({x}, {y}).backward([d, sy = save(y)](const Grads& g) -> Grads {
    const Tensor yv = sy.get();  // dx = g - softmax * sum(g)
    if (yv.dim() == 0) return {zeros_like(yv)};
    return {g[0] - exp(yv) * sum(g[0], {d}, true)};
  });
  return y;
}

}  // namespace ember
