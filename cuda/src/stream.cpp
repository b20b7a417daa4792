// defines: the plugin's streams (stream_internal.h): the per-thread current stream of each device and the
// per-device stream pools. The public cuda::Stream, StreamGuard and current_stream are core's
// (core/src/cuda_streams.cpp), on top of these through the hooks. See Note [Default stream] in
// ember/cuda/stream.h.
#include <cuda_runtime.h>

#include <atomic>
#include <mutex>

#include "check.h"
#include "device_guard.h"
#include "ember/core/error.h"
#include "runtime_internal.h"
#include "stream_internal.h"

namespace ember::cuda::detail {
namespace {

constexpr int kMaxDevices = 64;      // more than any machine has; bounds the per-thread table below
constexpr int kStreamsPerPool = 32;  // as PyTorch's pool

// The calling thread's current stream per device; nullptr (the legacy default stream) until set.
thread_local CUstream_st* tls_current[kMaxDevices] = {};

// One device's pool of non-blocking streams, created on the first pool_stream() for that device.
struct StreamPool {
  std::once_flag once;
  cudaStream_t streams[kStreamsPerPool] = {};
  std::atomic<unsigned> next{0};
};

void check_index(const char* op, int device) {
  require_device(op, device);
  EMBER_CHECK_DEVICE(device < kMaxDevices, op, ": device index ", device, " is beyond the ", kMaxDevices,
                     " devices ember supports");
}

StreamPool& pool(int device) {
  // Never destroyed: streams handed out must stay valid until the process ends.
  static StreamPool* pools = new StreamPool[static_cast<size_t>(num_devices())];
  StreamPool& p = pools[device];
  std::call_once(p.once, [&] {
    DeviceGuard g(device);
    for (cudaStream_t& s : p.streams) EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  });
  return p;
}

}  // namespace

CUstream_st* current_stream_handle(int device) {
  return device >= 0 && device < kMaxDevices ? tls_current[device] : nullptr;
}

void set_current_stream_handle(int device, CUstream_st* stream) {
  check_index("cuda::set_current_stream", device);
  tls_current[device] = stream;
}

CUstream_st* pool_stream(int device) {
  check_index("cuda::Stream::create", device);
  StreamPool& p = pool(device);
  return p.streams[p.next.fetch_add(1, std::memory_order_relaxed) % kStreamsPerPool];
}

}  // namespace ember::cuda::detail
