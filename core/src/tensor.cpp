// defines: the non-differentiable Tensor members (metadata, element access, in-place ops, copies between
// devices) and copy_to_host_as.
#include <cstring>

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
  EMBER_CHECK_SHAPE(numel() == 1, "item: a Tensor with ", numel(), " elements cannot be converted to a scalar (shape ",
                    shape(), ")");
  check_host_access("item");
  double v = 0;
  copy_to_host_as(*this, kFloat64, &v);
  return v;
}

void copy_to_host_as(const Tensor& src, DType want, void* dst) {
  detail::check_defined("to_vector", src, "self");
  if (src.numel() == 0) return;
  Tensor host = from_blob(dst, src.shape(), {.dtype = want});
  raw::copy_(host, src);
}

Tensor Tensor::pin_memory() const {
  EMBER_CHECK_DEVICE(is_cpu(), "pin_memory: only CPU tensors can be pinned, got ", describe(*this));
  // Pinned memory comes from the CUDA host allocator: backend_for throws a DeviceError saying why CUDA is
  // unusable here; with CUDA present, pinning arrives with the CUDA runtime issue.
  backend_for(Device::cuda());
  throw DeviceError("pin_memory: pinned host memory is not implemented in this build yet");
}
bool Tensor::is_pinned() const { return checked()->storage->pinned; }

Tensor& Tensor::copy_(const Tensor& src, bool) { return raw::copy_(*this, src); }
Tensor& Tensor::fill_(Scalar v) { return raw::fill_(*this, v); }
Tensor& Tensor::add_(const Tensor& o) { return raw::binary_(BinaryOp::Add, *this, o); }
Tensor& Tensor::add_(Scalar s) { return raw::binary_(BinaryOp::Add, *this, s); }
Tensor& Tensor::sub_(const Tensor& o) { return raw::binary_(BinaryOp::Sub, *this, o); }
Tensor& Tensor::sub_(Scalar s) { return raw::binary_(BinaryOp::Sub, *this, s); }
Tensor& Tensor::mul_(const Tensor& o) { return raw::binary_(BinaryOp::Mul, *this, o); }
Tensor& Tensor::mul_(Scalar s) { return raw::binary_(BinaryOp::Mul, *this, s); }
Tensor& Tensor::div_(const Tensor& o) { return raw::binary_(BinaryOp::Div, *this, o); }
Tensor& Tensor::div_(Scalar s) { return raw::binary_(BinaryOp::Div, *this, s); }
Tensor& Tensor::relu_() { return raw::unary_(UnaryOp::Relu, *this); }
Tensor& Tensor::clamp_(double lo, double hi) { return raw::clamp_(*this, lo, hi); }

}  // namespace ember
