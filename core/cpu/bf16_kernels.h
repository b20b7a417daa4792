// defines: the two bf16 GEMM micro-kernels of bf16_gemm.h, written once over an instruction set `I`:
// bf16_gemm_native.cpp instantiates them with the real AVX512-BF16 / AMX instructions, the tests with an emulation
// of them. Packed layouts: bf16_gemm.h. Include only <cstdint> here: this header is compiled with AVX-512 and AMX
// enabled, and any inline function shared with the rest of the library could end up built with them.
#pragma once
#include <cstdint>

namespace ember::cpu::bf16k {

// AVX512-BF16: a 12 x 32 tile of C in 24 registers of 16 floats. Per pair of K: two loads of B (16 columns each,
// the pair of rows interleaved), then per row one broadcast of A's pair and two dot products, each adding
// a0*b0 + a1*b1 to 16 floats. I provides F (16 floats), P (32 bf16), zero, load_pairs, bcast, dp, add and masked
// load/store of floats.
inline constexpr int kDotMR = 12;

template <class I>
void dot_tile(int64_t kp, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc, int rows, int cols, bool add) {
  using F = typename I::F;
  using P = typename I::P;
  F acc[kDotMR][2];
#pragma GCC unroll 12
  for (int r = 0; r < kDotMR; ++r) acc[r][0] = acc[r][1] = I::zero();
  for (int64_t p = 0; p < kp; ++p) {
    const P b0 = I::load_pairs(bp + p * 32), b1 = I::load_pairs(bp + p * 32 + 16);
#pragma GCC unroll 12
    for (int r = 0; r < kDotMR; ++r) {
      const P a = I::bcast(ap[p * kDotMR + r]);
      acc[r][0] = I::dp(acc[r][0], a, b0);
      acc[r][1] = I::dp(acc[r][1], a, b1);
    }
  }
  // Columns past `cols` are padding: masked off, so the tile never writes past C's edge.
  const unsigned m0 = cols >= 16 ? 0xFFFFu : (1u << cols) - 1;
  const unsigned m1 = cols >= 32 ? 0xFFFFu : cols > 16 ? (1u << (cols - 16)) - 1 : 0u;
  for (int r = 0; r < rows; ++r) {
    float* cr = c + r * ldc;
    F v0 = acc[r][0], v1 = acc[r][1];
    if (add) {
      v0 = I::add(v0, I::load(cr, m0));
      if (m1) v1 = I::add(v1, I::load(cr + 16, m1));
    }
    I::store(cr, v0, m0);
    if (m1) I::store(cr + 16, v1, m1);
  }
}

// AMX: a 32 x 32 tile of C in four 16 x 16 float tiles (tmm0..3), A's two 16-row halves in tmm4/5 and B's two
// 16-column halves in tmm6/7, 16 pairs of K per step: step() loads the four operand tiles and issues the four tile
// dot products. I provides zero_c, step(a, b) and store_c(out), which writes tmm0..3 to a 32 x 32 float array
// (row r, column n at r * 32 + n); the tile shapes are loaded once per thread (TileConfig, Bf16Kernel::begin).
inline constexpr int kTileMR = 32;
inline constexpr int kTileGroup = 16;  // pairs per A tile row (64 bytes)

template <class I>
void amx_tile(int64_t kp, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc, int rows, int cols, bool add) {
  I::zero_c();
  // A: 32 rows x 16 pairs per step, rows 64 bytes apart; B: 16 pairs x 32 columns, pairs 128 bytes apart.
  for (int64_t p = 0; p < kp; p += kTileGroup) I::step(ap + p * kTileMR, bp + p * 32);
  alignas(64) float out[kTileMR * 32];  // row r, column n at r * 32 + n
  I::store_c(out);
  for (int r = 0; r < rows; ++r) {
    float* cr = c + r * ldc;
    const float* o = out + r * 32;
    if (add) {
      for (int n = 0; n < cols; ++n) cr[n] += o[n];
    } else {
      for (int n = 0; n < cols; ++n) cr[n] = o[n];
    }
  }
}

// The AMX tile configuration (Intel SDM, LDTILECFG): palette 1; tiles 0..7 all 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(TileConfig) == 64);

}  // namespace ember::cpu::bf16k
