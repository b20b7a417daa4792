// defines: the CUDA entry points for a build without CUDA (EMBER_CUDA=OFF or no nvcc): no devices, and a
// DeviceError that says why wherever a device would be needed.
#include "ember/core/backend.h"
#include "ember/core/error.h"
#include "ember/core/tensor.h"
#include "ember/cuda/cuda.h"
#include "ember/cuda/event.h"
#include "ember/cuda/memory.h"
#include "ember/cuda/stream.h"

namespace ember::cuda {
namespace {
constexpr const char* kWhy = "ember was built without CUDA support (EMBER_CUDA=OFF or no nvcc at build time)";
}
bool is_available() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return kWhy; }
int current_device() { throw DeviceError(detail::str("cuda::current_device: ", kWhy)); }
void set_device(int) { throw DeviceError(detail::str("cuda::set_device: ", kWhy)); }
std::string get_device_name(int) { throw DeviceError(detail::str("cuda::get_device_name: ", kWhy)); }
void synchronize() { throw DeviceError(detail::str("cuda::synchronize: ", kWhy)); }
}  // namespace ember::cuda

// --- memory (memory.h): no allocator without CUDA; every query says why.
namespace ember::cuda {
namespace {
[[noreturn]] void no_cuda_memory(const char* op) {
  throw DeviceError(detail::str(op, ": ", unavailable_reason()));
}
}  // namespace
size_t memory_allocated(int) { no_cuda_memory("cuda::memory_allocated"); }
size_t max_memory_allocated(int) { no_cuda_memory("cuda::max_memory_allocated"); }
size_t memory_reserved(int) { no_cuda_memory("cuda::memory_reserved"); }
size_t max_memory_reserved(int) { no_cuda_memory("cuda::max_memory_reserved"); }
void reset_peak_memory_stats(int) { no_cuda_memory("cuda::reset_peak_memory_stats"); }
MemoryStats memory_stats(int) { no_cuda_memory("cuda::memory_stats"); }
std::string memory_summary(int) { no_cuda_memory("cuda::memory_summary"); }
std::pair<size_t, size_t> mem_get_info(int) { no_cuda_memory("cuda::mem_get_info"); }
void empty_cache() { no_cuda_memory("cuda::empty_cache"); }
HostMemoryStats host_memory_stats() { no_cuda_memory("cuda::host_memory_stats"); }
void reset_peak_host_memory_stats() { no_cuda_memory("cuda::reset_peak_host_memory_stats"); }
void host_empty_cache() { no_cuda_memory("cuda::host_empty_cache"); }
}  // namespace ember::cuda

// --- streams and events (stream.h, event.h, Tensor::record_stream): no streams without CUDA; every call
// that would need one says why.
namespace ember::cuda {
namespace {
[[noreturn]] void no_cuda_streams(const char* op) { throw DeviceError(detail::str(op, ": ", unavailable_reason())); }
}  // namespace
Stream Stream::create(int) { no_cuda_streams("cuda::Stream::create"); }
void Stream::synchronize() const { no_cuda_streams("cuda::Stream::synchronize"); }
bool Stream::query() const { no_cuda_streams("cuda::Stream::query"); }
Stream current_stream(int) { no_cuda_streams("cuda::current_stream"); }
Stream default_stream(int) { no_cuda_streams("cuda::default_stream"); }
void set_current_stream(const Stream&) { no_cuda_streams("cuda::set_current_stream"); }
StreamGuard::StreamGuard(const Stream&) { no_cuda_streams("cuda::StreamGuard"); }
StreamGuard::~StreamGuard() = default;
Event::~Event() = default;  // no event is ever created here
Event& Event::operator=(Event&& o) noexcept {
  timing_ = o.timing_;
  return *this;
}
void Event::record(const Stream&) { no_cuda_streams("cuda::Event::record"); }
void Event::synchronize() const { no_cuda_streams("cuda::Event::synchronize"); }
bool Event::query() const { no_cuda_streams("cuda::Event::query"); }
float Event::elapsed_ms(const Event&) const { no_cuda_streams("cuda::Event::elapsed_ms"); }
void Event::block(const Stream&) const { no_cuda_streams("cuda::Event::block"); }
}  // namespace ember::cuda

namespace ember {
void Tensor::record_stream(const cuda::Stream&) const {
  throw DeviceError(detail::str("record_stream: ", cuda::unavailable_reason()));
}
}  // namespace ember
