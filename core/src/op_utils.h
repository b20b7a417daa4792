// defines: small helpers shared by the raw op front-ends (argument checks with API.md-style messages).
// Private to core/.
#pragma once
#include <initializer_list>
#include <string>

#include "ember/core/backend.h"
#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"

namespace ember::detail {

// "float32[64, 784] on cpu"
inline std::string describe(const Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return str(t.dtype(), t.shape(), " on ", t.device());
}
inline void check_defined(const char* op, const Tensor& t, const char* arg) {
  EMBER_CHECK(t.defined(), Error, op, ": argument '", arg, "' is an undefined tensor (an empty handle)");
}
inline void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  EMBER_CHECK_DEVICE(a.device() == b.device(), op, ": expected all tensors on the same device, got ", a.device(),
                     " and ", b.device());
}
inline void check_floating(const char* op, const Tensor& t) {
  EMBER_CHECK_DTYPE(is_floating(t.dtype()), op, ": expected a floating-point tensor, got ", describe(t),
                    " (convert with .to(kFloat32))");
}
// The two operands of a product (matmul, linear, conv2d): one dtype, not bool.
inline void check_product_dtypes(const char* op, const Tensor& a, const Tensor& b) {
  EMBER_CHECK_DTYPE(a.dtype() == b.dtype(), op, ": expected both operands to have the same dtype, got ", describe(a),
                    " and ", describe(b));
  EMBER_CHECK_DTYPE(a.dtype() != kBool, op, ": not supported for bool tensors");
}
inline Tensor new_tensor(const Shape& shape, DType dtype, Device device) {
  return empty(shape, {.dtype = dtype, .device = device});
}
inline Tensor new_tensor(const Shape& shape, DType dtype, Device device, MemoryFormat format) {
  return empty(shape, {.dtype = dtype, .device = device}, format);
}
// The layout of an elementwise op's output of `shape`: channels-last when the first operand of that full shape is a
// dense channels-last tensor (PyTorch's rule, for the dense layouts), else contiguous.
inline MemoryFormat output_format(const Shape& shape, std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands)
    if (t->shape() == shape) return t->suggest_memory_format();
  return MemoryFormat::Contiguous;
}
// The view a kernel whose output must be contiguous runs on: a channels-last [N, C, H, W] tensor as its [N, H, W, C]
// permutation (contiguous), every operand permuted alike; a contiguous format leaves t as it is.
inline Tensor kernel_view(const Tensor& t, MemoryFormat format) { return raw::layout_view(t, format); }
// True when a and b may share memory (same storage).
inline bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.impl()->storage == b.impl()->storage && a.numel() > 0 && b.numel() > 0;
}
inline bool same_view(const Tensor& a, const Tensor& b) {
  return a.impl()->storage == b.impl()->storage && a.storage_offset() == b.storage_offset() && a.shape() == b.shape() &&
         a.strides() == b.strides() && a.dtype() == b.dtype();
}

}  // namespace ember::detail
