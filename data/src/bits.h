// defines: two bit-level helpers the data readers and random streams share: SplitMix64's finaliser (a strong
// 64-bit mixer) and a little-endian unsigned load of 1..8 bytes.
#pragma once
#include <cstdint>

namespace ember::data::detail {

inline uint64_t splitmix64_finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t load_le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace ember::data::detail
