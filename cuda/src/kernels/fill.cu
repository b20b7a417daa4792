// defines: the fill kernel and launch_fill (launch.h): every element of a (possibly strided) destination
// set to one value, of any dtype.
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

}  // namespace ember::cuda::kernels
