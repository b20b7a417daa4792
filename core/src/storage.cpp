// defines: the lifetimes of StorageImpl (its allocator or deleter frees it) and TensorImpl (metadata refresh).
#include "ember/core/storage.h"
#include "ember/core/allocator.h"
#include "ember/core/tensor_impl.h"
#include "memory_plan_internal.h"

namespace ember {

// --- Storage
StorageImpl::StorageImpl(size_t n, Allocator& alloc)
    : data(alloc.allocate(n)), nbytes(n), device(alloc.device()), allocator(&alloc), meta(alloc.is_meta()) {
  if (data && !meta) memory::internal::on_allocated(*this);
}
StorageImpl::StorageImpl(void* d, size_t n, Device dev, std::function<void(void*)> del)
    : data(d), nbytes(n), device(dev), deleter(std::move(del)) {}
StorageImpl::~StorageImpl() {
  if (data && allocator && !meta) memory::internal::on_freed(*this);
  // No data, nothing to give back; and the allocator of a 0-byte planned storage may be gone (memory_plan.cpp).
  if (allocator && data) allocator->deallocate(data, nbytes);
  else if (deleter) deleter(data);
}

// --- TensorImpl
TensorImpl::TensorImpl(Storage s, int64_t off, Shape sz, Shape st, DType dt)
    : storage(std::move(s)), offset(off), sizes(std::move(sz)), strides(std::move(st)), dtype(dt) {
  refresh();
}
void TensorImpl::refresh() {
  numel = sizes.checked_numel();
  EMBER_CHECK_SHAPE(numel >= 0, "tensor: shape ", sizes, " has more elements than int64 can count");
  contiguous = true;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) {
      contiguous = numel == 0;
      break;
    }
    expected *= sizes[i];
  }
}

}  // namespace ember
