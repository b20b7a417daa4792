// defines: the cumsum kernel and launch_cumsum (launch.h): the running sum along the middle dim n of a
// contiguous [outer, n, inner] tensor, with core/cpu/reduce.cpp's arithmetic (double accumulators for floating
// types, wrapping int64 ones), so both devices add the same numbers in the same order. One thread per row
// (an (outer, inner) pair) walks its n elements in order; neighbouring threads read neighbouring columns when
// inner > 1 (coalesced).
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

}  // namespace

void launch_cumsum(DType type, void* out, const void* x, int64_t outer, int64_t n, int64_t inner, bool reverse,
                   CUstream_st* stream) {
  if (outer == 0 || n == 0 || inner == 0) return;
  dispatch(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point<compute_t<T>>::value || std::is_same<T, int64_t>::value) {
      cumsum_kernel<T><<<grid_size(outer * inner), kBlockSize, 0, stream>>>(
          static_cast<T*>(out), static_cast<const T*>(x), outer, n, inner, reverse);
    } else {
      ::ember::cuda::detail::throw_cuda_error(
          cudaErrorInvalidValue, "launch_cumsum: a dtype other than floating or int64", __FILE__, __LINE__);
    }
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
