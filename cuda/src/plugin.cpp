// defines: the CUDA plugin's entry point, ember_cuda_plugin_hooks, and the CudaHooks it returns (core's view of
// this backend: ember/internal/cuda_hooks.h). Each hook is a thin call into the plugin's runtime, streams,
// allocators and backends; events are wrapped here directly. Core has checked device indices before a hook
// runs (the public API's checks live in core/src/cuda_api.cpp and cuda_streams.cpp).
#include <cuda_runtime.h>

#include "allocator_internal.h"
#include "caching_allocator.h"
#include "check.h"
#include "compute_internal.h"
#include "cuda_backend.h"
#include "device_guard.h"
#include "ember/core/tensor.h"
#include "ember/cuda/memory.h"
#include "ember/internal/cuda_hooks.h"
#include "host_wait.h"
#include "runtime_internal.h"
#include "stream_internal.h"

namespace ember::cuda::detail {
namespace {

class Hooks final : public ember::detail::CudaHooks {
 public:
  // --- devices
  int device_count() override { return num_devices(); }
  std::string unavailable_reason() override { return why_unusable(); }
  int current_device() override { return resolve_device("cuda::current_device", -1); }
  void set_device(int device) override { EMBER_CUDA_CHECK(cudaSetDevice(device)); }
  std::string device_name(int device) override {
    cudaDeviceProp prop{};
    EMBER_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    return prop.name;
  }
  void synchronize_current_device() override { wait_device(resolve_device("cuda::synchronize", -1)); }
  Backend& backend(int device) override { return detail::backend(device); }
  Tensor pin(const Tensor& cpu_tensor) override { return detail::pin(cpu_tensor); }
  uint64_t host_sync_count() override { return detail::host_sync_count(); }
  std::string device_pointer_problem(int device, const void* p) override {
    cudaPointerAttributes a{};
    if (const cudaError_t e = cudaPointerGetAttributes(&a, p); e != cudaSuccess) {
      (void)cudaGetLastError();  // an answer, not a failure
      return ember::detail::str("not memory CUDA knows (", cudaGetErrorName(e), ")");
    }
    switch (a.type) {
      case cudaMemoryTypeDevice:
        return a.device == device ? "" : ember::detail::str("memory of cuda:", a.device);
      case cudaMemoryTypeManaged:
        return "";
      case cudaMemoryTypeHost:
        return a.devicePointer == p ? "" : "pinned host memory that the device sees at another address";
      default:
        return "host memory that CUDA did not allocate (the GPU cannot read it)";
    }
  }

  // --- memory
  MemoryStats memory_stats(int device) override { return caching_allocator(device).stats(); }
  void reset_peak_memory_stats(int device) override { caching_allocator(device).reset_peak_stats(); }
  void set_memory_limit(int device, size_t bytes) override { caching_allocator(device).set_limit(bytes); }
  size_t memory_limit(int device) override { return caching_allocator(device).limit(); }
  std::pair<size_t, size_t> mem_get_info(int device) override {
    DeviceGuard guard(device);
    size_t free_bytes = 0, total_bytes = 0;
    EMBER_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return {free_bytes, total_bytes};
  }
  void empty_cache() override {
    release_cublas_workspaces();  // kept per stream between GEMMs; the next GEMM takes a new one
    for (DeviceCachingAllocator* a : all_caching_allocators()) a->empty_cache();
  }
  HostMemoryStats host_memory_stats() override { return host_stats(); }
  void reset_peak_host_memory_stats() override { host_reset_peak(); }
  void host_empty_cache() override { host_release_cache(); }
  void record_stream(void* block, CUstream_st* stream) override { detail::record_stream(block, stream); }

  // --- streams
  CUstream_st* pool_stream(int device) override { return detail::pool_stream(device); }
  CUstream_st* current_stream(int device) override { return current_stream_handle(device); }
  void set_current_stream(int device, CUstream_st* stream) override { set_current_stream_handle(device, stream); }
  void stream_synchronize(int device, CUstream_st* stream) override { wait_stream(device, stream); }
  bool stream_query(int device, CUstream_st* stream) override {
    DeviceGuard g(device);
    return ready(cudaStreamQuery(stream));
  }

  // --- events: created on the recording stream's device
  CUevent_st* event_create(int device, bool timing) override {
    DeviceGuard g(device);
    cudaEvent_t e = nullptr;
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    return e;
  }
  void event_destroy(CUevent_st* event) noexcept override { EMBER_CUDA_WARN(cudaEventDestroy(event)); }
  void event_record(int device, CUevent_st* event, CUstream_st* stream) override {
    DeviceGuard g(device);
    EMBER_CUDA_CHECK(cudaEventRecord(event, stream));
  }
  void event_synchronize(CUevent_st* event) override { wait_event(event); }
  bool event_query(CUevent_st* event) override { return ready(cudaEventQuery(event)); }
  float event_elapsed_ms(CUevent_st* start, CUevent_st* end) override {
    float ms = 0;
    EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
    return ms;
  }
  void stream_wait_event(int device, CUstream_st* stream, CUevent_st* event) override {
    DeviceGuard g(device);
    EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream, event, 0));
  }

 private:
  // A query's answer: done (true), not yet (false, and the "not ready" error is cleared: it is an answer), or a
  // failure (throws).
  static bool ready(cudaError_t e) {
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    EMBER_CUDA_CHECK(e);
    return true;
  }
};

}  // namespace
}  // namespace ember::cuda::detail

// The one symbol core looks up (dlsym). Makes no CUDA call: the runtime is first asked on first use.
extern "C" __attribute__((visibility("default"))) ember::detail::CudaHooks* ember_cuda_plugin_hooks(int version,
                                                                                                    std::string* why) {
  if (version != ember::detail::kCudaHooksVersion) {
    *why = ember::detail::str("the plugin implements CUDA hooks version ", ember::detail::kCudaHooksVersion,
                              ", this libember asks for version ", version, " (a plugin from another build)");
    return nullptr;
  }
  // Never destroyed: tensors and events freed during static destruction may still call into it.
  static ember::cuda::detail::Hooks* hooks = new ember::cuda::detail::Hooks();
  return hooks;
}
