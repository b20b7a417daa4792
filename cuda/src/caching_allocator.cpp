// defines: the CUDA caching allocator (DeviceCachingAllocator, see caching_allocator.h), one instance per
// device, and the allocator entry points of allocator_internal.h for device memory (device_allocator,
// record_stream).
//
// Life of a block: malloc takes the best fit on the caller's stream from the pool (or cudaMallocs a new
// segment), splits off what it does not need, and marks it allocated. free puts it back and merges it with
// its free neighbours — unless other streams used it (record_stream), in which case an event is recorded on
// each of them and the block waits, "pending", until all events completed (polled at every malloc).
#include "caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <limits>
#include <memory>
#include <sstream>

#include "allocator_internal.h"
#include "check.h"
#include "device_guard.h"
#include "ember/core/error.h"
#include "ember/core/memory_context.h"
#include "ember/core/memory_history.h"
#include "ember/cuda/cuda.h"
#include "host_wait.h"
#include "runtime_internal.h"
#include "stream_internal.h"

namespace ember::cuda::detail {

// Requests above this are refused without asking the driver: rounding them up would overflow size_t.
static constexpr size_t kMaxRequest = std::numeric_limits<size_t>::max() / 2;

// --- allocation

void* DeviceCachingAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  return malloc(nbytes, current_stream_handle(device_));
}

void DeviceCachingAllocator::deallocate(void* ptr, size_t /*nbytes*/) { free(ptr); }

