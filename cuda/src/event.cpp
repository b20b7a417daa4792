// defines: cuda::Event — record, synchronize, query, elapsed_ms and block (cudaStreamWaitEvent). The CUDA
// event is created by the first record(), on the device of the stream it records.
#include <cuda_runtime.h>

#include "check.h"
#include "device_guard.h"
#include "ember/core/error.h"
#include "ember/cuda/event.h"
#include "runtime_internal.h"

namespace ember::cuda {

Event::~Event() {
  if (event_) EMBER_CUDA_WARN(cudaEventDestroy(event_));
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_) EMBER_CUDA_WARN(cudaEventDestroy(event_));
    event_ = o.event_;
    device_ = o.device_;
    timing_ = o.timing_;
    o.event_ = nullptr;
  }
  return *this;
}

void Event::record(const Stream& stream) {
  const int device = stream.device_index();
  detail::require_device("cuda::Event::record", device);
  detail::DeviceGuard g(device);
  if (!event_) {
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing_ ? cudaEventDefault : cudaEventDisableTiming));
    device_ = device;
  }
  EMBER_CHECK_DEVICE(device == device_, "cuda::Event::record: the event belongs to cuda:", device_,
                     " but the stream is on cuda:", device);
  EMBER_CUDA_CHECK(cudaEventRecord(event_, stream.handle()));
}

void Event::synchronize() const {
  if (!event_) return;
  EMBER_CUDA_CHECK(cudaEventSynchronize(event_));
}

bool Event::query() const {
  if (!event_) return true;
  cudaError_t e = cudaEventQuery(event_);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is an answer, not an error: clear it
    return false;
  }
  EMBER_CUDA_CHECK(e);
  return true;
}

float Event::elapsed_ms(const Event& end) const {
  EMBER_CHECK_VALUE(timing_ && end.timing_,
                    "cuda::Event::elapsed_ms: both events need EventOptions{.enable_timing = true}");
  EMBER_CHECK_VALUE(event_ && end.event_, "cuda::Event::elapsed_ms: both events must be recorded first");
  synchronize();
  end.synchronize();
  float ms = 0;
  EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, event_, end.event_));
  return ms;
}

void Event::block(const Stream& stream) const {
  detail::require_device("cuda::Event::block", stream.device_index());
  if (!event_) return;
  detail::DeviceGuard g(stream.device_index());
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream.handle(), event_, 0));
}

}  // namespace ember::cuda
