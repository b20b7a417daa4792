// defines: the public memory API of memory.h for a build with CUDA: per-device statistics of the caching
// allocator, memory_summary's table, mem_get_info and empty_cache. (stub.cpp has the no-CUDA versions;
// the pinned host functions live in host_allocator.cpp.)
#include "ember/cuda/memory.h"

#include <cuda_runtime.h>

#include <iomanip>
#include <sstream>

#include "caching_allocator.h"
#include "check.h"
#include "device_guard.h"
#include "runtime_internal.h"

namespace ember::cuda {
namespace {
detail::DeviceCachingAllocator& allocator_for(const char* op, int device) {
  return detail::caching_allocator(detail::resolve_device(op, device));
}
}  // namespace

size_t memory_allocated(int device) { return allocator_for("cuda::memory_allocated", device).stats().allocated_bytes; }
size_t max_memory_allocated(int device) {
  return allocator_for("cuda::max_memory_allocated", device).stats().peak_allocated_bytes;
}
size_t memory_reserved(int device) { return allocator_for("cuda::memory_reserved", device).stats().reserved_bytes; }
size_t max_memory_reserved(int device) {
  return allocator_for("cuda::max_memory_reserved", device).stats().peak_reserved_bytes;
}
void reset_peak_memory_stats(int device) { allocator_for("cuda::reset_peak_memory_stats", device).reset_peak_stats(); }
MemoryStats memory_stats(int device) { return allocator_for("cuda::memory_stats", device).stats(); }

std::pair<size_t, size_t> mem_get_info(int device) {
  const int d = detail::resolve_device("cuda::mem_get_info", device);
  detail::DeviceGuard guard(d);
  size_t free_bytes = 0, total_bytes = 0;
  EMBER_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return {free_bytes, total_bytes};
}

void empty_cache() {
  detail::resolve_device("cuda::empty_cache", -1);  // throws the reason when CUDA is unusable
  for (detail::DeviceCachingAllocator* a : detail::all_caching_allocators()) a->empty_cache();
}

std::string memory_summary(int device) {
  const int d = detail::resolve_device("cuda::memory_summary", device);
  const MemoryStats s = detail::caching_allocator(d).stats();
  const auto [free_bytes, total_bytes] = mem_get_info(d);
  auto bytes = [](size_t b) { return detail::format_bytes(b, 2); };
  const std::string rule(64, '-');
  std::ostringstream os;
  os << "ember CUDA memory summary, cuda:" << d << "\n"
     << rule << "\n"
     << std::left << std::setw(24) << " Metric" << "| " << std::setw(18) << "Current" << "| " << "Peak\n"
     << rule << "\n";
  auto row = [&](const char* name, const std::string& cur, const std::string& peak) {
    os << ' ' << std::left << std::setw(23) << name << "| " << std::setw(18) << cur << "| " << peak << "\n";
  };
  row("Allocated memory", bytes(s.allocated_bytes), bytes(s.peak_allocated_bytes));
  row("Reserved memory", bytes(s.reserved_bytes), bytes(s.peak_reserved_bytes));
  row("Cached memory", bytes(s.reserved_bytes - s.allocated_bytes), "");
  row("Segments", std::to_string(s.segments), std::to_string(s.peak_segments));
  row("Active blocks", std::to_string(s.active_blocks), "");
  row("Pending frees", std::to_string(s.pending_free_blocks), "");
  os << rule << "\n"
     << " Allocations:       " << s.num_allocs << " (cache hits: " << s.cache_hits << "), frees: " << s.num_frees
     << "\n"
     << " cudaMalloc calls:  " << s.num_cuda_mallocs << ", cudaFree calls: " << s.num_cuda_frees << "\n"
     << " OOM retries:       " << s.num_alloc_retries << ", OOMs: " << s.num_ooms << "\n"
     << " Device memory:     " << bytes(free_bytes) << " free of " << bytes(total_bytes) << "\n"
     << rule << "\n";
  return os.str();
}

}  // namespace ember::cuda
