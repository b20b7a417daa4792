// defines: the Tensor members autograd must see — views, copies, dtype and device moves, detach, the in-place ops
// and the math members (x.sum(), x.exp(), ...: the free functions of ops.h) — recording their backward when the
// tensor requires grad.
//
// In-place ops: a leaf that requires grad may only be changed under NoGradGuard (an optimiser update);
// changing a view of such a tensor in place is refused (its base would not learn of it); otherwise the op is
// recorded and becomes the tensor's new grad_fn. Saved tensors notice the change through the version counter.
#include <algorithm>

#include "ember/autograd/grad_mode.h"
#include "ember/autograd/ops.h"
#include "ember/core/factory.h"
#include "grad_utils.h"

namespace ember {

namespace {
// Records a view op: its gradient maps back through `back`. `is_view` is false for the ops here that copy
// (clone, contiguous, to): their output owns fresh storage, so in-place changes to it are allowed.
// (Views allocate nothing, so they open no memory scope; the copies' callers open theirs, an OpEntry, around the
// copy.)
template <class Back>
Tensor view_op(const OpDef& op, const Tensor& x, Tensor y, Back back, bool is_view = true) {
  if (!OpEntry::needs_grad({&x})) return y;
  InputInfo ix(x);
  autograd::Recording r = autograd::record(op, {x}, {y}, /*outputs_are_views=*/is_view);
  r.node()->saves_nothing = true;  // back() sees only the input's shape, dtype and device
  std::move(r).backward([ix, back](const Grads& g) -> Grads { return {back(g[0], ix)}; });
  return y;
}
template <class Back>
Tensor copy_op(const OpEntry& op, const Tensor& x, Tensor y, Back back) {
  return view_op(op.def(), x, std::move(y), back, /*is_view=*/false);
}
}  // namespace

Tensor Tensor::reshape(const Shape& s) const {
  return view_op(opdef::reshape, *this, raw::reshape(*this, s),
                 [](const Tensor& g, const InputInfo& i) { return g.reshape(i.shape); });
}
Tensor Tensor::view(const Shape& s) const {
  return view_op(opdef::view, *this, raw::view(*this, s),
                 [](const Tensor& g, const InputInfo& i) { return g.reshape(i.shape); });
}
Tensor Tensor::flatten(int64_t a, int64_t b) const {
  return view_op(opdef::flatten, *this, raw::flatten(*this, a, b),
                 [](const Tensor& g, const InputInfo& i) { return g.reshape(i.shape); });
}
Tensor Tensor::squeeze() const {
  return view_op(opdef::squeeze, *this, raw::squeeze(*this),
                 [](const Tensor& g, const InputInfo& i) { return g.reshape(i.shape); });
}
Tensor Tensor::squeeze(int64_t d) const {
  return view_op(opdef::squeeze, *this, raw::squeeze(*this, d),
                 [](const Tensor& g, const InputInfo& i) { return g.reshape(i.shape); });
}
Tensor Tensor::unsqueeze(int64_t d) const {
  return view_op(opdef::unsqueeze, *this, raw::unsqueeze(*this, d),
                 [](const Tensor& g, const InputInfo& i) { return g.reshape(i.shape); });
}
Tensor Tensor::transpose(int64_t a, int64_t b) const {
  return view_op(opdef::transpose, *this, raw::transpose(*this, a, b),
                 [a, b](const Tensor& g, const InputInfo&) { return g.transpose(a, b); });
}
Tensor Tensor::t() const {
  EMBER_CHECK_SHAPE(dim() <= 2, opdef::t.name, ": expects a tensor with <= 2 dims, got ", shape(),
                    " (use transpose(a, b))");
  return dim() < 2 ? view_op(opdef::t, *this, raw::alias(*this), [](const Tensor& g, const InputInfo&) { return g; })
                   : transpose(0, 1);
}
Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  Tensor y = raw::permute(*this, dims);
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    inverse[static_cast<size_t>(normalize_dim(dims[i], dim(), opdef::permute.name))] = static_cast<int64_t>(i);
  return view_op(opdef::permute, *this, y, [inverse](const Tensor& g, const InputInfo&) { return g.permute(inverse); });
}
Tensor Tensor::expand(const Shape& s) const {
  return view_op(opdef::expand, *this, raw::expand(*this, s),
                 [](const Tensor& g, const InputInfo& i) { return autograd::sum_to(g, i.shape); });
}
namespace {
// g (the slice start, start + step, ... of dim d of a tensor of `shape`) put back in place among zeros, with
// differentiable ops (for a create_graph pass): each element followed by step - 1 zeros, then padded (or cropped)
// to the dim's size. pad and reshape are differentiable to any order.
Tensor embed_slice(const Tensor& g, const Shape& shape, int64_t d, int64_t start, int64_t step) {
  const int64_t rank = static_cast<int64_t>(shape.size()), len = g.size(d);
  auto pads_for = [rank](int64_t dim, int64_t front, int64_t back) {  // pad's pairs run from the last dim
    std::vector<int64_t> p(static_cast<size_t>(2 * (rank - dim)), 0);
    p[p.size() - 2] = front;
    p[p.size() - 1] = back;
    return p;
  };
  Tensor spread = g;
  if (step > 1) {
    Shape s = g.shape();
    s.insert(static_cast<size_t>(d + 1), 1);
    Tensor u = g.reshape(s);  // [..., len, 1, ...]
    std::vector<int64_t> p(static_cast<size_t>(2 * (rank - d)), 0);
    p[p.size() - 1] = step - 1;  // dim d + 1 of u: 1 -> step
    Shape merged = g.shape();
    merged[static_cast<size_t>(d)] = len * step;
    spread = pad(u, p).reshape(merged);
  }
  return pad(spread, pads_for(d, start, shape[static_cast<size_t>(d)] - start - spread.size(d)));
}
}  // namespace

