// defines: the cached pinned host allocator (host_allocator() and host_record_use() of allocator_internal.h,
// host_memory_stats(), reset_peak_host_memory_stats(), host_empty_cache() of memory.h).
//
// Pinning memory (cudaHostAlloc) is slow — it maps and locks pages — so freed blocks are kept in free lists
// per size class and handed out again. A pinned block may still be read or written by an asynchronous copy
// after its storage is freed, so each block carries the events recorded after the copies that used it
// (host_record_use), and is handed out again only when all of them have completed.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "allocator_internal.h"
#include "caching_allocator.h"
#include "check.h"
#include "device_guard.h"
#include "ember/core/allocator.h"
#include "ember/core/error.h"
#include "ember/cuda/cuda.h"
#include "ember/cuda/memory.h"
#include "host_wait.h"
#include "runtime_internal.h"

namespace ember::cuda::detail {
namespace {

// Size classes: multiples of 512 bytes up to 4 KiB, then 8 classes per power of two (at most 12.5% slack;
// pinned memory is scarcer than pageable memory, so no power-of-two rounding).
size_t host_size_class(size_t n) {
  if (n <= 4096) return (n + 511) / 512 * 512;
  size_t p = 1;
  while (p < n) p <<= 1;
  const size_t step = (p >> 1) / 8;
  return (n + step - 1) / step * step;
}

// An event recorded on `stream` (of `device`) after work that uses a block. Re-recording the same event on
// the same stream supersedes the older work (a stream runs in order), so a block holds one per stream.
struct HostUse {
  cudaEvent_t event = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
};

// CONVENTION: `ptr` is a cudaHostAlloc pointer of `size` bytes (a size class). A block is allocated (owned by
// a storage) or in free_[size]; either way it is in blocks_. `uses` may be non-empty in both states: a free
// block is handed out again only once every event in `uses` has completed.
struct HostBlock {
  void* ptr = nullptr;
  size_t size = 0;
  bool allocated = false;
  std::vector<HostUse> uses;
};

class HostCachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    EMBER_CHECK_DEVICE(num_devices() > 0, "pinned host memory: ", why_unusable());
    std::lock_guard<std::mutex> lock(mu_);
    if (nbytes > std::numeric_limits<size_t>::max() / 2) throw_oom_locked(nbytes);
    const size_t size = host_size_class(nbytes);
    HostBlock* block = take_free_block_locked(size);
    if (block) {
      ++cache_hits_;
    } else {
      block = new_block_locked(size);
    }
    block->allocated = true;
    allocated_bytes_.increase(static_cast<int64_t>(size));
    ++num_allocs_;
    return block->ptr;
  }

