// defines: CudaBackend, ember::Backend for one CUDA device: its allocator (the caching allocator), copies
// (on the device, host <-> device, device <-> device; rules in docs/cuda.md), fill and the compute ops
// (own kernels in kernels/, cuBLAS matmul, cuDNN conv2d; docs/cuda.md "Compute ops"). Private to cuda/src;
// one instance per device, handed out by detail::backend (runtime.cpp).
#pragma once
#include "ember/core/backend.h"

namespace ember::cuda {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {}  // makes no CUDA call
  DeviceType type() const override { return DeviceType::CUDA; }
  int device() const { return device_; }
  Allocator& allocator(int device_index) override;
  void synchronize(int device_index) override;

  // The kernels (contracts in ember/core/backend.h): own kernels in kernels/, cuBLAS matmul, cuDNN conv2d. Work is
  // queued on the current stream of the CUDA device involved (see Note [Default stream]).
  EMBER_BACKEND_KERNELS(EMBER_BACKEND_OVERRIDE)
  using Backend::copy;

 private:
  int device_;
};

namespace detail {
// A copy of the CPU tensor `t` in pinned (page-locked) host memory (Tensor::pin_memory, through the hooks).
Tensor pin(const Tensor& t);
}  // namespace detail

}  // namespace ember::cuda
