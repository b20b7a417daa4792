// defines: the CUDA runtime entry points (device discovery and selection) for a build with CUDA, the
// device-index checks (runtime_internal.h), and backend_or_null, the one place the CUDA backend is handed
// to core's backend_for. Links the runtime only, never the driver library: on a machine without a GPU or
// driver, cudaGetDeviceCount fails, is_available() is false, and nothing aborts or throws.
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "check.h"
#include "cuda_backend.h"
#include "ember/core/backend.h"
#include "ember/core/error.h"
#include "ember/cuda/cuda.h"
#include "runtime_internal.h"

namespace ember::cuda {
namespace {
struct Probe {
  int count = 0;
  std::string why;
};
// Asked once per process, on first use (never at static-init time).
const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    int n = 0;  // left untouched when the call fails (no driver): read any error as "no devices"
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      r.why = ember::detail::str("no usable CUDA device (cudaGetDeviceCount: ", cudaGetErrorName(e), ": ",
                                 cudaGetErrorString(e), ")");
      (void)cudaGetLastError();  // clear the error slot
    } else if (n == 0) {
      r.why = "no CUDA device found";
    } else {
      r.count = n;
    }
    return r;
  }();
  return p;
}
}  // namespace

namespace detail {
void require_device(const char* op, int device) {
  EMBER_CHECK_DEVICE(is_available(), op, ": ", probe().why);
  EMBER_CHECK_DEVICE(device >= 0 && device < device_count(), op, ": device index ", device, " is out of range (",
                     device_count(), " CUDA device(s))");
}
int resolve_device(const char* op, int device) {
  if (device == -1) {
    EMBER_CHECK_DEVICE(is_available(), op, ": ", probe().why);
    EMBER_CUDA_CHECK(cudaGetDevice(&device));
  }
  require_device(op, device);
  return device;
}
}  // namespace detail

bool is_available() { return probe().count > 0; }
int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().why; }
int current_device() { return detail::resolve_device("cuda::current_device", -1); }
void set_device(int index) {
  detail::require_device("cuda::set_device", index);
  EMBER_CUDA_CHECK(cudaSetDevice(index));
}
std::string get_device_name(int index) {
  detail::require_device("cuda::get_device_name", index);
  cudaDeviceProp prop{};
  EMBER_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.name;
}
// Waits for all work on the current device (every stream).
void synchronize() {
  detail::resolve_device("cuda::synchronize", -1);
  EMBER_CUDA_CHECK(cudaDeviceSynchronize());
}

namespace detail {
// Declared in core/src/cuda_hooks.h. One CudaBackend per device, created on first use and never destroyed
// (storages freed during static destruction may still reach it). Constructing one makes no CUDA call.
Backend* backend_or_null(int device_index, std::string* why) {
  if (!is_available()) {
    *why = probe().why;
    return nullptr;
  }
  if (device_index < 0 || device_index >= device_count()) {
    *why = ember::detail::str("device index ", device_index, " is out of range (", device_count(), " CUDA device(s))");
    return nullptr;
  }
  static const std::vector<CudaBackend*>* backends = [] {
    auto* v = new std::vector<CudaBackend*>();
    for (int i = 0; i < device_count(); ++i) v->push_back(new CudaBackend(i));
    return v;
  }();
  return (*backends)[static_cast<size_t>(device_index)];
}
}  // namespace detail
}  // namespace ember::cuda
