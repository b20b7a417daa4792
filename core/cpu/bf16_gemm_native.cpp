// defines: the native bf16 GEMM kernels (bf16_gemm.h): bf16_kernels.h over the real AVX512-BF16 and AMX
// instructions, and the plugin entry that hands them to libember. Built into the AVX-512 plugin with -mavx512bf16
// -mamx-bf16 as well (cmake/EmberCpuVariants.cmake); libember looks the entry up only after CPUID said the
// instructions run (native_bf16_kernel, bf16_gemm.cpp). Keep it free of library headers with inline functions
// (see bf16_kernels.h).
#include <immintrin.h>

#include "bf16_gemm.h"

#include "bf16_kernels.h"

namespace ember::cpu {
namespace {

struct Avx512Bf16 {
  using F = __m512;
  using P = __m512i;
  static F zero() { return _mm512_setzero_ps(); }
  static P load_pairs(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static P bcast(uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
  static F dp(F acc, P a, P b) { return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F load(const float* p, unsigned mask) { return _mm512_maskz_loadu_ps(static_cast<__mmask16>(mask), p); }
  static void store(float* p, F v, unsigned mask) { _mm512_mask_storeu_ps(p, static_cast<__mmask16>(mask), v); }
};

// Tile numbers are immediates in the instructions, hence the fixed assignment (bf16_kernels.h, amx_tile).
// GCC's _tile_loadd asm names no memory operand: safe here because A and B are packed in another library
// (bf16_gemm.cpp) before an indirect call; packing must not move into this file. _tile_stored clobbers memory.
struct Amx {
  static void zero_c() {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  static void step(const uint32_t* a, const uint32_t* b) {
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a + 16 * 16, 64);
    _tile_loadd(6, b, 128);
    _tile_loadd(7, b + 16, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  static void store_c(float* out) {
    _tile_stored(0, out, 128);
    _tile_stored(1, out + 16, 128);
    _tile_stored(2, out + 16 * 32, 128);
    _tile_stored(3, out + 16 * 32 + 16, 128);
  }
};

void amx_begin() {
  static const bf16k::TileConfig cfg;
  _tile_loadconfig(&cfg);
}
void amx_end() { _tile_release(); }
void nothing() {}

const Bf16Kernel kDot{Bf16Path::Avx512Bf16, bf16k::kDotMR, 1, &bf16k::dot_tile<Avx512Bf16>, &nothing, &nothing};
const Bf16Kernel kAmx{Bf16Path::Amx, bf16k::kTileMR, bf16k::kTileGroup, &bf16k::amx_tile<Amx>, &amx_begin, &amx_end};

}  // namespace
}  // namespace ember::cpu

extern "C" const ember::cpu::Bf16Kernel* ember_cpu_bf16_kernel(int version, int path) {
  using ember::cpu::Bf16Path;
  if (version != ember::cpu::kBf16PluginVersion) return nullptr;
  const auto p = static_cast<Bf16Path>(path);
  return p == Bf16Path::Amx ? &ember::cpu::kAmx : p == Bf16Path::Avx512Bf16 ? &ember::cpu::kDot : nullptr;
}