// slice / select: the gradient is zero except in the part that was read.
Tensor Tensor::slice(int64_t d, int64_t s, int64_t e, int64_t st) const {
  return view_op(opdef::slice, *this, raw::slice(*this, d, s, e, st),
                 [d, s, e, st](const Tensor& g, const InputInfo& i) {
                   const int64_t dim = normalize_dim(d, static_cast<int64_t>(i.shape.size()), opdef::slice.name);
                   const int64_t n = i.shape[static_cast<size_t>(dim)];
                   const int64_t start = std::clamp<int64_t>(s < 0 ? s + n : s, 0, n);
                   if (autograd::create_graph_enabled()) return embed_slice(g, i.shape, dim, start, st);
                   Tensor gx = zeros(i.shape, {.dtype = g.dtype(), .device = g.device()});
                   Tensor part = raw::slice(gx, d, s, e, st);
                   raw::copy_(part, g);
                   return gx;
                 });
}
Tensor Tensor::select(int64_t d, int64_t idx) const {
  return view_op(opdef::select, *this, raw::select(*this, d, idx), [d, idx](const Tensor& g, const InputInfo& i) {
    if (autograd::create_graph_enabled()) {
      const int64_t dim = normalize_dim(d, static_cast<int64_t>(i.shape.size()), opdef::select.name);
      const int64_t n = i.shape[static_cast<size_t>(dim)];
      return embed_slice(g.unsqueeze(dim), i.shape, dim, idx < 0 ? idx + n : idx, 1);
    }
    Tensor gx = zeros(i.shape, {.dtype = g.dtype(), .device = g.device()});
    Tensor part = raw::select(gx, d, idx);
    raw::copy_(part, g);
    return gx;
  });
}
Tensor Tensor::index_select(int64_t d, const Tensor& i) const { return ember::index_select(*this, d, i); }
Tensor Tensor::gather(int64_t d, const Tensor& i) const { return ember::gather(*this, d, i); }
Tensor Tensor::scatter_add(int64_t d, const Tensor& i, const Tensor& src) const {
  return ember::scatter_add(*this, d, i, src);
}
Tensor Tensor::masked_fill(const Tensor& mask, Scalar v) const { return ember::masked_fill(*this, mask, v); }
Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& v) const { return ember::masked_fill(*this, mask, v); }
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const { return ember::chunk(*this, chunks, d); }
std::vector<Tensor> Tensor::split(int64_t size, int64_t d) const { return ember::split(*this, size, d); }
std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int64_t d) const {
  return ember::split(*this, sizes, d);
}

