// defines: the CPU caching allocator (see Note [CPU caching allocator] in allocator.h) and its stats.
#include <cstdlib>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "ember/core/allocator.h"
#include "ember/core/error.h"

namespace ember {
namespace {

constexpr size_t kAlign = 64;

// Rounds a request up to its size class: multiples of 64 bytes up to 512, then 8 classes per power of two
// (at most 12.5% slack), so blocks freed by one step fit the same requests in the next.
size_t size_class(size_t n) {
  if (n <= 512) return (n + kAlign - 1) / kAlign * kAlign;
  size_t p = 1;
  while (p < n) p <<= 1;       // next power of two
  size_t step = (p >> 1) / 8;  // 8 classes between p/2 and p
  return (n + step - 1) / step * step;
}

class CpuCachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    size_t sz = size_class(nbytes);
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
      p = std::aligned_alloc(kAlign, sz);
      if (!p) {  // give the cache back to the system and try once more
        release_all_locked();
        p = std::aligned_alloc(kAlign, sz);
      }
      EMBER_CHECK(p != nullptr, OutOfMemoryError, "CPU out of memory: tried to allocate ", detail::format_bytes(sz),
                  " (", detail::format_bytes(stats_.bytes_in_use), " in use by ember)");
      ++stats_.system_allocs;
    }
    stats_.bytes_in_use += sz;
    if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
    return p;
  }
  void deallocate(void* p, size_t nbytes) override {
    if (!p) return;
    size_t sz = size_class(nbytes);
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

 private:
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
};

// Never destroyed: storages freed during static destruction must still find their allocator.
CpuCachingAllocator& instance() {
  static auto* a = new CpuCachingAllocator();
  return *a;
}

}  // namespace

Allocator& cpu_allocator() { return instance(); }
CpuMemoryStats cpu_memory_stats() { return instance().stats(); }
void cpu_empty_cache() { instance().empty_cache(); }
void cpu_reset_peak_memory_stats() { instance().reset_peak(); }

std::string cpu_memory_summary() {
  CpuMemoryStats s = cpu_memory_stats();
  std::ostringstream os;
  os << "ember CPU memory\n"
     << "  in use:        " << detail::format_bytes(s.bytes_in_use) << "\n"
     << "  peak in use:   " << detail::format_bytes(s.peak_bytes_in_use) << "\n"
     << "  cached (free): " << detail::format_bytes(s.bytes_cached) << "\n"
     << "  requests:      " << s.requests << " (" << s.cache_hits << " from the cache)\n"
     << "  system allocs: " << s.system_allocs << ", system frees: " << s.system_frees << "\n";
  return os.str();
}

namespace detail {
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
