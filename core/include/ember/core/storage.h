// defines: Storage, the ref-counted buffer behind tensors (pointer, bytes, device, who frees it, a version
// counter that in-place ops bump so autograd can detect misuse of saved tensors).
#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

#include "ember/core/allocator.h"
#include "ember/core/device.h"

namespace ember {

// CONVENTION: data is owned by `allocator` (deallocate(data, nbytes)) unless it is null, in which case
// `deleter` (possibly empty: from_blob without one) is called. Views of a tensor share one StorageImpl.
struct StorageImpl {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Allocator* allocator = nullptr;
  std::function<void(void*)> deleter;
  bool pinned = false;
  bool meta = false;        // from memory::plan's simulated allocator: `data` is a placeholder with no memory behind it
  // memory::Category (memory_plan.h; 4: temporaries until tagged): the byte counters by category move its bytes
  // when it is tagged and at every free, so it is found here, not looked up (the timeline keeps its own records).
  std::atomic<uint8_t> category{4};
  std::atomic<uint32_t> version{0};

  StorageImpl(size_t nbytes, Allocator& alloc);
  StorageImpl(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;
  ~StorageImpl();
};

using Storage = std::shared_ptr<StorageImpl>;

}  // namespace ember
