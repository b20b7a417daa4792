// defines: the plugin's view of the CUDA runtime (runtime_internal.h): the device probe, the device-index checks
// and the per-device backends. Links the runtime only, never the driver library: on a machine without a GPU or
// driver, cudaGetDeviceCount fails, num_devices() is 0, and nothing aborts or throws.
#include <cuda_runtime.h>

#include <vector>

#include "check.h"
#include "cuda_backend.h"
#include "ember/core/error.h"
#include "runtime_internal.h"

namespace ember::cuda::detail {
namespace {
struct Probe {
  int count = 0;
  std::string why;
};
// Asked once per process, on first use (never at load time).
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

int num_devices() { return probe().count; }
const std::string& why_unusable() { return probe().why; }

void require_device(const char* op, int device) {
  EMBER_CHECK_DEVICE(num_devices() > 0, op, ": ", why_unusable());
  EMBER_CHECK_DEVICE(device >= 0 && device < num_devices(), op, ": device index ", device, " is out of range (",
                     num_devices(), " CUDA device(s))");
}

int resolve_device(const char* op, int device) {
  if (device == -1) {
    EMBER_CHECK_DEVICE(num_devices() > 0, op, ": ", why_unusable());
    EMBER_CUDA_CHECK(cudaGetDevice(&device));
  }
  require_device(op, device);
  return device;
}

// One CudaBackend per device, created on first use and never destroyed (storages freed during static
// destruction may still reach it). Constructing one makes no CUDA call.
CudaBackend& backend(int device) {
  require_device("cuda backend", device);
  static const std::vector<CudaBackend*>* backends = [] {
    auto* v = new std::vector<CudaBackend*>();
    for (int i = 0; i < num_devices(); ++i) v->push_back(new CudaBackend(i));
    return v;
  }();
  return *(*backends)[static_cast<size_t>(device)];
}

}  // namespace ember::cuda::detail
