// defines: Allocator (the interface every device's memory comes from) and the CPU caching allocator's
// public face: cpu_memory_stats(), cpu_empty_cache(), cpu_reset_peak_memory_stats().
//
// Note [CPU caching allocator]: freed blocks are kept in per-size-class free lists (8 classes per power of
// two, 64-byte aligned) and handed out again, so a steady training loop stops calling malloc after its
// first step. cpu_empty_cache() returns the cached blocks to the system. Blocks of 2 MiB or more start on a
// 2 MiB boundary and, on Linux, ask for transparent huge pages (fewer TLB misses in passes over activations).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "ember/core/device.h"

namespace ember {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;  // nullptr for 0 bytes; throws OutOfMemoryError
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual Device device() const = 0;
  // True for memory::plan's simulated allocators: their pointers are placeholders with no memory behind them.
  virtual bool is_meta() const { return false; }
};

struct CpuMemoryStats {
  size_t bytes_in_use = 0;       // bytes held by live storages (rounded to size classes)
  size_t peak_bytes_in_use = 0;  // high-water mark of bytes_in_use since the last reset
  size_t bytes_cached = 0;       // bytes in free lists, ready for reuse
  uint64_t requests = 0;         // allocate() calls with nbytes > 0
  uint64_t cache_hits = 0;       // requests served from the free lists
  uint64_t system_allocs = 0;    // calls to the system allocator (aligned_alloc)
  uint64_t system_frees = 0;     // blocks returned to the system (by cpu_empty_cache)
  uint64_t num_ooms = 0;         // OutOfMemoryErrors thrown
  size_t limit_bytes = 0;        // set_memory_limit(Device::cpu(), ...); 0: none
  size_t scratch_bytes = 0;      // the CPU kernels' scratch arenas (GEMM packing, conv column buffers): kept for
                                 // reuse, grow-only, outside bytes_in_use and the limit
};

Allocator& cpu_allocator();
CpuMemoryStats cpu_memory_stats();
void cpu_empty_cache();
void cpu_reset_peak_memory_stats();
std::string cpu_memory_summary();

namespace detail {
// "1.50 GiB": bytes in the largest binary unit below 1024 of them, with `precision` decimals ("512 B" for bytes).
std::string format_bytes(size_t bytes, int precision = 2);
// The CPU kernels' scratch arenas (core/cpu/scratch.cpp) draw from here: counted in CpuMemoryStats::scratch_bytes.
void* cpu_scratch_allocate(size_t nbytes);
void cpu_scratch_free(void* p, size_t nbytes);
}  // namespace detail

}  // namespace ember
