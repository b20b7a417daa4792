// defines: TensorImpl (storage + offset + sizes + strides + dtype + an autograd slot) and AutogradMetaBase,
// the only thing core knows about autograd.
#pragma once
#include <cstdint>
#include <memory>

#include "ember/core/dtype.h"
#include "ember/core/shape.h"
#include "ember/core/storage.h"

namespace ember {

namespace detail {
// Thrown when the memory of a tensor made by memory::plan (shape-only) would be read or written.
[[noreturn]] void throw_planned_access();
}  // namespace detail

// Autograd hangs its per-tensor state (grad, grad_fn, ...) here; core only asks whether the tensor was computed
// by an op (requires_grad_ is refused on such a non-leaf).
struct AutogradMetaBase {
  virtual ~AutogradMetaBase() = default;
  virtual const char* grad_fn_name() const = 0;  // the op that computed the tensor; null for a leaf
};

// CONVENTION:
//  - strides and offset are in elements, not bytes; a size-0 tensor may have any strides;
//  - every element a view can reach lies inside storage (checked when the view is made);
//  - `contiguous` is recomputed by refresh() after every metadata change;
//  - the device is the storage's device; dtype is fixed for the life of the impl.
struct TensorImpl {
  Storage storage;
  int64_t offset = 0;
  Shape sizes;
  Shape strides;
  DType dtype = kFloat32;
  bool contiguous = true;
  int64_t numel = 0;
  bool requires_grad = false;  // set by the user on leaves (Tensor::requires_grad_; core's factories)
  std::unique_ptr<AutogradMetaBase> autograd_meta;  // null until autograd needs it

  TensorImpl(Storage s, int64_t offset, Shape sizes, Shape strides, DType dtype);
  void refresh();  // recomputes numel and contiguous
  Device device() const { return storage->device; }
  // Every kernel takes its pointers here, so a planned tensor (no memory) can never reach one.
  void* data_ptr() const {
    if (storage->meta) [[unlikely]]
      detail::throw_planned_access();
    return static_cast<char*>(storage->data) + offset * static_cast<int64_t>(itemsize(dtype));
  }
  void bump_version() { storage->version.fetch_add(1, std::memory_order_relaxed); }
};

}  // namespace ember
