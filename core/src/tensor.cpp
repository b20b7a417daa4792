// defines: the Tensor members that need no autograd (metadata, element access, pinning) and copy_to_host_as.
#include <cstring>

#include "ember/cuda/cuda.h"
#include "ember/internal/cuda_hooks.h"
#include "op_utils.h"

namespace ember {
using detail::describe;

int64_t Tensor::size(int64_t d) const {
  const TensorImpl* t = checked();
  return t->sizes[static_cast<size_t>(normalize_dim(d, static_cast<int64_t>(t->sizes.size()), "size"))];
}
int64_t Tensor::stride(int64_t d) const {
  const TensorImpl* t = checked();
  return t->strides[static_cast<size_t>(normalize_dim(d, static_cast<int64_t>(t->strides.size()), "stride"))];
}
void* Tensor::data_ptr() const { return checked()->data_ptr(); }

void Tensor::check_host_access(const char* what) const {
  const TensorImpl* t = checked();
  if (t->device().is_cuda())
    EMBER_CHECK_DEVICE(cuda::allow_scalar(), what, ": element access to ", describe(*this),
                       " would read GPU memory element by element, which silently serialises the GPU; copy it "
                       "first with .cpu() or .to_vector<T>(), or call cuda::set_allow_scalar(true)");
}

double Tensor::item_double_checked(DType) const {
  double v = 0;
  item_checked(kFloat64, &v);
  return v;
}
void Tensor::item_checked(DType want, void* out) const {
  EMBER_CHECK_SHAPE(numel() == 1, "item: a Tensor with ", numel(), " elements cannot be converted to a scalar (shape ",
                    shape(), ")");
  check_host_access("item");
  copy_to_host_as(*this, want, out);
}

void copy_to_host_as(const Tensor& src, DType want, void* dst) {
  detail::check_defined("to_vector", src, "self");
  if (src.numel() == 0) return;
  Tensor host = from_blob(dst, src.shape(), {.dtype = want});
  raw::copy_(host, src);
}

Tensor Tensor::pin_memory() const {
  EMBER_CHECK_DEVICE(is_cpu(), "pin_memory: only CPU tensors can be pinned, got ", describe(*this));
  if (is_pinned()) return *this;
  // Pinned memory comes from the CUDA host allocator (cudaHostAlloc), which needs a usable device.
  EMBER_CHECK_DEVICE(cuda::is_available(),
                     "pin_memory: pinned host memory needs a usable CUDA device, but "
                     "cuda::is_available() is false: ",
                     cuda::unavailable_reason());
  return detail::cuda_hooks()->pin(*this);
}
void Tensor::set_data(const Tensor& src) {
  TensorImpl* t = checked();
  detail::check_defined("set_data", src, "src");
  t->storage = src.impl()->storage;
  t->offset = src.impl()->offset;
  t->sizes = src.impl()->sizes;
  t->strides = src.impl()->strides;
  t->dtype = src.impl()->dtype;
  t->refresh();
}

// (requires_grad() and the other autograd members are autograd's; the flag of a leaf is core's, so that core's
// factories can create tensors that require grad.)
Tensor& Tensor::requires_grad_(bool on) {
  TensorImpl* t = checked();
  const char* fn = t->autograd_meta ? t->autograd_meta->grad_fn_name() : nullptr;
  EMBER_CHECK(!fn, Error, "requires_grad_: only leaf tensors can change requires_grad; this ", dtype(), shape(),
              " tensor was computed by ", fn, " (use detach() to get a leaf)");
  EMBER_CHECK_DTYPE(!on || is_floating(dtype()),
                    "requires_grad_: only floating-point tensors can require gradients, got ", dtype(), shape());
  t->requires_grad = on;
  return *this;
}

bool Tensor::is_pinned() const { return checked()->storage->pinned; }

}  // namespace ember
