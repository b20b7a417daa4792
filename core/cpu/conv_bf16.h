// defines: conv2d and its backward in bfloat16 over the bf16 GEMM (conv_bf16.cpp). Each returns false, doing
// nothing, when the bf16 GEMM is off on this CPU or a tensor is not bf16: the caller then widens to float32.
// Private to core/cpu.
#pragma once
#include "ember/core/backend.h"
#include "isa.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

bool conv2d_bf16(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p);
// gx, gw, gb: each may be undefined (not wanted).
bool conv2d_backward_bf16(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx, const Tensor& gw,
                          const Tensor& gb, const Conv2dParams& p);

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