void* DeviceCachingAllocator::malloc(size_t nbytes, cudaStream_t stream) {
  if (nbytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (nbytes > kMaxRequest) throw_oom_locked(nbytes, false);
  const size_t size = round_size(nbytes);

  process_events_locked();  // pending frees whose streams are done become reusable first
  Block* block = pool_.take_best_fit(stream, size);
  if (block) {
    ++cache_hits_;
  } else {
    block = new_segment_locked(stream, size);  // frees the cache and retries once; then throws OOM
  }
  // From here on nothing throws but std::bad_alloc: the allocator state stays consistent.
  pool_.split(block, size);
  block->allocated = true;
  block->requested = nbytes;
  allocated_.emplace(block->ptr, block);
  allocated_bytes_.increase(static_cast<int64_t>(block->size));
  requested_bytes_.increase(static_cast<int64_t>(nbytes));
  active_blocks_.increase(1);
  ++num_allocs_;
  return block->ptr;
}

// A new segment for `size` bytes; or, when memory is short (the limit, or cudaMalloc failing), whatever frees it
// up: first the pending frees, then the free lists searched again (those frees may have made a fitting block),
// then the cached segments given back; a block returned from the free lists is one of them, not a new segment.
Block* DeviceCachingAllocator::new_segment_locked(cudaStream_t stream, size_t size) {
  const size_t bytes = segment_size(size);
  auto over_limit = [&] { return limit_ != 0 && static_cast<size_t>(reserved_bytes_.current) + bytes > limit_; };
  auto reclaim = [&]() -> Block* {
    ++num_alloc_retries_;
    synchronize_and_free_events_locked();
    if (Block* b = pool_.take_best_fit(stream, size)) return b;
    release_cached_locked();
    return nullptr;
  };
  if (over_limit()) {
    if (Block* b = reclaim()) return b;
    if (over_limit()) throw_oom_locked(size, true);
  }
  auto block = std::make_unique<Block>(device_, stream, bytes, pool_.is_small(size), nullptr);  // before cudaMalloc: no leak
  DeviceGuard guard(device_);
  cudaError_t err = cudaMalloc(&block->ptr, bytes);
  if (err == cudaErrorMemoryAllocation) {
    // Out of memory: the cache may hold enough, on other streams or in pieces too small for this request.
    (void)cudaGetLastError();  // clear the error slot so later launch checks do not see it
    if (Block* b = reclaim()) return b;
    err = cudaMalloc(&block->ptr, bytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      throw_oom_locked(size, false);
    }
  }
  if (err != cudaSuccess) throw_cuda_error(err, "cudaMalloc(&ptr, bytes)", __FILE__, __LINE__);
  ++num_cuda_mallocs_;
  reserved_bytes_.increase(static_cast<int64_t>(bytes));
  segments_.increase(1);
  return block.release();
}

// The message says what was asked, where (phase, module, backward op), the device's state, and what would help,
// computed from that state (never a fixed sentence).
void DeviceCachingAllocator::throw_oom_locked(size_t size, bool over_limit) {
  ++num_ooms_;
  size_t free_bytes = 0, total_bytes = 0;
  try {
    DeviceGuard guard(device_);
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
  } catch (const Error&) {  // the message is still useful without the driver's numbers
  }
  auto fmt = [](size_t b) { return ember::detail::format_bytes(b, 1); };
  const size_t allocated = static_cast<size_t>(allocated_bytes_.current);
  const size_t reserved = static_cast<size_t>(reserved_bytes_.current);
  const size_t cap = over_limit ? limit_ : allocated + free_bytes + (reserved - allocated);
  const size_t short_by = allocated + size > cap ? allocated + size - cap : 0;
  std::string advice;
  if (short_by > 0)
    advice =
        ember::detail::str("; live tensors alone exceed the ", over_limit ? "limit" : "device", " by ", fmt(short_by),
                           ": free tensors you keep, ", ember::memory::phase_advice(), "or lower the batch size");
  else
    advice = ember::detail::str("; the live tensors fit, but no free piece of ", fmt(size),
                                " was left (fragmentation): cuda::empty_cache() between phases may help");
  // What the tensors in use are (memory_history.h), and what would shrink the largest share of them.
  const std::string by_category = ember::memory::category_advice(Device::cuda(device_));
  if (!by_category.empty())
    advice +=
        ember::detail::str(". In use: ", ember::memory::describe_categories(Device::cuda(device_)), "; ", by_category);
  throw OutOfMemoryError(ember::detail::str(
      "CUDA out of memory: tried to allocate ", ember::detail::format_bytes(size, 2), " on cuda:", device_,
      ember::memory::describe_context(), " (", fmt(total_bytes), " total, ", fmt(free_bytes), " free, ", fmt(allocated),
      " allocated by ember, ", fmt(reserved), " reserved",
      limit_ ? ember::detail::str(", limit ", fmt(limit_), " set by set_memory_limit") : std::string(),
      ", largest free cached block ", fmt(pool_.largest_free()), ")", advice));
}

void DeviceCachingAllocator::set_limit(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = bytes;
}
size_t DeviceCachingAllocator::limit() {
  std::lock_guard<std::mutex> lock(mu_);
  return limit_;
}

// --- freeing

void DeviceCachingAllocator::free(void* ptr) noexcept {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  if (it == allocated_.end()) {
    std::fprintf(stderr, "ember: warning: CUDA caching allocator on cuda:%d: free of unknown pointer %p\n", device_,
                 ptr);
    return;
  }
  Block* block = it->second;
  allocated_.erase(it);
  block->allocated = false;
  allocated_bytes_.decrease(static_cast<int64_t>(block->size));
  requested_bytes_.decrease(static_cast<int64_t>(block->requested));
  active_blocks_.decrease(1);
  ++num_frees_;
  if (block->stream_uses.empty()) {
    pool_.put_back(block);
  } else {
    insert_events_locked(block);
  }
}

// A freed block that other streams used: record an event on each; the block becomes free when all completed.
void DeviceCachingAllocator::insert_events_locked(Block* block) noexcept {
  try {
    DeviceGuard guard(device_);  // the legacy default stream (nullptr) means the current device's
    for (cudaStream_t s : block->stream_uses) {
      cudaEvent_t ev = get_event_locked();
      const cudaError_t err = cudaEventRecord(ev, s);
      if (err != cudaSuccess) {
        free_events_.push_back(ev);
        throw_cuda_error(err, "cudaEventRecord(ev, stream)", __FILE__, __LINE__);
      }
      pending_.emplace_back(ev, block);
      ++block->event_count;
    }
  } catch (const std::exception& e) {
    // Cannot order the reuse after those streams (e.g. a stream was destroyed): wait for the whole device.
    std::fprintf(stderr, "ember: warning: CUDA caching allocator: %s; synchronizing cuda:%d instead\n", e.what(),
                 device_);
    int prev = 0;
    if (cudaGetDevice(&prev) == cudaSuccess) {
      EMBER_CUDA_WARN(cudaSetDevice(device_));
      count_internal_wait();
      EMBER_CUDA_WARN(cudaDeviceSynchronize());
      EMBER_CUDA_WARN(cudaSetDevice(prev));
    }
  }
  block->stream_uses.clear();
  if (block->event_count == 0) {
    pool_.put_back(block);
  } else {
    ++pending_blocks_;
  }
}

cudaEvent_t DeviceCachingAllocator::get_event_locked() {
  if (!free_events_.empty()) {
    cudaEvent_t ev = free_events_.back();
    free_events_.pop_back();
    return ev;
  }
  cudaEvent_t ev = nullptr;
  EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));  // caller holds a DeviceGuard
  return ev;
}

