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
// For the libraries' status codes (cuBLAS, cuDNN): "<library> error: <status> in `<expr>` (file:line)";
// out_of_memory throws ember::OutOfMemoryError instead of DeviceError.
[[noreturn]] void throw_library_error(const char* library, const char* status, bool out_of_memory, const char* expr,
                                      const char* file, int line);
}  // namespace ember::cuda::detail

#define EMBER_CUDA_CHECK(expr) \
  do { \
    const cudaError_t ember_cuda_err_ = (expr); \
    if (__builtin_expect(ember_cuda_err_ != cudaSuccess, 0)) \
      ::ember::cuda::detail::throw_cuda_error(ember_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// Used only in files that include <cublas_v2.h> / <cudnn.h> (the macros name their types).
#define EMBER_CUBLAS_CHECK(expr) \
  do { \
    const cublasStatus_t ember_cublas_st_ = (expr); \
    if (ember_cublas_st_ != CUBLAS_STATUS_SUCCESS) \
      ::ember::cuda::detail::throw_library_error("cuBLAS", cublasGetStatusString(ember_cublas_st_), \
                                                 ember_cublas_st_ == CUBLAS_STATUS_ALLOC_FAILED, #expr, __FILE__, \
                                                 __LINE__); \
  } while (0)
#define EMBER_CUDNN_CHECK(expr) \
  do { \
    const cudnnStatus_t ember_cudnn_st_ = (expr); \
    if (ember_cudnn_st_ != CUDNN_STATUS_SUCCESS) \
      ::ember::cuda::detail::throw_library_error("cuDNN", cudnnGetErrorString(ember_cudnn_st_), \
                                                 ember_cudnn_st_ == CUDNN_STATUS_ALLOC_FAILED, #expr, __FILE__, \
                                                 __LINE__); \
  } while (0)

#define EMBER_CUDA_WARN(expr) \
  do { \
    const cudaError_t ember_cuda_err_ = (expr); \
    if (ember_cuda_err_ != cudaSuccess) \
      ::ember::cuda::detail::warn_cuda_error(ember_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)
