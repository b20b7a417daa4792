// defines: the plugin's own view of the CUDA runtime: how many devices are usable and why not (asked once), the
// device-index checks, and each device's CudaBackend. Private to cuda/src: the rest of Ember reaches these
// through the hooks (plugin.cpp), never by name.
#pragma once
#include <string>

namespace ember::cuda {
class CudaBackend;
}

namespace ember::cuda::detail {

// Usable devices (0 without a driver or a device) and why there are none ("" when there are some). The runtime
// is asked once, on first use, never at load time.
int num_devices();
const std::string& why_unusable();

// Throws DeviceError "<op>: <why CUDA is unusable>" when there is no usable device, and
// "<op>: device index i is out of range (n CUDA device(s))" for a bad index.
void require_device(const char* op, int device);
// `device`, or the current device for -1, after require_device.
int resolve_device(const char* op, int device);

// The backend of a usable device, created on first use and never destroyed.
CudaBackend& backend(int device);

}  // namespace ember::cuda::detail
