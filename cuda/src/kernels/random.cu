// defines: the Philox4x32-10 random fill and launch_random (launch.h). Element i of the output comes from
// Philox block (offset + i / 4), lane i % 4, under key `seed`, and is transformed exactly as
// core/cpu/index_random.cpp does (in double), so a CUDA tensor drawn from a generator state holds the
// same numbers as a CPU tensor drawn from that state (up to the last bit of double log/sqrt/sin/cos in the
// normal transform, which CUDA's libdevice and the host libm may round differently).
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

struct Philox {
  uint32_t out[4];
  __device__ Philox(uint64_t seed, uint64_t counter) {
    uint32_t c[4] = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0};
    uint32_t k[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
#pragma unroll
    for (int r = 0; r < 10; ++r) {
      const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
      const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0];
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1];
      c[0] = n0;
      c[1] = static_cast<uint32_t>(p1);
      c[2] = n2;
      c[3] = static_cast<uint32_t>(p0);
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = c[i];
  }
};

__device__ inline double u01(uint32_t u) { return static_cast<double>(u) * (1.0 / 4294967296.0); }  // [0, 1)

template <class T>
__device__ inline double as_double(T v) {
  if constexpr (IsReduced<T>::value) return static_cast<double>(to_float(v));
  else return static_cast<double>(v);
}

template <class T>
__global__ void random_kernel(int kind, T* out, int64_t n, double lo, double hi, uint64_t seed, uint64_t offset) {
  constexpr double kPi = 3.14159265358979323846;
  EMBER_KERNEL_LOOP(blk, CEIL_DIV(n, int64_t{4})) {
    const Philox ph(seed, offset + static_cast<uint64_t>(blk));
    double v[4];
    if (kind == 1) {  // Box-Muller on lanes (0, 1) and (2, 3)
      for (int j = 0; j < 4; j += 2) {
        const double r = sqrt(-2.0 * log(1.0 - u01(ph.out[j])));  // 1 - u in (0, 1]
        const double th = 2.0 * kPi * u01(ph.out[j + 1]);
        v[j] = lo + hi * r * cos(th);
        v[j + 1] = lo + hi * r * sin(th);
      }
    } else if (kind == 2) {
      const uint64_t range = static_cast<uint64_t>(hi - lo);
      for (int j = 0; j < 4; ++j) v[j] = lo + static_cast<double>((static_cast<uint64_t>(ph.out[j]) * range) >> 32);
    } else {
      for (int j = 0; j < 4; ++j) {
        double u = lo + (hi - lo) * u01(ph.out[j]);
        // keep the interval half-open after rounding to T
        if constexpr (std::is_same<T, float>::value || IsReduced<T>::value) {
          if (static_cast<double>(static_cast<float>(as_double(convert<T>(u)))) >= hi) u = lo;
        }
        v[j] = u;
      }
    }
    for (int j = 0; j < 4; ++j) {
      const int64_t i = blk * 4 + j;
      if (i < n) out[i] = convert<T>(v[j]);
    }
  }
}

}  // namespace

void launch_random(int kind, ScalarType type, void* out, int64_t n, double lo, double hi, uint64_t seed,
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
