// defines: what the cuBLAS GEMM (cublas.cpp) and the cuBLASLt epilogue GEMMs (cublaslt.cpp) share — how a
// row-major operand reads as cuBLAS's column-major one (Note [Row-major GEMM on cuBLAS] in cublas.cpp), the data and
// compute types of a dtype, and the per-stream workspace. Private to cuda/src; includes cuBLAS's headers.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ember/core/tensor.h"

namespace ember::cuda::detail {

// How cuBLAS sees the transpose of a row-major rows x cols matrix with strides (rs, cs); ok false when neither
// dim is contiguous (the operand must be copied first). A size-1 dim's stride does not matter.
struct GemmOperand {
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 0;
  bool ok = false;
};
GemmOperand transposed_view(int64_t rows, int64_t cols, int64_t rs, int64_t cs);

// a [..., M, K] and b [..., K, N] as cuBLAS reads them (its first operand b^T, its second a^T), each copied
// contiguous first when neither of its last two dims is contiguous.
struct GemmOperands {
  Tensor a, b;
  GemmOperand oa, ob;
};
GemmOperands gemm_operands(const Tensor& a, const Tensor& b);

// The data type and compute type of a floating dtype's GEMM (float accumulation for 16-bit floats; TF32 for
// float32 only when cuda::allow_tf32()).
struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
};
GemmTypes gemm_types(DType dt);

// cuBLAS's recommended workspace size for `device`, and the workspace of (device, stream), allocated on its first
// GEMM from the caching allocator (tagged as workspace) and shared by every GEMM on that stream.
size_t gemm_workspace_bytes(int device);
void* gemm_workspace(int device, cudaStream_t stream, size_t bytes);

// Throws DeviceError naming `what` when v does not fit cuBLAS's 32-bit int.
void check_gemm_int(const char* what, int64_t v);

}  // namespace ember::cuda::detail
