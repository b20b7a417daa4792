// defines: the gather / scatter-add kernels behind index_select and index_add, and their launchers
// (launch.h). index_select copies whole elements by size (1, 2, 4 or 8 bytes: one kernel serves every
// dtype). index_add adds with atomics, one thread per source element: repeated indices add up, but in an
// order that varies from run to run, so float sums with repeated indices are not bitwise reproducible.
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

template <class E>
__global__ void index_select_kernel(E* out, const E* x, const int64_t* idx, int64_t outer, int64_t D, int64_t n,
                                    int64_t inner) {
  EMBER_KERNEL_LOOP(e, outer * n * inner) {
    const int64_t k = e % inner, r = e / inner;  // r = o * n + i
    const int64_t o = r / n, i = r % n;
    const int64_t j = idx[i];
    out[e] = j >= 0 && j < D ? x[(o * D + j) * inner + k] : E(0);  // a bad index is reported by check_range
  }
}

__device__ inline void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ inline void atomic_add(double* p, double v) { atomicAdd(p, v); }  // sm_60+
__device__ inline void atomic_add(int32_t* p, int32_t v) { atomicAdd(reinterpret_cast<int*>(p), static_cast<int>(v)); }
// Two's complement: an unsigned add wraps exactly as the CPU's int64 add.
__device__ inline void atomic_add(int64_t* p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

template <class T>
__global__ void index_add_kernel(T* out, const T* src, const int64_t* idx, int64_t outer, int64_t D, int64_t n,
                                 int64_t inner) {
  EMBER_KERNEL_LOOP(e, outer * n * inner) {
    const int64_t k = e % inner, r = e / inner;
    const int64_t o = r / n, i = r % n;
    const int64_t j = idx[i];
    if (j >= 0 && j < D) atomic_add(out + (o * D + j) * inner + k, src[e]);  // a bad index: see check_range
  }
}

__global__ void check_range_kernel(const int64_t* minmax, int64_t lo, int64_t hi, uint32_t check,
                                   RangeCheckRecord* record) {
  const int64_t a = minmax[0], b = minmax[1];
  if (a >= lo && b < hi) return;
  if (atomicCAS(reinterpret_cast<int*>(&record->claimed), 0, 1) != 0) return;  // an earlier failure is recorded
  record->min = a;
  record->max = b;
  record->check = check;
  __threadfence_system();  // the fields reach the host before the flag does
  *static_cast<volatile int32_t*>(&record->failed) = 1;
}

}  // namespace

void launch_check_range(const int64_t* minmax, int64_t lo, int64_t hi, uint32_t check, RangeCheckRecord* record,
                        CUstream_st* stream) {
  check_range_kernel<<<1, 1, 0, stream>>>(minmax, lo, hi, check, record);
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_index_select(void* out, const void* x, const int64_t* idx, int64_t outer, int64_t D, int64_t n,
                         int64_t inner, int itemsize, CUstream_st* stream) {
  const int64_t total = outer * n * inner;
  if (total == 0) return;
  const unsigned grid = grid_size(total);
  switch (itemsize) {
    case 1:
      index_select_kernel<uint8_t><<<grid, kBlockSize, 0, stream>>>(
          static_cast<uint8_t*>(out), static_cast<const uint8_t*>(x), idx, outer, D, n, inner);
      break;
    case 2:
      index_select_kernel<uint16_t><<<grid, kBlockSize, 0, stream>>>(
          static_cast<uint16_t*>(out), static_cast<const uint16_t*>(x), idx, outer, D, n, inner);
      break;
    case 4:
      index_select_kernel<uint32_t><<<grid, kBlockSize, 0, stream>>>(
          static_cast<uint32_t*>(out), static_cast<const uint32_t*>(x), idx, outer, D, n, inner);
      break;
    default:
      index_select_kernel<uint64_t><<<grid, kBlockSize, 0, stream>>>(
          static_cast<uint64_t*>(out), static_cast<const uint64_t*>(x), idx, outer, D, n, inner);
      break;
  }
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_index_add(DType type, void* out, const void* src, const int64_t* idx, int64_t outer, int64_t D, int64_t n,
                      int64_t inner, CUstream_st* stream) {
  const int64_t total = outer * n * inner;
  if (total == 0) return;
  const unsigned grid = grid_size(total);
  switch (type) {
    case DType::kFloat32:
      index_add_kernel<float><<<grid, kBlockSize, 0, stream>>>(static_cast<float*>(out), static_cast<const float*>(src),
                                                               idx, outer, D, n, inner);
      break;
    case DType::kFloat64:
      index_add_kernel<double><<<grid, kBlockSize, 0, stream>>>(
          static_cast<double*>(out), static_cast<const double*>(src), idx, outer, D, n, inner);
      break;
    case DType::kInt32:
      index_add_kernel<int32_t><<<grid, kBlockSize, 0, stream>>>(
          static_cast<int32_t*>(out), static_cast<const int32_t*>(src), idx, outer, D, n, inner);
      break;
    case DType::kInt64:
      index_add_kernel<int64_t><<<grid, kBlockSize, 0, stream>>>(
          static_cast<int64_t*>(out), static_cast<const int64_t*>(src), idx, outer, D, n, inner);
      break;
    default:
      return;  // the backend widens the other types first
  }
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
