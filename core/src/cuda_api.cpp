// defines: the public CUDA API of ember/cuda/cuda.h and memory.h — device queries and selection, the settings
// (scalar-access guard, TF32), memory statistics and memory_summary() — for every build, on top of the CUDA
// plugin's hooks (ember/internal/cuda_hooks.h). Without the plugin (no CUDA build, no CUDA libraries on this
// machine) or without a usable device, is_available() is false, device_count() is 0, the memory statistics read 0,
// the cache calls do nothing, and every other call that needs a device throws DeviceError with the reason. Streams and
// events: cuda_streams.cpp.
#include <atomic>
#include <iomanip>
#include <sstream>

#include "cuda_api_internal.h"
#include "ember/core/allocator.h"
#include "ember/core/memory_context.h"
#include "ember/cuda/cuda.h"
#include "ember/cuda/memory.h"

namespace ember::cuda {

namespace detail_api {
ember::detail::CudaHooks& usable(const char* op) {
  std::string why;
  ember::detail::CudaHooks* h = ember::detail::cuda_hooks(&why);
  EMBER_CHECK_DEVICE(h, op, ": ", why);
  EMBER_CHECK_DEVICE(h->device_count() > 0, op, ": ", h->unavailable_reason());
  return *h;
}

On on_device(const char* op, int device) {
  ember::detail::CudaHooks& h = usable(op);
  if (device == -1) device = h.current_device();
  EMBER_CHECK_DEVICE(device >= 0 && device < h.device_count(), op, ": device index ", device, " is out of range (",
                     h.device_count(), " CUDA device(s))");
  return {h, device};
}
}  // namespace detail_api

using detail_api::on_device;
using detail_api::usable;

// --- devices

bool is_available() {
  ember::detail::CudaHooks* h = ember::detail::cuda_hooks();
  return h && h->device_count() > 0;
}
int device_count() {
  ember::detail::CudaHooks* h = ember::detail::cuda_hooks();
  return h ? h->device_count() : 0;
}
std::string unavailable_reason() {
  std::string why;
  ember::detail::CudaHooks* h = ember::detail::cuda_hooks(&why);
  return h ? h->unavailable_reason() : why;
}
uint64_t host_sync_count() {
  ember::detail::CudaHooks* h = ember::detail::cuda_hooks();
  return h ? h->host_sync_count() : 0;
}
int current_device() { return on_device("cuda::current_device", -1).device; }
void set_device(int index) {
  // -1 means "the current device" inside on_device, not for the user
  EMBER_CHECK_DEVICE(index >= 0, "cuda::set_device: device index ", index, " is out of range (", device_count(),
                     " CUDA device(s))");
  auto [h, d] = on_device("cuda::set_device", index);
  h.set_device(d);
}
std::string get_device_name(int index) {
  EMBER_CHECK_DEVICE(index >= 0, "cuda::get_device_name: device index ", index, " is out of range (", device_count(),
                     " CUDA device(s))");
  auto [h, d] = on_device("cuda::get_device_name", index);
  return h.device_name(d);
}
void synchronize() { usable("cuda::synchronize").synchronize_current_device(); }

// --- settings, process-wide, in every build

namespace {
std::atomic<bool> g_allow_scalar{false};
std::atomic<bool> g_allow_tf32{false};
std::atomic<bool> g_cudnn_benchmark{false};
}  // namespace
void set_allow_scalar(bool allow) { g_allow_scalar.store(allow); }
bool allow_scalar() { return g_allow_scalar.load(); }
void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }
void set_cudnn_benchmark(bool enabled) { g_cudnn_benchmark.store(enabled); }
bool cudnn_benchmark() { return g_cudnn_benchmark.load(); }

// --- memory

// Device-agnostic memory calls (PyTorch's rule): without a usable device the statistics read 0 and the cache calls
// do nothing, so a loop written for either device may call them unconditionally. With one, the index is checked.
namespace {
MemoryStats stats_or_zero(const char* op, int device) {
  if (!is_available()) return {};
  auto [h, d] = on_device(op, device);
  return h.memory_stats(d);
}
}  // namespace

