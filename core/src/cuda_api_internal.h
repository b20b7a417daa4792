// defines: the checks shared by the public CUDA API's implementation (cuda_api.cpp, cuda_streams.cpp): a usable
// plugin, a valid device index. Private to core/src.
#pragma once
#include "ember/core/error.h"
#include "ember/internal/cuda_hooks.h"

namespace ember::cuda::detail_api {

// The plugin's hooks when at least one device is usable, else DeviceError "<op>: <why CUDA is unusable>".
ember::detail::CudaHooks& usable(const char* op);

// The hooks and a checked device index: `device`, or the current device for -1. DeviceError for an unusable
// CUDA or an index out of range.
struct On {
  ember::detail::CudaHooks& hooks;
  int device;
};
On on_device(const char* op, int device);

}  // namespace ember::cuda::detail_api
