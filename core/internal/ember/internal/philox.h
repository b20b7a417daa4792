// defines: the Philox4x32-10 counter-based generator (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3", SC'11) and random_block, which turns one Philox block into four values of a random fill. Both
// backends fill element i of a tensor from block (offset + i / 4), lane i % 4, with these functions, so a CUDA
// tensor drawn from a generator state holds the same numbers as a CPU tensor drawn from that state (up to the
// last bit of double log/sqrt/sin/cos in the normal transform, which CUDA's libdevice and the host libm may
// round differently). Plain C++17, host and device; private to core/ and cuda/.
#pragma once
#include <cstdint>
#include <type_traits>

#include "ember/core/kernel_params.h"
#include "ember/internal/scalar_math.h"

namespace ember::scalar {

struct Philox {
  uint32_t out[4];
  EMBER_HD Philox(uint64_t seed, uint64_t counter) {
    uint32_t c[4] = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0};
    uint32_t k[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
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
    for (int i = 0; i < 4; ++i) out[i] = c[i];
  }
};

EMBER_HD double u01(uint32_t u) { return static_cast<double>(u) * (1.0 / 4294967296.0); }  // [0, 1)

// The four values (in double) of block `counter` under key `seed`, for a fill of element type T: Uniform in
// [lo, hi) (kept half-open after rounding to T), Normal(mean lo, std hi) by Box-Muller on lanes (0, 1) and
// (2, 3), Int uniform in [lo, hi).
template <class T>
EMBER_HD void random_block(RandomKind kind, uint64_t seed, uint64_t counter, double lo, double hi, double v[4]) {
  const Philox ph(seed, counter);
  if (kind == RandomKind::Normal) {
    constexpr double kPi = 3.14159265358979323846;
    for (int j = 0; j < 4; j += 2) {
      const double r = m_sqrt(-2.0 * m_log(1.0 - u01(ph.out[j])));  // 1 - u in (0, 1]
      const double th = 2.0 * kPi * u01(ph.out[j + 1]);
      v[j] = lo + hi * r * m_cos(th);
      v[j + 1] = lo + hi * r * m_sin(th);
    }
  } else if (kind == RandomKind::Int) {
    const uint64_t range = static_cast<uint64_t>(hi - lo);
    for (int j = 0; j < 4; ++j) v[j] = lo + static_cast<double>((static_cast<uint64_t>(ph.out[j]) * range) >> 32);
  } else {
    for (int j = 0; j < 4; ++j) {
      double u = lo + (hi - lo) * u01(ph.out[j]);
      // keep the interval half-open after rounding to T
      if constexpr (std::is_same<T, float>::value || is_reduced_v<T>) {
        if (static_cast<double>(convert<float>(convert<T>(u))) >= hi) u = lo;
      }
      v[j] = u;
    }
  }
}

}  // namespace ember::scalar