MemoryStats memory_stats(int device) { return stats_or_zero("cuda::memory_stats", device); }
size_t memory_allocated(int device) { return stats_or_zero("cuda::memory_allocated", device).allocated_bytes; }
size_t max_memory_allocated(int device) {
  return stats_or_zero("cuda::max_memory_allocated", device).peak_allocated_bytes;
}
size_t memory_reserved(int device) { return stats_or_zero("cuda::memory_reserved", device).reserved_bytes; }
size_t max_memory_reserved(int device) {
  return stats_or_zero("cuda::max_memory_reserved", device).peak_reserved_bytes;
}
void reset_peak_memory_stats(int device) {
  if (!is_available()) return;
  auto [h, d] = on_device("cuda::reset_peak_memory_stats", device);
  h.reset_peak_memory_stats(d);
}
std::pair<size_t, size_t> mem_get_info(int device) {
  auto [h, d] = on_device("cuda::mem_get_info", device);
  return h.mem_get_info(d);
}
void empty_cache() {
  if (is_available()) usable("cuda::empty_cache").empty_cache();
}
void set_per_process_memory_fraction(double fraction, int device) {
  EMBER_CHECK_VALUE(fraction >= 0 && fraction <= 1,
                    "cuda::set_per_process_memory_fraction: fraction must be in [0, 1], "
                    "got ",
                    fraction);
  auto [h, d] = on_device("cuda::set_per_process_memory_fraction", device);
  const size_t total = h.mem_get_info(d).second;
  h.set_memory_limit(
      d, fraction >= 1 ? 0 : std::max<size_t>(1, static_cast<size_t>(fraction * static_cast<double>(total))));
}
HostMemoryStats host_memory_stats() {
  return is_available() ? usable("cuda::host_memory_stats").host_memory_stats() : HostMemoryStats{};
}
void reset_peak_host_memory_stats() {
  if (is_available()) usable("cuda::reset_peak_host_memory_stats").reset_peak_host_memory_stats();
}
void host_empty_cache() {
  if (is_available()) usable("cuda::host_empty_cache").host_empty_cache();
}

std::string memory_summary(int device) {
  if (!is_available()) return "CUDA is not available: " + unavailable_reason() + "\n";
  auto [h, d] = on_device("cuda::memory_summary", device);
  const MemoryStats s = h.memory_stats(d);
  const auto [free_bytes, total_bytes] = h.mem_get_info(d);
  auto bytes = [](size_t b) { return ember::detail::format_bytes(b, 2); };
  const std::string rule(64, '-');
  std::ostringstream os;
  os << "ember CUDA memory summary, cuda:" << d << "\n"
     << rule << "\n"
     << std::left << std::setw(24) << " Metric"
     << "| " << std::setw(18) << "Current"
     << "| "
     << "Peak\n"
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
  row("Requested memory", bytes(s.requested_bytes), bytes(s.peak_requested_bytes));
  row("Largest free block", bytes(s.largest_free_block), "");
  row("Free blocks", std::to_string(s.free_blocks_small) + " small, " + std::to_string(s.free_blocks_large) + " large",
      "");
  row("Limit", s.limit_bytes ? bytes(s.limit_bytes) : std::string("none"), "");
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

namespace ember {

void cpu_set_memory_limit(size_t bytes);  // cpu_allocator.cpp
size_t cpu_memory_limit();

void set_memory_limit(Device device, size_t bytes) {
  if (device.is_cpu()) return cpu_set_memory_limit(bytes);
  auto [h, d] = cuda::detail_api::on_device("set_memory_limit", device.index());
  h.set_memory_limit(d, bytes);
}
size_t memory_limit(Device device) {
  if (device.is_cpu()) return cpu_memory_limit();
  auto [h, d] = cuda::detail_api::on_device("memory_limit", device.index());
  return h.memory_limit(d);
}

}  // namespace ember
