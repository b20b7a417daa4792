// defines: the strided, dtype-converting copy kernel, its packed form for contiguous casts, and launch_copy_cast
// (launch.h). The backend uses it for every device-to-device copy that is not one contiguous memcpy: a
// non-contiguous or broadcast source, a strided destination, or a dtype change (100 source/destination type pairs).
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

// Elements per pack of a cast from S to D: 16 bytes of the wider of the two types.
template <class D, class S>
__host__ __device__ constexpr int cast_pack_size() {
  return sizeof(D) > sizeof(S) ? pack_size<D>() : pack_size<S>();
}

// Both sides contiguous and aligned to their packs: each step reads one pack of S and writes one of D (a bf16 <->
// float32 cast moves 8 or 16 bytes a thread instead of 2 and 4), then the tail one element at a time.
template <class D, class S>
__global__ void copy_cast_packed_kernel(D* out, const S* in, int64_t n) {
  constexpr int N = cast_pack_size<D, S>();
  const int64_t npack = n / N;
  EMBER_KERNEL_LOOP(p, npack) {
    const Pack<S, N> x = reinterpret_cast<const Pack<S, N>*>(in)[p];
    Pack<D, N> y;
#pragma unroll
    for (int j = 0; j < N; ++j) y.v[j] = convert<D>(x.v[j]);
    reinterpret_cast<Pack<D, N>*>(out)[p] = y;
  }
  const int64_t done = npack * N;
  EMBER_KERNEL_LOOP(i, n - done) out[done + i] = convert<D>(in[done + i]);
}

void launch_copy_cast(const Operand& dst, const Operand& src, const Layout& layout, CUstream_st* stream) {
  if (layout.numel == 0) return;
  // contiguous: the merged layout is one dim of stride 1 on both sides (or a single element)
  const bool contiguous = layout.ndim == 0 || (layout.ndim == 1 && dst.strides[0] == 1 && src.strides[0] == 1);
  dispatch(dst.type, [&](auto dst_tag) {
    dispatch(src.type, [&](auto src_tag) {
      using D = typename decltype(dst_tag)::type;
      using S = typename decltype(src_tag)::type;
      constexpr int N = cast_pack_size<D, S>();
      if (contiguous && aligned(dst.data, sizeof(D) * N) && aligned(src.data, sizeof(S) * N))
        copy_cast_packed_kernel<D, S><<<grid_size(CEIL_DIV(layout.numel, N)), kBlockSize, 0, stream>>>(
            static_cast<D*>(dst.data), static_cast<const S*>(src.data), layout.numel);
      else
        copy_cast_kernel<D, S><<<grid_size(layout.numel), kBlockSize, 0, stream>>>(dst, src, layout);
    });
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
