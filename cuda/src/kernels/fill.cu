// defines: the fill kernel and launch_fill (launch.h): every element of a (possibly strided) destination
// set to one value, of any dtype; and arange's (launch_arange): one element per thread, no running sum.
#include "common.cuh"

namespace ember::cuda::kernels {

// dst (layout) = value, one element per thread in a grid-stride loop.
template <class T>
__global__ void fill_kernel(Operand dst, T value, Layout layout) {
  T* out = static_cast<T*>(dst.data);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < layout.numel; i += stride)
    out[element_offset(i, layout, dst.strides)] = value;
}

void launch_fill(const Operand& dst, double value, const Layout& layout, CUstream_st* stream) {
  if (layout.numel == 0) return;
  dispatch(dst.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // converted once on the host, with the same rules as a copy from float64
    fill_kernel<T><<<grid_size(layout.numel), kBlockSize, 0, stream>>>(dst, convert<T>(value), layout);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

// out[i] = fma(i, step, start) in double, converted as a copy from float64 converts (the CPU's arange exactly).
template <class T>
__global__ void arange_kernel(T* out, int64_t n, double start, double step) {
  EMBER_KERNEL_LOOP(i, n) out[i] = convert<T>(fma(static_cast<double>(i), step, start));
}

void launch_arange(DType type, void* out, int64_t n, double start, double step, CUstream_st* stream) {
  if (n == 0) return;
  dispatch(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    arange_kernel<T><<<grid_size(n), kBlockSize, 0, stream>>>(static_cast<T*>(out), n, start, step);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
