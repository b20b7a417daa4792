// defines: the integer batched matmul kernel and launch_matmul_int (launch.h), for the dtypes cuBLAS has no
// matching GEMM for (int64, int32, uint8, bool). One thread per output element, accumulating in uint64 so
// that overflow wraps as core/cpu/linalg.cpp's gemm_naive does; correctness, not speed, is the point.
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

struct Strides3 {
  int64_t s[3];
};

template <class T>
__global__ void matmul_int_kernel(T* out, const T* a, const T* b, int64_t batch, int64_t m, int64_t n, int64_t k,
                                  Strides3 sa, Strides3 sb) {
  EMBER_KERNEL_LOOP(e, batch * m * n) {
    const int64_t j = e % n, i = (e / n) % m, bi = e / (n * m);
    const T* ar = a + bi * sa.s[0] + i * sa.s[1];
    const T* bc = b + bi * sb.s[0] + j * sb.s[2];
    uint64_t acc = 0;
    for (int64_t p = 0; p < k; ++p)
      acc += static_cast<uint64_t>(static_cast<int64_t>(ar[p * sa.s[2]])) *
             static_cast<uint64_t>(static_cast<int64_t>(bc[p * sb.s[1]]));
    out[e] = static_cast<T>(acc);
  }
}

}  // namespace

void launch_matmul_int(DType type, void* out, const void* a, const void* b, int64_t batch, int64_t m, int64_t n,
                       int64_t k, const int64_t sa[3], const int64_t sb[3], CUstream_st* stream) {
  const int64_t total = batch * m * n;
  if (total == 0) return;
  const Strides3 A{{sa[0], sa[1], sa[2]}}, B{{sb[0], sb[1], sb[2]}};
  const unsigned grid = grid_size(total);
  switch (type) {
    case DType::kInt64:
      matmul_int_kernel<int64_t><<<grid, kBlockSize, 0, stream>>>(static_cast<int64_t*>(out),
                                                                  static_cast<const int64_t*>(a),
                                                                  static_cast<const int64_t*>(b), batch, m, n, k, A, B);
      break;
    case DType::kInt32:
      matmul_int_kernel<int32_t><<<grid, kBlockSize, 0, stream>>>(static_cast<int32_t*>(out),
                                                                  static_cast<const int32_t*>(a),
                                                                  static_cast<const int32_t*>(b), batch, m, n, k, A, B);
      break;
    case DType::kUInt8:
      matmul_int_kernel<uint8_t><<<grid, kBlockSize, 0, stream>>>(static_cast<uint8_t*>(out),
                                                                  static_cast<const uint8_t*>(a),
                                                                  static_cast<const uint8_t*>(b), batch, m, n, k, A, B);
      break;
    case DType::kBool:
      matmul_int_kernel<bool><<<grid, kBlockSize, 0, stream>>>(static_cast<bool*>(out), static_cast<const bool*>(a),
                                                               static_cast<const bool*>(b), batch, m, n, k, A, B);
      break;
    default:
      return;  // floating types go to cuBLAS
  }
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
