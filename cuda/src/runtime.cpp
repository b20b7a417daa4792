// defines: the CUDA runtime entry points (device discovery and selection) for a build with CUDA. Links the
// runtime only, never the driver library: on a machine without a GPU or driver, cudaGetDeviceCount fails,
// is_available() is false, and nothing aborts. The compute backend (kernels, allocator) is not built yet:
// backend_or_null says so instead of pretending.
#include <cuda_runtime.h>

#include <mutex>

#include "ember/core/backend.h"
#include "ember/core/error.h"
#include "ember/cuda/cuda.h"

namespace ember::cuda {
namespace {
struct Probe {
  int count = 0;
  std::string why;
};
const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      r.why = detail::str("no usable CUDA device (cudaGetDeviceCount: ", cudaGetErrorName(e), ": ",
                          cudaGetErrorString(e), ")");
      (void)cudaGetLastError();  // clear the sticky error
    } else if (n == 0) {
      r.why = "no CUDA device found";
    } else {
      r.count = n;
    }
    return r;
  }();
  return p;
}
void check(cudaError_t e, const char* call) {
  EMBER_CHECK_DEVICE(e == cudaSuccess, "CUDA error: ", cudaGetErrorName(e), ": ", cudaGetErrorString(e), " in `", call,
                     "`");
}
void require(const char* op) { EMBER_CHECK_DEVICE(is_available(), op, ": ", probe().why); }
void require_index(const char* op, int i) {
  require(op);
  EMBER_CHECK_DEVICE(i >= 0 && i < device_count(), op, ": device index ", i, " is out of range (", device_count(),
                     " CUDA device(s))");
}
}  // namespace

bool is_available() { return probe().count > 0; }
int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().why; }
int current_device() {
  require("cuda::current_device");
  int d = 0;
  check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}
void set_device(int index) {
  require_index("cuda::set_device", index);
  check(cudaSetDevice(index), "cudaSetDevice");
}
std::string get_device_name(int index) {
  require_index("cuda::get_device_name", index);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  return prop.name;
}
void synchronize() {
  require("cuda::synchronize");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

namespace detail {
Backend* backend_or_null(int device_index, std::string* why) {
  if (!is_available()) {
    *why = probe().why;
    return nullptr;
  }
  if (device_index < 0 || device_index >= device_count()) {
    *why = ember::detail::str("device index ", device_index, " is out of range (", device_count(), " CUDA device(s))");
    return nullptr;
  }
  *why = "the CUDA compute backend (allocator and kernels) is not implemented in this version of ember";
  return nullptr;
}
}  // namespace detail
}  // namespace ember::cuda