// --- copies, dtypes, devices
Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  OpEntry op(opdef::contiguous);
  return copy_op(op, *this, raw::clone(*this), [](const Tensor& g, const InputInfo&) { return g; });
}
Tensor Tensor::contiguous(MemoryFormat f) const {
  if (f != MemoryFormat::Preserve && is_contiguous(f)) return *this;  // (raw refuses Preserve, naming contiguous)
  OpEntry op(opdef::contiguous);
  return copy_op(op, *this, raw::contiguous(*this, f), [](const Tensor& g, const InputInfo&) { return g; });
}
Tensor Tensor::clone() const { return clone(MemoryFormat::Preserve); }
Tensor Tensor::clone(MemoryFormat f) const {
  OpEntry op(opdef::clone);
  return copy_op(op, *this, raw::clone(*this, f), [](const Tensor& g, const InputInfo&) { return g; });
}
Tensor Tensor::detach() const { return raw::alias(*this); }
Tensor Tensor::to(DType dt) const {
  if (dt == dtype()) return *this;
  OpEntry op(opdef::to);
  Tensor y = raw::cast(*this, dt);
  if (!is_floating(dt)) return y;  // an integer result carries no gradient
  return copy_op(op, *this, y, [](const Tensor& g, const InputInfo& i) { return g.to(i.dtype); });
}
Tensor Tensor::to(Device dev, bool non_blocking) const {
  if (dev == device()) return *this;
  OpEntry op(opdef::to);
  return copy_op(op, *this, raw::to_device(*this, dev, non_blocking),
                 [](const Tensor& g, const InputInfo& i) { return g.to(i.device); });
}

// --- in place
namespace {
// Refuses in-place changes autograd could not follow; returns whether the op must be recorded.
bool check_inplace(const char* op, const Tensor& self, const Tensor* other) {
  if (!GradMode::is_enabled()) return false;
  const bool self_rg = self.requires_grad();
  EMBER_CHECK(!(self_rg && self.is_leaf()), Error, op, ": a leaf tensor that requires grad (", self.dtype(),
              self.shape(),
              ") cannot be modified in place while recording; do parameter updates under NoGradGuard, or use the "
              "out-of-place op");
  const bool record_it = self_rg || (other && other->defined() && other->requires_grad());
  if (record_it) {
    const autograd::AutogradMeta* m = autograd::meta(self);
    EMBER_CHECK(!(m && m->is_view), Error, op, ": in-place change of a view (", self.dtype(), self.shape(),
                ") of a tensor that requires grad is not supported; clone() the view first");
    detail::check_writable(op, self);
  }
  return record_it;
}

// Runs `apply` (the raw in-place op) and, when needed, records `name` with inputs {self, other} whose backward
// gets (g, value of self before the op, saved other, value of self after).
using InplaceGrad =
    std::function<Grads(const Tensor& g, const Tensor& before, const Tensor& other, const Tensor& after)>;
Tensor& inplace(const OpDef& def, Tensor& self, const Tensor& other, bool keep_before, bool keep_after,
                const std::function<void()>& apply, InplaceGrad grad) {
  OpEntry op(def);
  const bool rec = check_inplace(op.name(), self, other.defined() ? &other : nullptr);
  Tensor before = rec && keep_before ? raw::clone(self) : Tensor();
  // self's value before the op, at self's place in the graph before the op (a create_graph pass differentiates
  // through it to what computed self)
  const autograd::SavedTensor sb =
      rec && keep_before ? autograd::SavedTensor(before, autograd::gradient_edge(self)) : autograd::SavedTensor();
  // `other` is saved before the op: it may be self (x.mul_(x): then its value before is `before`) or share self's
  // memory through another view (then the op bumps its version and backward says so instead of using new values).
  autograd::SavedTensor so;
  if (rec && keep_before && other.defined()) so = other.impl() == self.impl() ? sb : save(other);
  apply();
  if (!rec) return self;
  std::vector<Tensor> inputs = {self};
  if (other.defined()) inputs.push_back(other);
  InputInfo io = other.defined() ? InputInfo(other) : InputInfo(self);
  // record() reads self's current edge (its previous grad_fn) before making this node its grad_fn
  op.record(inputs, {self})
      .backward(
          // ops that keep `before` (mul_, div_) also need `other`
          [io, grad, sb, so, sa = save(keep_after ? self : Tensor())](const Grads& g) -> Grads {
            Grads r = grad(g[0], sb.get(), so.get(), sa.get());
            if (r.size() > 1) r[1] = reduce_to(r[1], io);
            return r;
          });
  return self;
}
}  // namespace