  void deallocate(void* ptr, size_t /*nbytes*/) override {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == blocks_.end() || !it->second->allocated) {
      std::fprintf(stderr, "ember: warning: pinned host allocator: free of unknown pointer %p\n", ptr);
      return;
    }
    HostBlock* block = it->second;
    block->allocated = false;
    allocated_bytes_.decrease(static_cast<int64_t>(block->size));
    ++num_frees_;
    free_[block->size].push_back(block);  // its pending uses are checked when it is handed out again
  }

  Device device() const override { return Device::cpu(); }

  void record_use(void* ptr, cudaStream_t stream) {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    HostBlock* block = find_containing_locked(ptr);
    if (!block) return;  // pageable or foreign memory: nothing to guard
    int device = 0;
    if (stream) {
      EMBER_CUDA_CHECK(cudaStreamGetDevice(stream, &device));
    } else {
      EMBER_CUDA_CHECK(cudaGetDevice(&device));  // the legacy default stream of the current device
    }
    DeviceGuard guard(device);  // events are created on, and recorded from, the stream's device
    for (HostUse& use : block->uses) {
      if (use.stream == stream && use.device == device) {
        EMBER_CUDA_CHECK(cudaEventRecord(use.event, stream));
        return;
      }
    }
    HostUse use{nullptr, stream, device};
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&use.event, cudaEventDisableTiming));
    const cudaError_t err = cudaEventRecord(use.event, stream);
    if (err != cudaSuccess) {
      EMBER_CUDA_WARN(cudaEventDestroy(use.event));
      throw_cuda_error(err, "cudaEventRecord(event, stream)", __FILE__, __LINE__);
    }
    block->uses.push_back(use);
  }

  HostMemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    HostMemoryStats s;
    s.allocated_bytes = static_cast<size_t>(allocated_bytes_.current);
    s.peak_allocated_bytes = static_cast<size_t>(allocated_bytes_.peak);
    s.reserved_bytes = static_cast<size_t>(reserved_bytes_.current);
    s.peak_reserved_bytes = static_cast<size_t>(reserved_bytes_.peak);
    s.num_allocs = num_allocs_;
    s.num_frees = num_frees_;
    s.cache_hits = cache_hits_;
    s.num_host_allocs = num_host_allocs_;
    s.num_host_frees = num_host_frees_;
    return s;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    allocated_bytes_.reset_peak();
    reserved_bytes_.reset_peak();
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached_locked();
  }

 private:
  // A cached block of `size` whose uses have all completed, taken out of its free list; nullptr if none.
  HostBlock* take_free_block_locked(size_t size) {
    auto it = free_.find(size);
    if (it == free_.end()) return nullptr;
    std::vector<HostBlock*>& list = it->second;
    for (size_t i = list.size(); i-- > 0;) {  // the most recently freed first (likely warm in the caches)
      HostBlock* block = list[i];
      if (!uses_done_locked(block)) continue;
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
      return block;
    }
    return nullptr;
  }

  // Drops the completed uses of `block`; true when none is left.
  bool uses_done_locked(HostBlock* block) {
    auto& uses = block->uses;
    for (size_t i = 0; i < uses.size();) {
      const cudaError_t err = cudaEventQuery(uses[i].event);
      if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();  // an answer, not an error
        ++i;
        continue;
      }
      if (err != cudaSuccess) throw_cuda_error(err, "cudaEventQuery(event)", __FILE__, __LINE__);
      destroy_event(uses[i]);
      uses[i] = uses.back();
      uses.pop_back();
    }
    return uses.empty();
  }

  static void destroy_event(const HostUse& use) {
    DeviceGuard guard(use.device);
    EMBER_CUDA_WARN(cudaEventDestroy(use.event));
  }

  HostBlock* new_block_locked(size_t size) {
    auto block = std::make_unique<HostBlock>();
    block->size = size;
    cudaError_t err = cudaHostAlloc(&block->ptr, size, cudaHostAllocDefault);
    if (err == cudaErrorMemoryAllocation) {  // give the cache back and try once more
      (void)cudaGetLastError();
      release_cached_locked();
      err = cudaHostAlloc(&block->ptr, size, cudaHostAllocDefault);
      if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        throw_oom_locked(size);
      }
    }
    if (err != cudaSuccess) throw_cuda_error(err, "cudaHostAlloc(&ptr, size, 0)", __FILE__, __LINE__);
    ++num_host_allocs_;
    reserved_bytes_.increase(static_cast<int64_t>(size));
    HostBlock* raw = block.release();
    blocks_.emplace(reinterpret_cast<uintptr_t>(raw->ptr), raw);
    return raw;
  }

  [[noreturn]] void throw_oom_locked(size_t size) {
    throw OutOfMemoryError(ember::detail::str(
        "CUDA out of memory: tried to allocate ", ember::detail::format_bytes(size, 2), " of pinned host memory (",
        ember::detail::format_bytes(static_cast<size_t>(allocated_bytes_.current), 1), " allocated by ember, ",
        ember::detail::format_bytes(static_cast<size_t>(reserved_bytes_.current), 1), " reserved)"));
  }

  HostBlock* find_containing_locked(void* ptr) {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    auto it = blocks_.upper_bound(p);  // the first block starting after p
    if (it == blocks_.begin()) return nullptr;
    --it;
    return p < it->first + it->second->size ? it->second : nullptr;
  }

  // Waits for the uses of every cached block, then returns them all to the system.
  void release_cached_locked() {
    for (auto& [size, list] : free_) {
      while (!list.empty()) {
        HostBlock* block = list.back();
        while (!block->uses.empty()) {  // one at a time: a throw leaves only live events behind
          count_internal_wait();
          EMBER_CUDA_CHECK(cudaEventSynchronize(block->uses.back().event));
          destroy_event(block->uses.back());
          block->uses.pop_back();
        }
        EMBER_CUDA_CHECK(cudaFreeHost(block->ptr));
        ++num_host_frees_;
        reserved_bytes_.decrease(static_cast<int64_t>(block->size));
        blocks_.erase(reinterpret_cast<uintptr_t>(block->ptr));
        list.pop_back();
        delete block;
      }
    }
  }

  std::mutex mu_;
  std::map<uintptr_t, HostBlock*> blocks_;                    // every block, by address
  std::unordered_map<size_t, std::vector<HostBlock*>> free_;  // cached blocks by size class
  Stat allocated_bytes_, reserved_bytes_;
  uint64_t num_allocs_ = 0, num_frees_ = 0, cache_hits_ = 0, num_host_allocs_ = 0, num_host_frees_ = 0;
};

// Never destroyed: pinned storages freed during static destruction must still find it.
HostCachingAllocator& host_instance() {
  static auto* a = new HostCachingAllocator();
  return *a;
}

}  // namespace

ember::Allocator& host_allocator() { return host_instance(); }

void host_record_use(void* ptr, CUstream_st* stream) {
  if (!ptr || num_devices() == 0) return;
  host_instance().record_use(ptr, stream);
}

HostMemoryStats host_stats() { return host_instance().stats(); }
void host_reset_peak() { host_instance().reset_peak(); }
void host_release_cache() { host_instance().empty_cache(); }

}  // namespace ember::cuda::detail
