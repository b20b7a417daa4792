// defines: the public reductions, matmul/linear, softmax/log_softmax, conv2d and pooling, cat/stack and
// index_select of ops.h, each recording its backward when an input requires grad.
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
  return raw::reshape(g, s);
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

// --- linear algebra
Tensor matmul(const Tensor& a, const Tensor& b) {
  Tensor y = raw::matmul(a, b);
  if (!needs_grad({&a, &b})) return y;
  InputInfo ia(a), ib(b);
  record("matmul", {a, b}, {y}, [ia, ib, sa = save(ib.wants ? a : Tensor()), sb = save(ia.wants ? b : Tensor())](const Grads& g) -> Grads {
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
  record("linear", {x, w, b}, {y}, [ix, iw, b_wants, sx = save(iw.wants ? x : Tensor()), sw = save(ix.wants ? w : Tensor())](const Grads& g) -> Grads {
    const int64_t out = iw.shape[0], in = iw.shape[1];
    Tensor g2 = raw::reshape(g[0], {-1, out});  // [N, out]
    Tensor gx, gw, gb;
    if (ix.wants) gx = raw::reshape(raw::matmul(g2, sw.get("linear")), ix.shape);          // g @ W
    if (iw.wants) gw = raw::matmul(raw::transpose(g2, 0, 1), raw::reshape(sx.get("linear"), {-1, in}));  // g^T @ x
    if (b_wants) gb = raw::sum(g2, {0});
    return {gx, gw, gb};
  });
  return y;
}

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

// --- shape
Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  Tensor y = raw::cat(xs, dim);
  if (!needs_grad(xs)) return y;
  const int64_t d = normalize_dim(dim, xs[0].dim(), "cat");
  std::vector<InputInfo> infos;
  for (const Tensor& t : xs) infos.emplace_back(t);
  record("cat", xs, {y}, [infos, d](const Grads& g) -> Grads {
    Grads out;
    int64_t at = 0;
    for (const InputInfo& in : infos) {
      const int64_t n = in.shape[static_cast<size_t>(d)];
      out.push_back(in.wants ? raw::cast(raw::slice(g[0], d, at, at + n), in.dtype) : Tensor());
      at += n;
    }
    return out;
  });
  return y;
}
Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  Tensor y = raw::stack(xs, dim);
  if (!needs_grad(xs)) return y;
  const int64_t d = normalize_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<InputInfo> infos;
  for (const Tensor& t : xs) infos.emplace_back(t);
  record("stack", xs, {y}, [infos, d](const Grads& g) -> Grads {
    Grads out;
    for (size_t i = 0; i < infos.size(); ++i)
      out.push_back(infos[i].wants ? raw::cast(raw::select(g[0], d, static_cast<int64_t>(i)), infos[i].dtype) : Tensor());
    return out;
  });
  return y;
}
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor y = raw::index_select(x, dim, index);
  if (!needs_grad({&x})) return y;
  InputInfo ix(x);
  record("index_select", {x}, {y}, [ix, dim, si = save(index)](const Grads& g) -> Grads {
    return {raw::index_add_zeros(ix.shape, dim, si.get("index_select"), g[0])};
  });
  return y;
}

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
