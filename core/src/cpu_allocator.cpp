// defines: the CPU caching allocator (see Note [CPU caching allocator] in allocator.h) and its stats.
#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "ember/core/allocator.h"
#include "ember/core/error.h"
#include "ember/core/memory_context.h"
#include "ember/core/memory_history.h"
#include "ember/internal/allocator_sizes.h"

namespace ember {
namespace detail {
std::atomic<size_t> g_scratch_bytes{0};  // CpuMemoryStats::scratch_bytes
}
namespace {

constexpr size_t kAlign = detail::kCpuAlign;
using detail::cpu_size_class;  // the size classes (ember/internal/allocator_sizes.h, shared with memory::plan)

// A new block from the system. Blocks of 2 MiB or more start on a 2 MiB boundary and ask for transparent huge
// pages over the whole 2 MiB pages they span (Linux, where THP is "madvise" as on the build machines; a block's tail
// stays in 4 KiB pages, so it never holds memory past its size class). A training step streams through a few
// hundred MiB of activations, and with 4 KiB pages each pass over a 2 MiB tensor takes ~512 TLB misses: charlm's
// step (tensors of 2 and 8 MiB) ran 4-5% faster with huge pages on one core of the Xeon model 167, at the same
// peak RSS. Aligning costs address space only (up to 2 MiB per block, never touched).
void* system_alloc(size_t sz) {
#ifdef MADV_HUGEPAGE
  constexpr size_t kHugePage = size_t{2} << 20;
  if (sz >= kHugePage) {
    void* p = nullptr;
    if (posix_memalign(&p, kHugePage, sz) != 0) return nullptr;
    madvise(p, sz / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only: its failure changes nothing
    return p;
  }
#endif
  return std::aligned_alloc(kAlign, sz);
}

class CpuCachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    size_t sz = cpu_size_class(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.requests;
    void* p = nullptr;
    auto it = free_.find(sz);
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      stats_.bytes_cached -= sz;
      ++stats_.cache_hits;
    } else {
      // Past the limit (set_memory_limit) the cache goes back to the system first; the request must then fit
      // beside the tensors in use.
      if (limit_ && stats_.bytes_in_use + stats_.bytes_cached + sz > limit_) {
        release_all_locked();
        if (stats_.bytes_in_use + sz > limit_) throw_oom_locked(sz, true);
      }
      p = system_alloc(sz);
      if (!p) {  // give the cache back to the system and try once more
        release_all_locked();
        p = system_alloc(sz);
      }
      if (!p) throw_oom_locked(sz, false);
      ++stats_.system_allocs;
    }
    stats_.bytes_in_use += sz;
    if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
    return p;
  }
  void deallocate(void* p, size_t nbytes) override {
    if (!p) return;
    size_t sz = cpu_size_class(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    free_[sz].push_back(p);
    stats_.bytes_in_use -= sz;
    stats_.bytes_cached += sz;
  }
  Device device() const override { return Device::cpu(); }

  CpuMemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    release_all_locked();
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }
  void set_limit(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    limit_ = bytes;
    stats_.limit_bytes = bytes;
  }
  size_t limit() {
    std::lock_guard<std::mutex> lock(mu_);
    return limit_;
  }

