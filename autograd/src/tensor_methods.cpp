// defines: the Tensor members that autograd must see (views, copies, dtype and device moves, detach) and the
// per-tensor autograd state (requires_grad, grad). Gradient recording joins these with the autograd engine.
#include "ember/core/raw_ops.h"
#include "ember/core/tensor.h"

namespace ember {

namespace {
// Per-tensor autograd state; only leaves that require grad carry one.
struct AutogradMeta final : AutogradMetaBase {
  bool requires_grad = false;
  Tensor grad;
};
AutogradMeta* meta(const Tensor& t) { return static_cast<AutogradMeta*>(t.impl()->autograd_meta.get()); }
}  // namespace

bool Tensor::requires_grad() const {
  AutogradMeta* m = meta(*this);
  return m && m->requires_grad;
}
Tensor& Tensor::requires_grad_(bool on) {
  EMBER_CHECK_DTYPE(!on || is_floating(dtype()), "requires_grad_: only floating-point tensors can require gradients, got ",
                    dtype(), shape());
  if (!impl()->autograd_meta) impl()->autograd_meta = std::make_unique<AutogradMeta>();
  meta(*this)->requires_grad = on;
  return *this;
}
Tensor Tensor::grad() const {
  AutogradMeta* m = meta(*this);
  return m ? m->grad : Tensor();
}

Tensor Tensor::to(Device device, bool non_blocking) const { return raw::to_device(*this, device, non_blocking); }
Tensor Tensor::to(DType dtype) const { return raw::cast(*this, dtype); }
Tensor Tensor::contiguous() const { return raw::contiguous(*this); }
Tensor Tensor::clone() const { return raw::clone(*this); }
Tensor Tensor::detach() const { return raw::alias(*this); }
Tensor Tensor::reshape(const Shape& s) const { return raw::reshape(*this, s); }
Tensor Tensor::view(const Shape& s) const { return raw::view(*this, s); }
Tensor Tensor::flatten(int64_t a, int64_t b) const { return raw::flatten(*this, a, b); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return raw::transpose(*this, a, b); }
Tensor Tensor::permute(const std::vector<int64_t>& d) const { return raw::permute(*this, d); }
Tensor Tensor::t() const {
  EMBER_CHECK_SHAPE(dim() <= 2, "t: expects a tensor with <= 2 dims, got ", shape(), " (use transpose(a, b))");
  return dim() < 2 ? raw::alias(*this) : raw::transpose(*this, 0, 1);
}
Tensor Tensor::slice(int64_t d, int64_t s, int64_t e, int64_t st) const { return raw::slice(*this, d, s, e, st); }
Tensor Tensor::select(int64_t d, int64_t i) const { return raw::select(*this, d, i); }
Tensor Tensor::index_select(int64_t d, const Tensor& i) const { return raw::index_select(*this, d, i); }
Tensor Tensor::squeeze() const { return raw::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return raw::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return raw::unsqueeze(*this, d); }
Tensor Tensor::expand(const Shape& s) const { return raw::expand(*this, s); }

}  // namespace ember