Tensor& Tensor::add_(const Tensor& o) {
  return inplace(
      opdef::add_, *this, o, false, false, [&] { raw::binary_(BinaryOp::Add, *this, o); },
      [](const Tensor& g, const Tensor&, const Tensor&, const Tensor&) -> Grads {
        return {g, g};
      });
}
Tensor& Tensor::sub_(const Tensor& o) {
  return inplace(
      opdef::sub_, *this, o, false, false, [&] { raw::binary_(BinaryOp::Sub, *this, o); },
      [](const Tensor& g, const Tensor&, const Tensor&, const Tensor&) -> Grads {
        return {g, -g};
      });
}
Tensor& Tensor::mul_(const Tensor& o) {
  return inplace(
      opdef::mul_, *this, o, true, false, [&] { raw::binary_(BinaryOp::Mul, *this, o); },
      [](const Tensor& g, const Tensor& before, const Tensor& other, const Tensor&) -> Grads {
        return {g * other, g * before};
      });
}
Tensor& Tensor::div_(const Tensor& o) {
  return inplace(
      opdef::div_, *this, o, true, false, [&] { raw::binary_(BinaryOp::Div, *this, o); },
      [](const Tensor& g, const Tensor& before, const Tensor& other, const Tensor&) -> Grads {
        Tensor ga = g / other;
        return {ga, -(ga * before / other)};
      });
}
Tensor& Tensor::add_(Scalar s) {
  return inplace(
      opdef::add_, *this, {}, false, false, [&] { raw::binary_(BinaryOp::Add, *this, s); },
      [](const Tensor& g, const Tensor&, const Tensor&, const Tensor&) -> Grads { return {g}; });
}
Tensor& Tensor::sub_(Scalar s) {
  return inplace(
      opdef::sub_, *this, {}, false, false, [&] { raw::binary_(BinaryOp::Sub, *this, s); },
      [](const Tensor& g, const Tensor&, const Tensor&, const Tensor&) -> Grads { return {g}; });
}
Tensor& Tensor::mul_(Scalar s) {
  const double v = s.value;
  return inplace(
      opdef::mul_, *this, {}, false, false, [&] { raw::binary_(BinaryOp::Mul, *this, s); },
      [v](const Tensor& g, const Tensor&, const Tensor&, const Tensor&) -> Grads { return {g * v}; });
}
Tensor& Tensor::div_(Scalar s) {
  const double v = s.value;
  return inplace(
      opdef::div_, *this, {}, false, false, [&] { raw::binary_(BinaryOp::Div, *this, s); },
      [v](const Tensor& g, const Tensor&, const Tensor&, const Tensor&) -> Grads { return {g / v}; });
}
Tensor& Tensor::relu_() {
  return inplace(
      opdef::relu_, *this, {}, false, true, [&] { raw::unary_(UnaryOp::Relu, *this); },
      [](const Tensor& g, const Tensor&, const Tensor&, const Tensor& after) -> Grads {
        if (autograd::create_graph_enabled()) return {g * gt(after, 0.0).to(g.dtype())};  // records: differentiable
        return {raw::binary(BinaryOp::ReluBackward, g, after)};                           // as in relu()
      });
}
Tensor& Tensor::clamp_(double lo, double hi) {
  return inplace(
      opdef::clamp_, *this, {}, true, false, [&] { raw::clamp_(*this, lo, hi); },
      [lo, hi](const Tensor& g, const Tensor& before, const Tensor&, const Tensor&) -> Grads {
        return {g * (ge(before, lo).to(g.dtype()) * le(before, hi).to(g.dtype()))};
      });
}
// fill_ and copy_ overwrite self: no gradient flows to its old value.
Tensor& Tensor::fill_(Scalar v) {
  return inplace(
      opdef::fill_, *this, {}, false, false, [&] { raw::fill_(*this, v); },
      [](const Tensor&, const Tensor&, const Tensor&, const Tensor&) -> Grads { return {Tensor()}; });
}
Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  return inplace(
      opdef::copy_, *this, src, false, false, [&] { raw::copy_(*this, src, non_blocking); },
      [](const Tensor& g, const Tensor&, const Tensor&, const Tensor&) -> Grads {
        return {Tensor(), g};
      });
}

