// defines: the Philox4x32-10 random fill and launch_random (launch.h). Element i of the output comes from
// Philox block (offset + i / 4), lane i % 4, under key `seed`, through ember/internal/philox.h, the CPU's
// code, so a CUDA tensor drawn from a generator state holds the same numbers as a CPU tensor drawn from it.
#include <cstdint>

#include "common.cuh"
#include "ember/internal/philox.h"

namespace ember::cuda::kernels {
namespace {

// Element i from block (offset + i / 4), lane i % 4: philox.h's random_block, the CPU's.
template <class T>
__global__ void random_kernel(RandomKind kind, T* out, int64_t n, double lo, double hi, uint64_t seed,
                              uint64_t offset) {
  EMBER_KERNEL_LOOP(blk, CEIL_DIV(n, int64_t{4})) {
    double v[4];
    scalar::random_block<T>(kind, seed, offset + static_cast<uint64_t>(blk), lo, hi, v);
    for (int j = 0; j < 4; ++j) {
      const int64_t i = blk * 4 + j;
      if (i < n) out[i] = convert<T>(v[j]);
    }
  }
}

}  // namespace

void launch_random(RandomKind kind, DType type, void* out, int64_t n, double lo, double hi, uint64_t seed,
                   uint64_t offset, CUstream_st* stream) {
  if (n == 0) return;
  dispatch(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    random_kernel<T><<<grid_size(CEIL_DIV(n, int64_t{4})), kBlockSize, 0, stream>>>(kind, static_cast<T*>(out), n, lo,
                                                                                    hi, seed, offset);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
