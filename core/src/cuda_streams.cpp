// defines: the public streams and events of ember/cuda/stream.h and event.h — cuda::Stream, the per-thread
// current stream, StreamGuard, cuda::Event — and Tensor::record_stream, for every build, on top of the CUDA
// plugin's hooks (ember/internal/cuda_hooks.h; the streams themselves live in the plugin, cuda/src/stream.cpp).
// Without a usable device every call throws DeviceError with the reason.
#include <cstdio>

#include "cuda_api_internal.h"
#include "ember/core/tensor.h"
#include "ember/cuda/event.h"
#include "ember/cuda/stream.h"

namespace ember::cuda {

using detail_api::on_device;
using detail_api::usable;

// --- streams

Stream Stream::create(int device) {
  auto [h, d] = on_device("cuda::Stream::create", device);
  return Stream(h.pool_stream(d), d);
}
void Stream::synchronize() const {
  auto [h, d] = on_device("cuda::Stream::synchronize", device_);
  h.stream_synchronize(d, handle_);
}
bool Stream::query() const {
  auto [h, d] = on_device("cuda::Stream::query", device_);
  return h.stream_query(d, handle_);
}

Stream current_stream(int device) {
  auto [h, d] = on_device("cuda::current_stream", device);
  return Stream(h.current_stream(d), d);
}
Stream default_stream(int device) { return Stream(nullptr, on_device("cuda::default_stream", device).device); }
void set_current_stream(const Stream& stream) {
  auto [h, d] = on_device("cuda::set_current_stream", stream.device_index());
  h.set_current_stream(d, stream.handle());
}

StreamGuard::StreamGuard(const Stream& stream) {
  auto [h, d] = on_device("cuda::StreamGuard", stream.device_index());
  prev_device_ = h.current_device();
  prev_stream_ = Stream(h.current_stream(d), d);
  if (d != prev_device_) h.set_device(d);
  h.set_current_stream(d, stream.handle());
}

StreamGuard::~StreamGuard() {
  // A guard exists only if its constructor found a usable device; restoring cannot fail short of a broken
  // driver, and a destructor must not throw: report and go on.
  try {
    ember::detail::CudaHooks& h = usable("cuda::~StreamGuard");
    h.set_current_stream(prev_stream_.device_index(), prev_stream_.handle());
    if (h.current_device() != prev_device_) h.set_device(prev_device_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember: warning: cuda::StreamGuard could not restore the previous stream: %s\n", e.what());
  }
}

// --- events

Event::~Event() {
  if (event_)
    if (ember::detail::CudaHooks* h = ember::detail::cuda_hooks()) h->event_destroy(event_);
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_)
      if (ember::detail::CudaHooks* h = ember::detail::cuda_hooks()) h->event_destroy(event_);
    event_ = o.event_;
    device_ = o.device_;
    timing_ = o.timing_;
    o.event_ = nullptr;
  }
  return *this;
}

void Event::record(const Stream& stream) {
  auto [h, d] = on_device("cuda::Event::record", stream.device_index());
  if (!event_) {
    event_ = h.event_create(d, timing_);
    device_ = d;
  }
  EMBER_CHECK_DEVICE(d == device_, "cuda::Event::record: the event belongs to cuda:", device_,
                     " but the stream is on cuda:", d);
  h.event_record(d, event_, stream.handle());
}

void Event::record() {
  const int d = on_device("cuda::Event::record", -1).device;  // without a GPU: the error names this call
  record(current_stream(d));
}

void Event::synchronize() const {
  if (event_) usable("cuda::Event::synchronize").event_synchronize(event_);
}

bool Event::query() const { return !event_ || usable("cuda::Event::query").event_query(event_); }

float Event::elapsed_ms(const Event& end) const {
  EMBER_CHECK_VALUE(timing_ && end.timing_,
                    "cuda::Event::elapsed_ms: both events need EventOptions{.enable_timing = true}");
  EMBER_CHECK_VALUE(event_ && end.event_, "cuda::Event::elapsed_ms: both events must be recorded first");
  ember::detail::CudaHooks& h = usable("cuda::Event::elapsed_ms");
  h.event_synchronize(event_);
  h.event_synchronize(end.event_);
  return h.event_elapsed_ms(event_, end.event_);
}

void Event::block(const Stream& stream) const {
  auto [h, d] = on_device("cuda::Event::block", stream.device_index());
  if (event_) h.stream_wait_event(d, stream.handle(), event_);
}

}  // namespace ember::cuda

namespace ember {

void Tensor::record_stream(const cuda::Stream& stream) const {
  const TensorImpl* t = checked();
  EMBER_CHECK_DEVICE(t->device().is_cuda(), "record_stream: expected a CUDA tensor, got a tensor on ", t->device());
  auto [h, d] = cuda::detail_api::on_device("record_stream", stream.device_index());
  EMBER_CHECK_DEVICE(d == t->device().index(), "record_stream: the tensor is on ", t->device(),
                     " but the stream is on cuda:", d);
  // The allocator keys blocks by their start, which is the storage's data pointer (views share it).
  if (t->storage->data) h.record_stream(t->storage->data, stream.handle());
}

}  // namespace ember
