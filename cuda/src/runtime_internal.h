// defines: the device-index checks shared by cuda/src (runtime.cpp defines them). Private to cuda/src.
#pragma once

namespace ember::cuda::detail {

// Throws DeviceError "<op>: <why CUDA is unusable>" when there is no usable device, and
// "<op>: device index i is out of range (n CUDA device(s))" for a bad index.
void require_device(const char* op, int device);
// `device`, or the current device for -1, after require_device.
int resolve_device(const char* op, int device);

}  // namespace ember::cuda::detail
