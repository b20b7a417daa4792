// defines: EMBER_CUDA_CHECK(expr) and EMBER_CUDA_WARN(expr), the checks around every CUDA runtime call
// (private to cuda/src; plain C++17 so that .cu files can use it too).
//
//   EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream));
//   my_kernel<<<grid, block, 0, stream>>>(...);
//   EMBER_CUDA_CHECK(cudaGetLastError());   // every launch is checked (llm.c)
//   ~Event() { EMBER_CUDA_WARN(cudaEventDestroy(event_)); }   // destructors log, never throw
//
// A failed call throws ember::DeviceError "CUDA error: <name>: <string> in `<expr>` (file:line)";
// cudaErrorMemoryAllocation throws ember::OutOfMemoryError instead.
#pragma once
#include <cuda_runtime.h>

namespace ember::cuda::detail {
// Defined in check.cpp (throwing needs ember/core/error.h, which is C++20).
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
void warn_cuda_error(cudaError_t err, const char* expr, const char* file, int line) noexcept;
}  // namespace ember::cuda::detail

#define EMBER_CUDA_CHECK(expr)                                                               \
  do {                                                                                       \
    const cudaError_t ember_cuda_err_ = (expr);                                              \
    if (__builtin_expect(ember_cuda_err_ != cudaSuccess, 0))                                 \
      ::ember::cuda::detail::throw_cuda_error(ember_cuda_err_, #expr, __FILE__, __LINE__);   \
  } while (0)

#define EMBER_CUDA_WARN(expr)                                                                \
  do {                                                                                       \
    const cudaError_t ember_cuda_err_ = (expr);                                              \
    if (ember_cuda_err_ != cudaSuccess)                                                      \
      ::ember::cuda::detail::warn_cuda_error(ember_cuda_err_, #expr, __FILE__, __LINE__);    \
  } while (0)
