// defines: DeviceCachingAllocator, the per-device CUDA caching allocator (Block, Stat, the
// record_stream bookkeeping), distilled from the ideas of PyTorch's CUDACachingAllocator: size-rounded
// blocks carved from cudaMalloc'd segments, best fit, split and merge of neighbours (the policy: ember/internal/block_pool.h),
// blocks tied to the stream they were allocated on, and free-the-cache-and-retry on out-of-memory.
// Left out on purpose: graph pools, expandable segments, IPC, max_split_size, garbage-collection thresholds.
// Internal to cuda/src (includes the CUDA runtime header).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ember/core/allocator.h"
#include "ember/cuda/memory.h"
#include "ember/internal/allocator_sizes.h"
#include "ember/internal/block_pool.h"

namespace ember::cuda::detail {

// Sizes (see Note [CUDA caching allocator] in memory.h): ember/internal/allocator_sizes.h, shared with
// memory::plan's simulation of this allocator.
inline constexpr size_t kMinBlockSize = ember::detail::kCudaMinBlockSize;
inline constexpr size_t kSmallSize = ember::detail::kCudaSmallSize;
inline size_t round_size(size_t nbytes) { return ember::detail::cuda_round_size(nbytes); }
inline size_t segment_size(size_t rounded) { return ember::detail::cuda_segment_size(rounded); }

// A current / peak gauge plus totals of increases and decreases (PyTorch's Stat).
struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  uint64_t allocated = 0;  // sum of increases
  uint64_t freed = 0;      // sum of decreases
  void increase(int64_t n) {
    current += n;
    allocated += static_cast<uint64_t>(n);
    if (current > peak) peak = current;
  }
  void decrease(int64_t n) {
    current -= n;
    freed += static_cast<uint64_t>(n);
  }
  void reset_peak() { peak = current; }
};

// A block of a cudaMalloc'd segment: the shared policy's fields (ember/internal/block_pool.h, whose CONVENTION
// holds here: allocated, pending or free; segments given back whole) and what only the real allocator tracks.
//  - stream_uses holds the streams other than `stream` that used the block while allocated; it is empty unless
//    the block is allocated. A freed block with stream uses is pending until an event on each of them completed.
struct Block : ember::detail::PoolBlockBase<Block> {
  int device = 0;
  size_t requested = 0;  // the bytes asked for (unrounded), while allocated
  std::unordered_set<cudaStream_t> stream_uses;

  Block(int device_, cudaStream_t stream_, size_t size_, bool small_, void* ptr_)
      : PoolBlockBase(ptr_, size_, stream_, small_), device(device_) {}
  Block(const Block& neighbour, void* ptr_, size_t size_)  // the rest of a split, in the neighbour's segment
      : PoolBlockBase(ptr_, size_, neighbour.stream, neighbour.small), device(neighbour.device) {}
};

// One device's allocator. All public members lock `mu_`; the *_locked helpers expect it held.
class DeviceCachingAllocator final : public Allocator {
 public:
  explicit DeviceCachingAllocator(int device) : device_(device) {}

  // Allocator: a block for the calling thread's current stream on this device.
  void* allocate(size_t nbytes) override;
  void deallocate(void* ptr, size_t nbytes) override;  // never throws (called from destructors)
  Device device() const override { return Device::cuda(device_); }

  void* malloc(size_t nbytes, cudaStream_t stream);  // throws OutOfMemoryError / DeviceError
  void free(void* ptr) noexcept;
  // Records that `stream` uses the live block at `ptr`; false when ptr is not a live block of this device.
  bool record_stream(void* ptr, cudaStream_t stream);
  void empty_cache();  // waits for pending frees, then cudaFrees every segment that is one free block
  MemoryStats stats();
  void reset_peak_stats();
  void set_limit(size_t bytes);  // a cap on reserved bytes (set_memory_limit); 0: none
  size_t limit();

 private:
  Block* new_segment_locked(cudaStream_t stream, size_t size);
  [[noreturn]] void throw_oom_locked(size_t size, bool over_limit);
  void insert_events_locked(Block* block) noexcept;  // pending free: one event per stream in stream_uses
  void process_events_locked();                      // pending blocks whose events completed -> free
  void synchronize_and_free_events_locked();         // wait for every pending event
  void release_cached_locked();                      // cudaFree every segment that is one free block
  cudaEvent_t get_event_locked();

  const int device_;
  std::mutex mu_;
  ember::detail::BlockPool<Block> pool_;                // the free blocks, best fit, split, merge
  std::unordered_map<void*, Block*> allocated_;         // live blocks by pointer
  std::deque<std::pair<cudaEvent_t, Block*>> pending_;  // events guarding pending blocks
  std::vector<cudaEvent_t> free_events_;                // recycled events
  size_t pending_blocks_ = 0;

  Stat allocated_bytes_, requested_bytes_, reserved_bytes_, segments_, active_blocks_;
  size_t limit_ = 0;
  uint64_t num_allocs_ = 0, num_frees_ = 0, cache_hits_ = 0;
  uint64_t num_cuda_mallocs_ = 0, num_cuda_frees_ = 0, num_alloc_retries_ = 0, num_ooms_ = 0;
};

// The allocator of each device, created on first use and never destroyed (storages freed during static
// destruction must still find it). Throws DeviceError when CUDA is unusable or the index is out of range.
DeviceCachingAllocator& caching_allocator(int device);
// Every device's allocator (empty when CUDA is unusable); creating them makes no CUDA call.
const std::vector<DeviceCachingAllocator*>& all_caching_allocators();

// Byte counts for messages: "2.00 GiB" (precision 2) or "79.1 GiB" (precision 1).

}  // namespace ember::cuda::detail
