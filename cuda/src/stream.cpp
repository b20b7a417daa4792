// defines: cuda::Stream, the per-thread current stream (current_stream, default_stream, set_current_stream,
// detail::current_stream_handle), StreamGuard, and Tensor::record_stream. See Note [Default stream] in
// ember/cuda/stream.h.
#include <cuda_runtime.h>

#include <atomic>
#include <mutex>

#include "allocator_internal.h"
#include "check.h"
#include "device_guard.h"
#include "ember/core/tensor.h"
#include "ember/cuda/cuda.h"
#include "ember/cuda/stream.h"
#include "runtime_internal.h"
#include "stream_internal.h"

namespace ember::cuda {
namespace {

constexpr int kMaxDevices = 64;       // more than any machine has; bounds the per-thread table below
constexpr int kStreamsPerPool = 32;   // as PyTorch's pool

// The calling thread's current stream per device; nullptr (the legacy default stream) until set.
thread_local CUstream_st* tls_current[kMaxDevices] = {};

// One device's pool of non-blocking streams, created on the first Stream::create() for that device.
struct StreamPool {
  std::once_flag once;
  cudaStream_t streams[kStreamsPerPool] = {};
  std::atomic<unsigned> next{0};
};

StreamPool& pool(int device) {
  // Never destroyed: streams handed out must stay valid until the process ends.
  static StreamPool* pools = new StreamPool[static_cast<size_t>(device_count())];
  StreamPool& p = pools[device];
  std::call_once(p.once, [&] {
    detail::DeviceGuard g(device);
    for (cudaStream_t& s : p.streams) EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  });
  return p;
}

int checked_device(const char* op, int device) {
  device = detail::resolve_device(op, device);
  EMBER_CHECK_DEVICE(device < kMaxDevices, op, ": device index ", device, " is beyond the ", kMaxDevices,
                     " devices ember supports");
  return device;
}

}  // namespace

namespace detail {
CUstream_st* current_stream_handle(int device) {
  return device >= 0 && device < kMaxDevices ? tls_current[device] : nullptr;
}
}  // namespace detail

Stream Stream::create(int device) {
  device = checked_device("cuda::Stream::create", device);
  StreamPool& p = pool(device);
  unsigned i = p.next.fetch_add(1, std::memory_order_relaxed) % kStreamsPerPool;
  return Stream(p.streams[i], device);
}

void Stream::synchronize() const {
  detail::require_device("cuda::Stream::synchronize", device_);
  detail::DeviceGuard g(device_);
  EMBER_CUDA_CHECK(cudaStreamSynchronize(handle_));
}

bool Stream::query() const {
  detail::require_device("cuda::Stream::query", device_);
  detail::DeviceGuard g(device_);
  cudaError_t e = cudaStreamQuery(handle_);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is an answer, not an error: clear it
    return false;
  }
  EMBER_CUDA_CHECK(e);
  return true;
}

Stream current_stream(int device) {
  device = checked_device("cuda::current_stream", device);
  return Stream(tls_current[device], device);
}

Stream default_stream(int device) {
  device = checked_device("cuda::default_stream", device);
  return Stream(nullptr, device);
}

void set_current_stream(const Stream& stream) {
  const int device = checked_device("cuda::set_current_stream", stream.device_index());
  tls_current[device] = stream.handle();
}

StreamGuard::StreamGuard(const Stream& stream) {
  const int device = checked_device("cuda::StreamGuard", stream.device_index());
  EMBER_CUDA_CHECK(cudaGetDevice(&prev_device_));
  prev_stream_ = Stream(tls_current[device], device);
  if (device != prev_device_) EMBER_CUDA_CHECK(cudaSetDevice(device));
  tls_current[device] = stream.handle();
}

StreamGuard::~StreamGuard() {
  tls_current[prev_stream_.device_index()] = prev_stream_.handle();
  int now = prev_device_;
  EMBER_CUDA_WARN(cudaGetDevice(&now));
  if (now != prev_device_) EMBER_CUDA_WARN(cudaSetDevice(prev_device_));
}

}  // namespace ember::cuda

namespace ember {

void Tensor::record_stream(const cuda::Stream& stream) const {
  const TensorImpl* t = checked();
  EMBER_CHECK_DEVICE(t->device().is_cuda(), "record_stream: expected a CUDA tensor, got a tensor on ", t->device());
  EMBER_CHECK_DEVICE(stream.device_index() == t->device().index(), "record_stream: the tensor is on ",
                     t->device(), " but the stream is on cuda:", stream.device_index());
  // The allocator keys blocks by their start, which is the storage's data pointer (views share it).
  if (t->storage->data) cuda::detail::record_stream(t->storage->data, stream.handle());
}

}  // namespace ember
