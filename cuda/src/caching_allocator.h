// defines: DeviceCachingAllocator, the per-device CUDA caching allocator (Block, BlockPool, Stat, the
// record_stream bookkeeping), distilled from the ideas of PyTorch's CUDACachingAllocator: size-rounded
// blocks carved from cudaMalloc'd segments, best-fit from a size-ordered set, split and merge of neighbours,
// blocks tied to the stream they were allocated on, and free-the-cache-and-retry on out-of-memory.
// Left out on purpose: graph pools, expandable segments, IPC, max_split_size, garbage-collection thresholds.
// Internal to cuda/src (includes the CUDA runtime header).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ember/core/allocator.h"
#include "ember/cuda/memory.h"
#include "ember/internal/allocator_sizes.h"

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

struct BlockPool;

// CONVENTION:
//  - A segment is the memory of one cudaMalloc. Its blocks tile it exactly, linked by prev/next in address
//    order; the block with prev == nullptr starts at the cudaMalloc pointer. A segment is given back
//    (cudaFree) only when it is one free block (prev == next == nullptr).
//  - `size` is a multiple of kMinBlockSize. `stream` and `pool` never change: a block is only ever handed
//    out for an allocation on its own stream, and stays in the pool (small or large) of its segment.
//  - Every block is in exactly one state:
//      allocated  (allocated == true)            — in DeviceCachingAllocator::allocated_, owned by a user;
//      pending    (!allocated, event_count > 0)  — freed, but other streams that used it (record_stream)
//                                                  may still run; in no container but the event queue;
//      free       (!allocated, event_count == 0) — in pool->blocks, ready to be reused or merged.
//  - Two free blocks are never neighbours: a block that becomes free absorbs its free neighbours first.
//  - stream_uses holds the streams other than `stream` that used the block while allocated; it is empty
//    unless the block is allocated.
struct Block {
  int device = 0;
  cudaStream_t stream = nullptr;  // the stream it was allocated on
  size_t size = 0;                // bytes
  size_t requested = 0;           // the bytes asked for (unrounded), while allocated
  BlockPool* pool = nullptr;
  void* ptr = nullptr;
  bool allocated = false;
  int event_count = 0;    // outstanding events before a pending block becomes free
  Block* prev = nullptr;  // neighbours within the segment
  Block* next = nullptr;
  std::unordered_set<cudaStream_t> stream_uses;

  Block(int device_, cudaStream_t stream_, size_t size_, BlockPool* pool_, void* ptr_)
      : device(device_), stream(stream_), size(size_), pool(pool_), ptr(ptr_) {}
  bool is_split() const { return prev != nullptr || next != nullptr; }
};

// Orders by (stream, size, address): lower_bound({stream, size, nullptr}) is the best fit on that stream.
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return reinterpret_cast<uintptr_t>(a->stream) < reinterpret_cast<uintptr_t>(b->stream);
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
  }
};

struct BlockPool {
  explicit BlockPool(bool small) : is_small(small) {}
  std::set<Block*, BlockOrder> blocks;  // free blocks only
  const bool is_small;
};

// One device's allocator. All public members lock `mu_`; the *_locked helpers expect it held.
class DeviceCachingAllocator final : public Allocator {
 public:
  explicit DeviceCachingAllocator(int device) : device_(device), small_(true), large_(false) {}

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
  Block* find_free_block_locked(BlockPool& pool, cudaStream_t stream, size_t size);
  Block* new_segment_locked(BlockPool& pool, cudaStream_t stream, size_t size);
  [[noreturn]] void throw_oom_locked(size_t size, bool over_limit);
  size_t largest_free_block_locked() const;
  void split_locked(Block* block, size_t size);
  void free_block_locked(Block* block);  // a freed block (no pending uses) back into its pool
  void merge_locked(Block* dst, Block* src);
  void insert_events_locked(Block* block) noexcept;  // pending free: one event per stream in stream_uses
  void process_events_locked();                      // pending blocks whose events completed -> free
  void synchronize_and_free_events_locked();         // wait for every pending event
  void release_cached_locked();                      // cudaFree every segment that is one free block
  cudaEvent_t get_event_locked();

  const int device_;
  std::mutex mu_;
  BlockPool small_;
  BlockPool large_;
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
