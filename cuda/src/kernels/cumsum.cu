// defines: the cumsum kernels and launch_cumsum (launch.h): the running sum along the middle dim n of a
// contiguous [outer, n, inner] tensor, with core/cpu/reduce.cpp's accumulators (double for floating types,
// wrapping int64). Two shapes of launch:
//   - rows along the last dim (inner == 1) longer than 64: a block per row scans it in tiles of a block's width
//     (CUB's BlockScan over the tile, a running carry between tiles), reads and writes coalesced;
//   - otherwise one thread per (outer, inner) column walks its n elements in order; neighbouring threads read
//     neighbouring columns when inner > 1 (coalesced).
// Integer sums are exact either way; floating ones add in double, in another order than the CPU's within a tile.
#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

template <class T>
__global__ void cumsum_kernel(T* out, const T* x, int64_t outer, int64_t n, int64_t inner, bool reverse) {
  // double for every floating type (float16 / bfloat16 through float), int64 for int64
  using A = typename std::conditional<std::is_integral<T>::value, int64_t, double>::type;
  EMBER_KERNEL_LOOP(r, outer * inner) {
    const int64_t base = (r / inner) * n * inner + (r % inner);
    A acc = 0;
    for (int64_t s = 0; s < n; ++s) {
      const int64_t k = base + (reverse ? n - 1 - s : s) * inner;
      acc = scalar::wrap_add(acc, static_cast<A>(load_c(x[k])));
      out[k] = store_c<T>(static_cast<compute_t<T>>(acc));
    }
  }
}

// double for every floating type (float16 / bfloat16 through float), int64 for int64
template <class T>
using ScanAcc = typename std::conditional<std::is_integral<T>::value, int64_t, double>::type;

struct WrapAdd {
  template <class A>
  __device__ A operator()(A a, A b) const {
    return scalar::wrap_add(a, b);
  }
};

template <class T>
__global__ void cumsum_rows_kernel(T* out, const T* x, int64_t rows, int64_t n, bool reverse) {
  using A = ScanAcc<T>;
  using Scan = cub::BlockScan<A, kBlockSize>;
  __shared__ typename Scan::TempStorage temp;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    A carry = 0;
    for (int64_t t0 = 0; t0 < n; t0 += kBlockSize) {
      const int64_t s = t0 + threadIdx.x, k = r * n + (reverse ? n - 1 - s : s);
      A sum = 0, tile = 0;
      Scan(temp).InclusiveScan(s < n ? static_cast<A>(load_c(x[k])) : A(0), sum, WrapAdd{}, tile);
      __syncthreads();  // temp is reused by the next tile
      if (s < n) out[k] = store_c<T>(static_cast<compute_t<T>>(scalar::wrap_add(carry, sum)));
      carry = scalar::wrap_add(carry, tile);
    }
  }
}

}  // namespace

void launch_cumsum(DType type, void* out, const void* x, int64_t outer, int64_t n, int64_t inner, bool reverse,
                   CUstream_st* stream) {
  if (outer == 0 || n == 0 || inner == 0) return;
  dispatch(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point<compute_t<T>>::value || std::is_same<T, int64_t>::value) {
      if (inner == 1 && n > 64) {
        const unsigned grid = static_cast<unsigned>(outer < (int64_t{1} << 20) ? outer : (int64_t{1} << 20));
        cumsum_rows_kernel<T>
            <<<grid, kBlockSize, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(x), outer, n, reverse);
      } else {
        cumsum_kernel<T><<<grid_size(outer * inner), kBlockSize, 0, stream>>>(
            static_cast<T*>(out), static_cast<const T*>(x), outer, n, inner, reverse);
      }
    } else {
      ::ember::cuda::detail::throw_cuda_error(
          cudaErrorInvalidValue, "launch_cumsum: a dtype other than floating or int64", __FILE__, __LINE__);
    }
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
