// defines: the strided, dtype-converting copy kernel and launch_copy_cast (launch.h). The backend uses it
// for every device-to-device copy that is not one contiguous memcpy: a non-contiguous or broadcast source,
// a strided destination, or a dtype change (64 source/destination type pairs).
#include "common.cuh"

namespace ember::cuda::kernels {

// dst (layout) = convert(src (layout)), one element per thread in a grid-stride loop.
template <class D, class S>
__global__ void copy_cast_kernel(Operand dst, Operand src, Layout layout) {
  D* out = static_cast<D*>(dst.data);
  const S* in = static_cast<const S*>(src.data);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < layout.numel; i += stride) {
    const int64_t src_offset = element_offset(i, layout, src.strides);
    const int64_t dst_offset = element_offset(i, layout, dst.strides);
    out[dst_offset] = convert<D>(in[src_offset]);
  }
}

void launch_copy_cast(const Operand& dst, const Operand& src, const Layout& layout, CUstream_st* stream) {
  if (layout.numel == 0) return;
  const unsigned grid = grid_size(layout.numel);
  dispatch(dst.type, [&](auto dst_tag) {
    dispatch(src.type, [&](auto src_tag) {
      using D = typename decltype(dst_tag)::type;
      using S = typename decltype(src_tag)::type;
      copy_cast_kernel<D, S><<<grid, kBlockSize, 0, stream>>>(dst, src, layout);
    });
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