// --- math members: the free functions of ops.h (qualified: inside a member, `sum` would name the member)
Tensor Tensor::sum() const { return ember::sum(*this); }
Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const { return ember::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return ember::mean(*this); }
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const { return ember::mean(*this, dims, keepdim); }
Tensor Tensor::max() const { return ember::max(*this); }
Tensor Tensor::min() const { return ember::min(*this); }
Tensor Tensor::var() const { return ember::var(*this); }
Tensor Tensor::var(const std::vector<int64_t>& dims, bool keepdim, int64_t correction) const {
  return ember::var(*this, dims, keepdim, correction);
}
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return ember::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(int64_t dim, bool keepdim) const { return ember::argmin(*this, dim, keepdim); }
Tensor Tensor::logsumexp(const std::vector<int64_t>& dims, bool keepdim) const {
  return ember::logsumexp(*this, dims, keepdim);
}
Tensor Tensor::norm(double p, const std::vector<int64_t>& dims, bool keepdim) const {
  return ember::norm(*this, p, dims, keepdim);
}
Tensor Tensor::cumsum(int64_t dim) const { return ember::cumsum(*this, dim); }
SortResult Tensor::sort(int64_t dim, bool descending) const { return ember::sort(*this, dim, descending); }
SortResult Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return ember::topk(*this, k, dim, largest, sorted);
}
Tensor Tensor::exp() const { return ember::exp(*this); }
Tensor Tensor::log() const { return ember::log(*this); }
Tensor Tensor::log1p() const { return ember::log1p(*this); }
Tensor Tensor::sqrt() const { return ember::sqrt(*this); }
Tensor Tensor::abs() const { return ember::abs(*this); }
Tensor Tensor::neg() const { return ember::neg(*this); }
Tensor Tensor::square() const { return ember::square(*this); }
Tensor Tensor::sin() const { return ember::sin(*this); }
Tensor Tensor::cos() const { return ember::cos(*this); }
Tensor Tensor::relu() const { return ember::relu(*this); }
Tensor Tensor::sigmoid() const { return ember::sigmoid(*this); }
Tensor Tensor::tanh() const { return ember::tanh(*this); }
Tensor Tensor::softmax(int64_t dim) const { return ember::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return ember::log_softmax(*this, dim); }
Tensor Tensor::matmul(const Tensor& other) const { return ember::matmul(*this, other); }
Tensor Tensor::pow(const Tensor& exponent) const { return ember::pow(*this, exponent); }
Tensor Tensor::pow(Scalar exponent) const { return ember::pow(*this, exponent); }
Tensor Tensor::clamp(double lo, double hi) const { return ember::clamp(*this, lo, hi); }

}  // namespace ember
