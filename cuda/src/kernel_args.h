// defines: KernelArgs and kernel_args(), which describe up to four same-shaped tensors for an elementwise
// kernel (kernels::Layout + kernels::Operand), and OnDevice (a tensor's device made current,
// with its current stream). Private to cuda/src; shared by cuda_backend.cpp and the op-family files.
#pragma once
#include <cuda_runtime.h>

#include <initializer_list>

#include "device_guard.h"
#include "ember/core/tensor.h"
#include "kernels/launch.h"
#include "stream_internal.h"

namespace ember::cuda::detail {

struct KernelArgs {
  kernels::Layout layout;
  kernels::Operand operands[4];
};

// Describes up to four tensors of the first one's shape for a kernel. Size-1 dims are dropped and
// neighbouring dims that every tensor walks as one (stride[d] == stride[d + 1] * size[d + 1]) are merged, so
// a contiguous tensor becomes 1-D and a transposed matrix stays 2-D. Throws DeviceError (naming `op`) when
// more than kernels::kMaxDims dims remain.
KernelArgs kernel_args(const char* op, std::initializer_list<const Tensor*> tensors);

// The device of `t` made current for the scope, and its current stream.
struct OnDevice {
  DeviceGuard guard;
  cudaStream_t stream;
  explicit OnDevice(const Tensor& t) : guard(t.device().index()), stream(current_stream_handle(t.device().index())) {}
};

}  // namespace ember::cuda::detail
