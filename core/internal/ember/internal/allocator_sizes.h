// defines: the size rules of Ember's two caching allocators, in one place, because three parties must agree
// on them: the CPU caching allocator (core/src/cpu_allocator.cpp), the CUDA one (cuda/src/caching_allocator.cpp)
// and memory::plan's simulation of both (core/src/memory_simulation.h; the CUDA one's policy is block_pool.h, shared),
// which predicts what they will hold.
// Plain C++ with no other header: nvcc-compiled code may read it.
#pragma once
#include <cstddef>

namespace ember::detail {

// --- CPU: multiples of 64 bytes up to 512, then 8 size classes per power of two (at most 12.5% slack), so
// blocks freed by one step fit the same requests in the next.
inline constexpr size_t kCpuAlign = 64;
inline constexpr size_t cpu_size_class(size_t n) {
  if (n <= 512) return (n + kCpuAlign - 1) / kCpuAlign * kCpuAlign;
  size_t p = 1;
  while (p < n) p <<= 1;       // next power of two
  size_t step = (p >> 1) / 8;  // 8 classes between p/2 and p
  return (n + step - 1) / step * step;
}

// --- CUDA (Note [CUDA caching allocator] in ember/cuda/memory.h).
inline constexpr size_t kCudaMinBlockSize = 512;         // every block size is a multiple of this
inline constexpr size_t kCudaSmallSize = 1u << 20;       // requests <= 1 MiB come from the small pool
inline constexpr size_t kCudaSmallBuffer = 2u << 20;     // small-pool segments are 2 MiB
inline constexpr size_t kCudaLargeBuffer = 20u << 20;    // segment for requests in (1 MiB, 10 MiB)
inline constexpr size_t kCudaMinLargeAlloc = 10u << 20;  // from here on, a request gets its own segment
inline constexpr size_t kCudaRoundLarge = 2u << 20;      // ... rounded up to 2 MiB

// A request rounded up to a multiple of kCudaMinBlockSize.
inline constexpr size_t cuda_round_size(size_t nbytes) {
  if (nbytes < kCudaMinBlockSize) return kCudaMinBlockSize;
  return (nbytes + kCudaMinBlockSize - 1) / kCudaMinBlockSize * kCudaMinBlockSize;
}
// The cudaMalloc size for a (rounded) request that missed the cache.
inline constexpr size_t cuda_segment_size(size_t rounded) {
  if (rounded <= kCudaSmallSize) return kCudaSmallBuffer;
  if (rounded < kCudaMinLargeAlloc) return kCudaLargeBuffer;
  return (rounded + kCudaRoundLarge - 1) / kCudaRoundLarge * kCudaRoundLarge;
}
// Whether a free block handed out for a smaller request is split: any leftover in the small pool; in the large
// pool only more than 1 MiB (smaller pieces of a large segment would only fragment it).
inline constexpr bool cuda_split_worth(bool small_pool, size_t rest) {
  return small_pool ? rest >= kCudaMinBlockSize : rest > kCudaSmallSize;
}

}  // namespace ember::detail
