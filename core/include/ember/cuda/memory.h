// defines: the public face of ember's CUDA memory management: per-device statistics of the caching
// allocator (memory_allocated, memory_reserved and their peaks, MemoryStats, memory_summary), empty_cache(),
// mem_get_info(), and the stats of the cached pinned host allocator. No CUDA headers: this compiles in every
// build. Without a CUDA build, or on a machine with no usable GPU, the calls are device-agnostic as PyTorch's: the
// statistics (memory_allocated, memory_reserved, their peaks, memory_stats, host_memory_stats) read 0,
// empty_cache / host_empty_cache / the peak resets do nothing, and memory_summary says "CUDA is not available:
// <reason>"; mem_get_info and set_per_process_memory_fraction throw DeviceError with the reason
// (cuda::unavailable_reason()), as does cuda::synchronize (cuda.h).
//
// Note [CUDA caching allocator]: device memory is obtained from cudaMalloc in segments (2 MiB for requests up
// to 1 MiB; 20 MiB for requests up to 10 MiB; the request rounded up to 2 MiB above that) and carved into
// blocks that are cached when freed, so a steady training loop stops calling cudaMalloc after its first step.
// "allocated" counts bytes in live blocks: each request rounded up to 512 bytes (a block from the large pool is
// handed out whole when splitting it would leave 1 MiB or less). "reserved" counts bytes in segments held
// from cudaMalloc (allocated + cached). A block is reused only by allocations on the stream it was first
// allocated on. empty_cache() returns unused segments to the driver.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "ember/core/device.h"
#include "ember/core/error.h"

namespace ember::cuda {

// One device's allocator statistics. "peak" values are high-water marks since the last
// reset_peak_memory_stats(); counters are totals since the process started.
struct MemoryStats {
  size_t allocated_bytes = 0;  // bytes in live blocks (block sizes)
  size_t peak_allocated_bytes = 0;
  size_t reserved_bytes = 0;  // bytes in segments held from cudaMalloc
  size_t peak_reserved_bytes = 0;
  size_t active_blocks = 0;  // live blocks
  size_t segments = 0;       // segments held from cudaMalloc
  size_t peak_segments = 0;
  size_t pending_free_blocks = 0;  // freed blocks waiting for other streams' work (record_stream)
  uint64_t num_allocs = 0;         // allocations with nbytes > 0
  uint64_t num_frees = 0;
  uint64_t cache_hits = 0;         // allocations served from cached blocks (no cudaMalloc)
  uint64_t num_cuda_mallocs = 0;   // successful cudaMalloc calls
  uint64_t num_cuda_frees = 0;     // cudaFree calls
  uint64_t num_alloc_retries = 0;  // cudaMalloc failures or limit hits answered by freeing the cache and retrying
  uint64_t num_ooms = 0;           // OutOfMemoryErrors thrown
  size_t requested_bytes = 0;      // bytes asked for by live allocations, before rounding
  size_t peak_requested_bytes = 0;
  size_t largest_free_block = 0;  // the biggest cached free block (what the next request can get without cudaMalloc)
  size_t free_blocks_small = 0;   // cached free blocks in the small (<= 1 MiB) and large pools
  size_t free_blocks_large = 0;
  size_t limit_bytes = 0;  // set_memory_limit / set_per_process_memory_fraction; 0: none
};

// `device` -1 means the current device.
size_t memory_allocated(int device = -1);
size_t max_memory_allocated(int device = -1);
size_t memory_reserved(int device = -1);
size_t max_memory_reserved(int device = -1);
void reset_peak_memory_stats(int device = -1);
// Caps the bytes this process's allocator reserves on `device` at fraction * its total memory (PyTorch's
// torch.cuda.set_per_process_memory_fraction); past it, OutOfMemoryError. 1 removes the cap. Same as
// set_memory_limit(Device::cuda(device), bytes) (ember/core/memory_context.h).
void set_per_process_memory_fraction(double fraction, int device = -1);
inline void set_per_process_memory_fraction(double fraction, Device device) {
  set_per_process_memory_fraction(fraction, device.index());
}
MemoryStats memory_stats(int device = -1);
// A readable table (allocated/reserved current and peak, segments, cudaMalloc calls, cache hits).
std::string memory_summary(int device = -1);
// (free, total) bytes of the device as the driver reports them (cudaMemGetInfo).
std::pair<size_t, size_t> mem_get_info(int device = -1);
// Returns every unused cached segment on every device to the driver (waits for pending cross-stream frees).
void empty_cache();

// Cached pinned (page-locked) host memory, used by Tensor::pin_memory() and non-blocking copies.
struct HostMemoryStats {
  size_t allocated_bytes = 0;  // bytes in live pinned blocks (rounded sizes)
  size_t peak_allocated_bytes = 0;
  size_t reserved_bytes = 0;  // bytes held from cudaHostAlloc (allocated + cached)
  size_t peak_reserved_bytes = 0;
  uint64_t num_allocs = 0;
  uint64_t num_frees = 0;
  uint64_t cache_hits = 0;
  uint64_t num_host_allocs = 0;  // cudaHostAlloc calls
  uint64_t num_host_frees = 0;   // cudaFreeHost calls
};
HostMemoryStats host_memory_stats();
void reset_peak_host_memory_stats();
// Returns cached pinned blocks to the system (waits for copies that still use them).
void host_empty_cache();

}  // namespace ember::cuda

// (In ember::detail, not ember::cuda::detail: a public cuda::detail would hide ember::detail::str inside
// namespace ember::cuda.)
namespace ember::detail {
inline int cuda_index(Device d, const char* op) {
  EMBER_CHECK_DEVICE(d.is_cuda(), op, ": expected a CUDA device, got ", d.to_string());
  return d.index();
}
}  // namespace ember::detail

namespace ember::cuda {

inline size_t memory_allocated(Device d) {
  return memory_allocated(ember::detail::cuda_index(d, "cuda::memory_allocated"));
}
inline size_t max_memory_allocated(Device d) {
  return max_memory_allocated(ember::detail::cuda_index(d, "cuda::max_memory_allocated"));
}
inline size_t memory_reserved(Device d) {
  return memory_reserved(ember::detail::cuda_index(d, "cuda::memory_reserved"));
}
inline size_t max_memory_reserved(Device d) {
  return max_memory_reserved(ember::detail::cuda_index(d, "cuda::max_memory_reserved"));
}
inline void reset_peak_memory_stats(Device d) {
  reset_peak_memory_stats(ember::detail::cuda_index(d, "cuda::reset_peak_memory_stats"));
}
inline MemoryStats memory_stats(Device d) { return memory_stats(ember::detail::cuda_index(d, "cuda::memory_stats")); }
inline std::string memory_summary(Device d) {
  return memory_summary(ember::detail::cuda_index(d, "cuda::memory_summary"));
}
inline std::pair<size_t, size_t> mem_get_info(Device d) {
  return mem_get_info(ember::detail::cuda_index(d, "cuda::mem_get_info"));
}

}  // namespace ember::cuda