 private:
  // What was asked, where (phase, module, backward op), the allocator's state, and what would help, computed
  // from that state. Nothing has changed but the cache given back: the allocator goes on as before.
  [[noreturn]] void throw_oom_locked(size_t sz, bool over_limit) {
    ++stats_.num_ooms;
    auto fmt = [](size_t b) { return detail::format_bytes(b, 1); };
    const size_t in_use = stats_.bytes_in_use;
    std::string advice;
    if (over_limit) {
      const size_t short_by = in_use + sz - limit_;
      const double peak_ratio = static_cast<double>(in_use + sz) / static_cast<double>(limit_);
      advice = detail::str("; this step needs at least ", fmt(short_by), " more than the limit (", std::fixed,
                           std::setprecision(2), peak_ratio, "x): ", memory::phase_advice(),
                           "lower the batch size or raise the limit");
    } else {
      advice = "; the system refused the memory: lower the batch size or free tensors you keep";
    }
    // What the tensors in use are (memory_history.h), and what would shrink the largest share of them.
    const std::string advice2 = memory::category_advice(Device::cpu());
    if (!advice2.empty())
      advice += detail::str(". In use: ", memory::describe_categories(Device::cpu()), "; ", advice2);
    throw OutOfMemoryError(detail::str(
        "CPU out of memory: tried to allocate ", detail::format_bytes(sz, 2), memory::describe_context(), " (",
        fmt(in_use), " in use by ember, ", fmt(stats_.bytes_cached), " cached",
        limit_ ? detail::str(", limit ", fmt(limit_), " set by set_memory_limit") : std::string(), ")", advice));
  }

  void release_all_locked() {
    for (auto& [sz, list] : free_) {
      for (void* p : list) std::free(p);
      stats_.system_frees += list.size();
      stats_.bytes_cached -= sz * list.size();
      list.clear();
    }
  }
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  CpuMemoryStats stats_;
  size_t limit_ = 0;
};

// Never destroyed: storages freed during static destruction must still find their allocator.
CpuCachingAllocator& instance() {
  static auto* a = new CpuCachingAllocator();
  return *a;
}

}  // namespace

Allocator& cpu_allocator() { return instance(); }
CpuMemoryStats cpu_memory_stats() {
  CpuMemoryStats s = instance().stats();
  s.scratch_bytes = detail::g_scratch_bytes.load(std::memory_order_relaxed);
  return s;
}
void cpu_empty_cache() { instance().empty_cache(); }
void cpu_reset_peak_memory_stats() { instance().reset_peak(); }
void cpu_set_memory_limit(size_t bytes) { instance().set_limit(bytes); }
size_t cpu_memory_limit() { return instance().limit(); }

std::string cpu_memory_summary() {
  CpuMemoryStats s = cpu_memory_stats();
  std::ostringstream os;
  os << "ember CPU memory\n"
     << "  in use:        " << detail::format_bytes(s.bytes_in_use) << "\n"
     << "  peak in use:   " << detail::format_bytes(s.peak_bytes_in_use) << "\n"
     << "  cached (free): " << detail::format_bytes(s.bytes_cached) << "\n"
     << "  requests:      " << s.requests << " (" << s.cache_hits << " from the cache)\n"
     << "  system allocs: " << s.system_allocs << ", system frees: " << s.system_frees << "\n"
     << "  kernel scratch: " << detail::format_bytes(s.scratch_bytes)
     << " (packing and column buffers, kept for reuse)\n"
     << "  limit:         " << (s.limit_bytes ? detail::format_bytes(s.limit_bytes) : std::string("none"))
     << ", out-of-memory errors: " << s.num_ooms << "\n";
  return os.str();
}

namespace detail {
void* cpu_scratch_allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  void* p = std::aligned_alloc(kAlign, cpu_size_class(nbytes));
  if (!p)
    throw OutOfMemoryError(detail::str("CPU out of memory: a kernel's scratch buffer of ", format_bytes(nbytes),
                                       " could not be had", memory::describe_context(), " (",
                                       format_bytes(cpu_memory_stats().bytes_in_use, 1), " in use by tensors)"));
  g_scratch_bytes.fetch_add(cpu_size_class(nbytes), std::memory_order_relaxed);
  return p;
}
void cpu_scratch_free(void* p, size_t nbytes) {
  if (!p) return;
  std::free(p);
  g_scratch_bytes.fetch_sub(cpu_size_class(nbytes), std::memory_order_relaxed);
}

std::string format_bytes(size_t bytes, int precision) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream os;
  os << std::fixed << std::setprecision(u ? precision : 0) << v << ' ' << units[u];
  return os.str();
}
}  // namespace detail

}  // namespace ember
