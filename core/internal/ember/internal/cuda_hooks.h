// defines: CudaHooks, everything core asks of the CUDA backend, and cuda_hooks(), which finds it. The CUDA
// backend is a plugin, libember_cuda.so (cuda/), that core opens with dlopen on first use of anything CUDA
// (core/src/cuda_plugin.cpp), so a program linked against libember starts, and trains on the CPU, on a
// machine without any CUDA library; libember itself links no CUDA library. The plugin links libember (for
// Tensor, errors, the CPU backend) and exports one C function, ember_cuda_plugin_hooks, that returns its
// CudaHooks. The public CUDA API (ember/cuda/*.h) is implemented in core on top of these hooks
// (core/src/cuda_api.cpp, cuda_streams.cpp).
//
// Contracts: core checks device indices before a call (0 <= device < device_count()); the plugin throws
// ember::Error subclasses for CUDA failures. No CUDA header: handles are the runtime's opaque struct pointers.
// Private to core/ and cuda/ (not installed).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

struct CUstream_st;
struct CUevent_st;

namespace ember {
class Backend;
class Tensor;
namespace cuda {
struct MemoryStats;
struct HostMemoryStats;
}  // namespace cuda
}  // namespace ember

namespace ember::detail {

// Bumped whenever CudaHooks changes; a plugin built against another version is refused with a clear reason.
inline constexpr int kCudaHooksVersion = 3;

class CudaHooks {
 public:
  virtual ~CudaHooks() = default;

  // --- devices
  virtual int device_count() = 0;                // usable devices; 0 without a driver or a device
  virtual std::string unavailable_reason() = 0;  // why device_count() is 0 ("" when it is not)
  virtual int current_device() = 0;
  virtual void set_device(int device) = 0;
  virtual std::string device_name(int device) = 0;
  virtual void synchronize_current_device() = 0;     // every stream of the current device
  virtual Backend& backend(int device) = 0;          // one per device, never destroyed
  virtual Tensor pin(const Tensor& cpu_tensor) = 0;  // a copy in cached pinned host memory
  virtual uint64_t host_sync_count() = 0;            // cuda::host_sync_count()
  // "" when the device's kernels may read and write p, else what p is ("host memory ...", "memory of cuda:1").
  virtual std::string device_pointer_problem(int device, const void* p) = 0;

  // --- memory (Note [CUDA caching allocator] in ember/cuda/memory.h)
  virtual cuda::MemoryStats memory_stats(int device) = 0;
  virtual void reset_peak_memory_stats(int device) = 0;
  virtual void set_memory_limit(int device, size_t bytes) = 0;  // 0: none (set_memory_limit, memory_context.h)
  virtual size_t memory_limit(int device) = 0;
  virtual std::pair<size_t, size_t> mem_get_info(int device) = 0;  // (free, total)
  virtual void empty_cache() = 0;                                  // every device
  virtual cuda::HostMemoryStats host_memory_stats() = 0;
  virtual void reset_peak_host_memory_stats() = 0;
  virtual void host_empty_cache() = 0;
  // Work on `stream` uses the device block starting at `block` (Tensor::record_stream).
  virtual void record_stream(void* block, CUstream_st* stream) = 0;

  // --- streams (Note [Default stream] in ember/cuda/stream.h); nullptr is the legacy default stream
  virtual CUstream_st* pool_stream(int device) = 0;     // the next stream of the device's pool
  virtual CUstream_st* current_stream(int device) = 0;  // the calling thread's
  virtual void set_current_stream(int device, CUstream_st* stream) = 0;
  virtual void stream_synchronize(int device, CUstream_st* stream) = 0;
  virtual bool stream_query(int device, CUstream_st* stream) = 0;

  // --- events
  virtual CUevent_st* event_create(int device, bool timing) = 0;
  virtual void event_destroy(CUevent_st* event) noexcept = 0;
  virtual void event_record(int device, CUevent_st* event, CUstream_st* stream) = 0;
  virtual void event_synchronize(CUevent_st* event) = 0;
  virtual bool event_query(CUevent_st* event) = 0;
  virtual float event_elapsed_ms(CUevent_st* start, CUevent_st* end) = 0;
  virtual void stream_wait_event(int device, CUstream_st* stream, CUevent_st* event) = 0;
};

// The plugin's entry point: extern "C" CudaHooks* ember_cuda_plugin_hooks(int version, std::string* why).
// Returns null (with the reason) when `version` is not the one it was built with.
using CudaPluginEntry = CudaHooks* (*)(int version, std::string* why);
inline constexpr const char* kCudaPluginEntryName = "ember_cuda_plugin_hooks";

// The CUDA plugin's hooks, opening the plugin on the first call (thread-safe; never closed). Null when this
// build has no CUDA backend or the plugin cannot be loaded, with the reason in *why. A loaded plugin may
// still have no usable device: see CudaHooks::device_count().
CudaHooks* cuda_hooks(std::string* why = nullptr);

// Where the plugin was found ("" when not loaded), for messages and tests.
std::string cuda_plugin_path();

}  // namespace ember::detail
