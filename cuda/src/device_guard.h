// defines: DeviceGuard, which makes a device current for one scope and restores the previous one after
// (c10::cuda::CUDAGuard's job). Private to cuda/src.
//
//   { DeviceGuard g(1); EMBER_CUDA_CHECK(cudaMemsetAsync(p, 0, n, s)); }   // runs on cuda:1, then back
#pragma once
#include <cuda_runtime.h>

#include "check.h"

namespace ember::cuda::detail {

class DeviceGuard {
 public:
  // requires: 0 <= device < device_count() (callers check indices before they get here).
  explicit DeviceGuard(int device) {
    EMBER_CUDA_CHECK(cudaGetDevice(&prev_));
    if (device != prev_) EMBER_CUDA_CHECK(cudaSetDevice(device));
    cur_ = device;
  }
  ~DeviceGuard() {
    if (cur_ != prev_) EMBER_CUDA_WARN(cudaSetDevice(prev_));
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
  int cur_ = 0;
};

}  // namespace ember::cuda::detail