void DeviceCachingAllocator::process_events_locked() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    const cudaError_t err = cudaEventQuery(it->first);
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not ready" is an answer, not an error: keep it out of the error slot
      ++it;
      continue;
    }
    if (err != cudaSuccess) throw_cuda_error(err, "cudaEventQuery(ev)", __FILE__, __LINE__);
    Block* block = it->second;
    free_events_.push_back(it->first);
    it = pending_.erase(it);
    if (--block->event_count == 0) {
      --pending_blocks_;
      pool_.put_back(block);
    }
  }
}

void DeviceCachingAllocator::synchronize_and_free_events_locked() {
  while (!pending_.empty()) {
    auto [ev, block] = pending_.front();
    count_internal_wait();
    EMBER_CUDA_CHECK(cudaEventSynchronize(ev));
    free_events_.push_back(ev);
    pending_.pop_front();
    if (--block->event_count == 0) {
      --pending_blocks_;
      pool_.put_back(block);
    }
  }
}

// Gives every segment that is a single free block back to the driver (on every stream, in both pools).
void DeviceCachingAllocator::release_cached_locked() {
  DeviceGuard guard(device_);
  pool_.release_segments([&](Block* block) {
    EMBER_CUDA_CHECK(cudaFree(block->ptr));
    ++num_cuda_frees_;
    reserved_bytes_.decrease(static_cast<int64_t>(block->size));
    segments_.decrease(1);
  });
}

// --- queries

bool DeviceCachingAllocator::record_stream(void* ptr, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  if (it == allocated_.end()) return false;
  if (stream != it->second->stream) it->second->stream_uses.insert(stream);
  return true;
}

void DeviceCachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  synchronize_and_free_events_locked();
  release_cached_locked();
}

MemoryStats DeviceCachingAllocator::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  MemoryStats s;
  s.allocated_bytes = static_cast<size_t>(allocated_bytes_.current);
  s.peak_allocated_bytes = static_cast<size_t>(allocated_bytes_.peak);
  s.reserved_bytes = static_cast<size_t>(reserved_bytes_.current);
  s.peak_reserved_bytes = static_cast<size_t>(reserved_bytes_.peak);
  s.active_blocks = static_cast<size_t>(active_blocks_.current);
  s.segments = static_cast<size_t>(segments_.current);
  s.peak_segments = static_cast<size_t>(segments_.peak);
  s.pending_free_blocks = pending_blocks_;
  s.num_allocs = num_allocs_;
  s.num_frees = num_frees_;
  s.cache_hits = cache_hits_;
  s.num_cuda_mallocs = num_cuda_mallocs_;
  s.num_cuda_frees = num_cuda_frees_;
  s.num_alloc_retries = num_alloc_retries_;
  s.num_ooms = num_ooms_;
  s.requested_bytes = static_cast<size_t>(requested_bytes_.current);
  s.peak_requested_bytes = static_cast<size_t>(requested_bytes_.peak);
  s.largest_free_block = pool_.largest_free();
  s.free_blocks_small = pool_.free_blocks(true);
  s.free_blocks_large = pool_.free_blocks(false);
  s.limit_bytes = limit_;
  return s;
}

void DeviceCachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  allocated_bytes_.reset_peak();
  requested_bytes_.reset_peak();
  reserved_bytes_.reset_peak();
  segments_.reset_peak();
  active_blocks_.reset_peak();
}

// --- instances

const std::vector<DeviceCachingAllocator*>& all_caching_allocators() {
  // Never destroyed: storages freed during static destruction must still find their allocator.
  static const std::vector<DeviceCachingAllocator*>* all = [] {
    auto* v = new std::vector<DeviceCachingAllocator*>();
    for (int i = 0; i < num_devices(); ++i) v->push_back(new DeviceCachingAllocator(i));
    return v;
  }();
  return *all;
}

DeviceCachingAllocator& caching_allocator(int device) {
  require_device("cuda: caching allocator", device);
  return *all_caching_allocators()[static_cast<size_t>(device)];
}

ember::Allocator& device_allocator(int device) { return caching_allocator(device); }

void record_stream(void* ptr, CUstream_st* stream) {
  if (!ptr || num_devices() == 0) return;
  for (DeviceCachingAllocator* a : all_caching_allocators())
    if (a->record_stream(ptr, stream)) return;
}

}  // namespace ember::cuda::detail
