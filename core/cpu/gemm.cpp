// defines: sgemm — a BLIS-style float32 GEMM. The loops block C into NC-column and MC-row tiles and K into
// KC slices so that a packed KC x NR sliver of B stays in L1, an MC x KC block of A in L2 and a KC x NC panel
// of B in L3; the 6 x 16 micro-kernel keeps its C tile in 12 AVX registers and does two FMAs per broadcast
// (the AVX-512 variant's 6 x 32 kernel likewise in 12 zmm registers, and its 12 x 32 one, two A slivers at a time,
// in 24). Packing is AVX2 in both variants.
#include "gemm.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cpu_backend.h"
#include "parallel.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_HAVE_SGEMM_KERNEL 1
#endif

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

#ifdef EMBER_HAVE_SGEMM_KERNEL
namespace {

constexpr int64_t MR = kSgemmMR, NR = kSgemmNR;  // micro-tile of C
constexpr int64_t MC = 144, NC = 3072;           // cache blocks (MC a multiple of MR, NC of NR); KC in gemm.h

// Packs rows [0, mc) x cols [0, kc) of A into MR-row slivers: sliver s holds, for each p, MR values
// A[s*MR + r, p]; rows past mc are zero so the kernel never needs a row count. Whole slivers of row-major A
// (cs == 1) go 8 columns at a time through an 8 x 8 transpose (two rows of it zero); of column-major A
// (rs == 1) each column's 6 values are already contiguous: one 4-wide and one 2-wide copy.
void pack_a(int64_t mc, int64_t kc, const float* A, int64_t rs, int64_t cs, float* out) {
  static_assert(MR == 6);
  for (int64_t i = 0; i < mc; i += MR) {
    const int64_t rows = std::min(MR, mc - i);
    const float* a = A + i * rs;
    int64_t p = 0;
    if (rows == MR && cs == 1) {
      const __m256 z = _mm256_setzero_ps();
      for (; p + 8 <= kc; p += 8) {
        __m256 r0 = _mm256_loadu_ps(a + p), r1 = _mm256_loadu_ps(a + rs + p), r2 = _mm256_loadu_ps(a + 2 * rs + p),
               r3 = _mm256_loadu_ps(a + 3 * rs + p), r4 = _mm256_loadu_ps(a + 4 * rs + p),
               r5 = _mm256_loadu_ps(a + 5 * rs + p);
        const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
                     t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
        // q_k holds rows 0..3 of columns k and k+4 (halves); s_k rows 4..5 (and two zeros)
        const __m256 q0 = _mm256_shuffle_ps(t0, t2, 0x44), q1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                     q2 = _mm256_shuffle_ps(t1, t3, 0x44), q3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        const __m256 s0 = _mm256_shuffle_ps(t4, z, 0x44), s1 = _mm256_shuffle_ps(t4, z, 0xEE),
                     s2 = _mm256_shuffle_ps(t5, z, 0x44), s3 = _mm256_shuffle_ps(t5, z, 0xEE);
        float* o = out + p * MR;
        const __m256 q[4] = {q0, q1, q2, q3}, sv[4] = {s0, s1, s2, s3};
        for (int k = 0; k < 4; ++k) {
          _mm_storeu_ps(o + k * MR, _mm256_castps256_ps128(q[k]));
          _mm_storel_pi(reinterpret_cast<__m64*>(o + k * MR + 4), _mm256_castps256_ps128(sv[k]));
          _mm_storeu_ps(o + (k + 4) * MR, _mm256_extractf128_ps(q[k], 1));
          _mm_storel_pi(reinterpret_cast<__m64*>(o + (k + 4) * MR + 4), _mm256_extractf128_ps(sv[k], 1));
        }
      }
    } else if (rows == MR && rs == 1) {
      for (; p < kc; ++p) {
        _mm_storeu_ps(out + p * MR, _mm_loadu_ps(a + p * cs));
        _mm_storel_pi(reinterpret_cast<__m64*>(out + p * MR + 4),
                      _mm_loadl_pi(_mm_setzero_ps(), reinterpret_cast<const __m64*>(a + p * cs + 4)));
      }
    }
    for (; p < kc; ++p) {
      for (int64_t r = 0; r < rows; ++r) out[p * MR + r] = a[r * rs + p * cs];
      for (int64_t r = rows; r < MR; ++r) out[p * MR + r] = 0.f;
    }
    out += MR * kc;
  }
}

// out[p * ld_out + i] = in[i * ld + p] for i, p in [0, 8): an 8 x 8 transpose (into a packed B sliver: ld_out = NR).
// The loads put rows i and i + 4 in the two 128-bit halves of one register (the insert takes its operand from
// memory, on any port), so that only two rounds of in-lane shuffles remain: 16 shuffles on Intel's one shuffle
// port instead of 24 with a final round of cross-lane permutes.
inline __m256 two_halves(const float* lo, const float* hi) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo)), _mm_loadu_ps(hi), 1);
}
inline void transpose8x8(const float* in, int64_t ld, float* out, int64_t ld_out) {
  for (int half = 0; half < 8; half += 4) {  // columns [half, half + 4) of the 8 rows
    const float* c = in + half;
    const __m256 r0 = two_halves(c + 0 * ld, c + 4 * ld), r1 = two_halves(c + 1 * ld, c + 5 * ld),
                 r2 = two_halves(c + 2 * ld, c + 6 * ld), r3 = two_halves(c + 3 * ld, c + 7 * ld);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
                 t3 = _mm256_unpackhi_ps(r2, r3);
    _mm256_storeu_ps(out + (half + 0) * ld_out, _mm256_shuffle_ps(t0, t2, 0x44));
    _mm256_storeu_ps(out + (half + 1) * ld_out, _mm256_shuffle_ps(t0, t2, 0xEE));
    _mm256_storeu_ps(out + (half + 2) * ld_out, _mm256_shuffle_ps(t1, t3, 0x44));
    _mm256_storeu_ps(out + (half + 3) * ld_out, _mm256_shuffle_ps(t1, t3, 0xEE));
  }
}

#ifdef __AVX512F__
// The 16 x 4 block of column-major B at b (b[p + n * cs] for n < 16, p < 4) into the packed sliver rows p, columns
// [0, 16) at out (row stride NR): each zmm gathers, lane by 128-bit lane, four values of rows n, n + 4, n + 8 and
// n + 12 (one load and three inserts), so that a 4 x 4 transpose within the lanes (8 shuffles) leaves each output
// row of 16 in one register. Half the shuffles of 8 x 8 transposes, and whole-zmm stores: a linear layer's
// W^T (1024 x 1024 from L3) packs about 20% faster on one core of the Xeon model 207, 1.6x from L2.
inline __m512 four_rows(const float* b, int64_t cs) {
  __m512 r = _mm512_castps128_ps512(_mm_loadu_ps(b));
  r = _mm512_insertf32x4(r, _mm_loadu_ps(b + 4 * cs), 1);
  r = _mm512_insertf32x4(r, _mm_loadu_ps(b + 8 * cs), 2);
  return _mm512_insertf32x4(r, _mm_loadu_ps(b + 12 * cs), 3);
}
inline void transpose16x4(const float* b, int64_t cs, float* out) {
  const __m512 r0 = four_rows(b, cs), r1 = four_rows(b + cs, cs), r2 = four_rows(b + 2 * cs, cs),
               r3 = four_rows(b + 3 * cs, cs);
  const __m512 t0 = _mm512_unpacklo_ps(r0, r1), t1 = _mm512_unpackhi_ps(r0, r1), t2 = _mm512_unpacklo_ps(r2, r3),
               t3 = _mm512_unpackhi_ps(r2, r3);
  _mm512_storeu_ps(out + 0 * NR, _mm512_shuffle_ps(t0, t2, 0x44));
  _mm512_storeu_ps(out + 1 * NR, _mm512_shuffle_ps(t0, t2, 0xEE));
  _mm512_storeu_ps(out + 2 * NR, _mm512_shuffle_ps(t1, t3, 0x44));
  _mm512_storeu_ps(out + 3 * NR, _mm512_shuffle_ps(t1, t3, 0xEE));
}
#endif

// Packs rows [0, kc) x cols [0, nc) of B into NR-column slivers, zero-padded past nc. Two layouts are fast:
// row-major B (cs == 1: vector copies, row by row across the whole slivers, so that B is read in address order) and
// column-major B (rs == 1, e.g. a linear layer's W^T or a transposed view, as in conv2d's weight gradient: 16 x 4
// blocks with AVX-512, else 8 x 8 transposes); anything else goes element by element.
// (Row-major B read sliver by sliver took 128 bytes of each row per pass: the weight gradients' B, activations of
// 0.5-2 MiB fetched from L3, then came in at ~6 GB/s and packing took ~5% of the charlm's step.)
void pack_b(int64_t kc, int64_t nc, const float* B, int64_t rs, int64_t cs, float* out) {
  int64_t j = 0;
  if (cs == 1) {
    const int64_t whole = nc / NR * NR;
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t jw = 0; jw < whole; jw += NR)
        for (int64_t g = 0; g < NR; g += 8)
          _mm256_storeu_ps(out + jw * kc + p * NR + g, _mm256_loadu_ps(B + p * rs + jw + g));
    j = whole;
    out += whole * kc;
  }
  for (; j < nc; j += NR) {
    const int64_t cols = std::min(NR, nc - j);
    if (rs == 1 && cols == NR) {
      int64_t p = 0;
#ifdef __AVX512F__
      static_assert(NR == 32);
      for (int64_t g = 0; g < NR; g += 16)  // one group of 16 rows of B^T (columns of B) at a time, along p
        for (p = 0; p + 4 <= kc; p += 4) transpose16x4(B + p + (j + g) * cs, cs, out + p * NR + g);
#else
      for (; p + 8 <= kc; p += 8)
        for (int64_t g = 0; g < NR; g += 8) transpose8x8(B + p + (j + g) * cs, cs, out + p * NR + g, NR);
#endif
      for (; p < kc; ++p)
        for (int64_t c = 0; c < NR; ++c) out[p * NR + c] = B[p + (j + c) * cs];
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t c = 0; c < cols; ++c) out[p * NR + c] = B[p * rs + (j + c) * cs];
        for (int64_t c = cols; c < NR; ++c) out[p * NR + c] = 0.f;
      }
    }
    out += NR * kc;
  }
}

// C[m, n] (+)= A[m, kc] @ Bp[kc, NR]-sliver (+ bias, Epilogue) for an R x W*V register tile (R = 4, 6, 10 or 12 rows,
// V = 1 or 2 vectors of W floats; m <= R, n <= W*V), A read packed, in place or gathered (ARows, GatherRuns). W is 8 in
// the AVX2 variant (ymm) and 16 in the AVX-512 one (zmm). The 6 x 2W tile keeps C in 12 registers and does two FMAs per
// broadcast; the narrower ones serve ragged edges (N = 196: the last 4 columns cost W lanes of work, not 2W; M = 64:
// the last 4 rows cost 4 broadcasts, not 6). The AVX-512 variant, with 32 registers, also has a 12 x 2W tile of two
// A slivers (kTallTile): 24 accumulators, so 14 loads feed 24 FMAs instead of 8 loads 12. On the Xeon model 167
// (AVX-512, one core, FMA limit 236 GFLOP/s) the kernel alone, B in L1 and A from L2, ran 170 -> 195 GFLOP/s.
// Written with GCC's vector types, so that one text serves both widths (the tests also build the wide one for AVX2:
// each vector then two ymm registers); the assembly of both was checked for one vfmadd231ps per row and vector and
// no stack traffic in the loop. The accumulators are an array indexed only by constants (its loops unrolled whole):
// GCC then keeps every element in a register even where the kernel is not inlined.
#ifdef EMBER_SGEMM_WIDE_KERNEL
constexpr int64_t W = 16;
#else
constexpr int64_t W = 8;
#endif
static_assert(NR == 2 * W, "a register tile is two vectors wide");
#ifdef EMBER_SGEMM_WIDE_KERNEL
constexpr bool kTallTile = true;  // the 12-row tile (2 * MR): only with 32 vector registers
#else
constexpr bool kTallTile = false;
#endif
constexpr int64_t kTallRows = 2 * MR;
using vf = float __attribute__((vector_size(sizeof(float) * W)));
using vf_unaligned = float __attribute__((vector_size(sizeof(float) * W), aligned(4), may_alias));
[[gnu::always_inline]] inline vf vload(const float* p) { return *reinterpret_cast<const vf_unaligned*>(p); }
[[gnu::always_inline]] inline void vstore(float* p, vf v) { *reinterpret_cast<vf_unaligned*>(p) = v; }

// *a in every lane. (Not `vf{} + *a`: without -ffast-math that is a real addition, 0 + -0 being +0, which put a
// dependent scalar add before every broadcast and halved the kernel's speed.)
[[gnu::always_inline]] inline vf broadcast(const float* a) {
#if defined(EMBER_SGEMM_WIDE_KERNEL) && defined(__AVX512F__)
  return _mm512_set1_ps(*a);
#elif defined(EMBER_SGEMM_WIDE_KERNEL)
  vf x;
  for (int i = 0; i < W; ++i) x[i] = *a;
  return x;
#else
  return _mm256_broadcast_ss(a);
#endif
}

// One row of a register tile: c0 (and c1) += A[r] * b0 (b1).
template <int V>
[[gnu::always_inline]] inline void fma_row(const float* a, vf b0, vf b1, vf& c0, vf& c1) {
  const vf x = broadcast(a);
  c0 += x * b0;  // one FMA: GCC contracts a * b + c in C++ (-ffp-contract=fast)
  if constexpr (V == 2) c1 += x * b1;
}

// Where the kernel reads A: from a packed sliver (element (r, p) at a[p * MR + r]; Packed), or in place from
// row-major A (at a[r * lda + p]; Rows) or column-major A (at a[p * lda + r]; Cols). Reading in place skips
// packing, which weighs on the products of small K that a transformer is made of (x [4096, 128] @ W^T,
// N = 128..512): each element of A packed is read and written once more, then used for only 2 N flops
// (4096 x 128 x 128: 140 -> 156 GFLOP/s on one AVX-512 core without the packing). The A rows a Rows tile reads
// stay in L1 across the tile's K slice, as a packed sliver does; the tile still needs whole rows (m = R) of valid
// memory. Cols reads one short piece of a column per step, kc cache lines per tile: it pays only where those
// lines spread over L1's sets (sgemm_serial's reads_columns_in_place) - a convolution's column matrix read as
// its transpose, with OH*OW floats per column.
// Gather reads an implicit A, element (r, p) at row[r][step[p]] (sgemm_serial_gather: a convolution's column
// matrix read from its zero-padded image, with no im2col).
enum class AFrom { Packed, Rows, Cols, Gather };
// (Packed: lda is where the next sliver starts, MR * kc floats on, read by the rows past MR of a 12-row tile.)
template <AFrom From>
struct ARows {
  static constexpr AFrom from = From;
  const float* a;
  int64_t lda;
  [[gnu::always_inline]] const float* at(int r, int64_t p) const {
    if constexpr (From == AFrom::Rows) return a + r * lda + p;
    else if constexpr (From == AFrom::Cols) return a + p * lda + r;
    else return r < MR ? a + p * MR + r : a + lda + p * MR + (r - MR);
  }
};
template <>
struct ARows<AFrom::Gather> {
  static constexpr AFrom from = AFrom::Gather;
  const float *r0, *r1, *r2, *r3, *r4, *r5;  // the tile's rows (named, so that they live in registers)
  const int32_t* step;
  [[gnu::always_inline]] const float* at(int r, int64_t p) const {
    const float* row = r == 0 ? r0 : r == 1 ? r1 : r == 2 ? r2 : r == 3 ? r3 : r == 4 ? r4 : r5;
    return row + step[p];
  }
};
// A gathered tile whose rows are two runs of consecutive elements: rows [0, Split) at r0 + r, the rest at r1 + (r -
// Split; Split = R: one run). A convolution's positions are such runs along each output row (OW of them, stride 1),
// so any 12 consecutive ones are two runs where OW >= 11: 2 row pointers instead of 12, which with the step table, B
// and the loop's counters leave x86's 16 general registers enough room (12 pointers were spilled, two of them to
// vector registers, read back with moves that take the FMAs' ports).
template <int Split>
struct GatherRuns {
  static constexpr AFrom from = AFrom::Gather;
  const float *r0, *r1;
  const int32_t* step;
  [[gnu::always_inline]] const float* at(int r, int64_t p) const {
    return (r < Split ? r0 + r : r1 + (r - Split)) + step[p];
  }
};

// How a tile is stored: added to C's values (acc: a later K slice, or the caller asked to accumulate) or over
// them, plus bias[j] for its column j where bias is non-null (a linear layer's bias, added with the first K
// slice: no separate pass over C).
struct Epilogue {
  bool acc;
  const float* bias;  // the tile's first column's bias, or null
};

template <int R, int V, class ARead = ARows<AFrom::Packed>>
void kernel(int64_t kc, ARead A, const float* Bp, float* C, int64_t ldc, Epilogue e, int64_t m, int64_t n) {
  constexpr AFrom From = ARead::from;
  static_assert((R == 4 || R == 6 || R == 10 || R == 12) && (V == 1 || V == 2));
  static_assert(R <= MR || !std::is_same_v<ARead, ARows<AFrom::Gather>>, "the 6-pointer gather reader has MR rows");
  vf c[R][2];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) c[r][0] = c[r][1] = vf{};
  // the C tile is read (and written) after the loop: fetch it meanwhile (a 12-row tile's second half midway: 24
  // lines asked for at once, with A's streaming, made the in-place forward of x [4096, 128] @ W^T ~5% slower); the
  // A sliver streams from L2: ask for it a few steps ahead
  auto fetch_c = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      __builtin_prefetch(C + r * ldc);
      __builtin_prefetch(C + r * ldc + W);
    }
  };
  fetch_c(0, std::min<int64_t>(m, MR));
  for (int64_t p = 0; p < kc; ++p) {
    if constexpr (R > MR)
      if (p == kc / 2) fetch_c(MR, m);
    if constexpr (From == AFrom::Packed) {
      __builtin_prefetch(A.at(0, p + 8));
      if constexpr (R > MR) __builtin_prefetch(A.at(MR, p + 8));
    }
    if constexpr (From == AFrom::Cols) {  // and, into L2, 64 steps on: a weight gradient's dy^T is often in memory
      __builtin_prefetch(A.at(0, p + 8));
      __builtin_prefetch(A.at(R - 1, p + 8));
      __builtin_prefetch(A.at(0, p + 64), 0, 2);
      __builtin_prefetch(A.at(R - 1, p + 64), 0, 2);
    }
    const vf b0 = vload(Bp), b1 = V == 2 ? vload(Bp + W) : b0;
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) fma_row<V>(A.at(r, p), b0, b1, c[r][0], c[r][1]);
    Bp += NR;
  }
  // the stores index rows by m, known only at run time: they read a copy, so that c is only ever indexed by
  // constants (indexed at run time, c itself stayed in memory, stored at every step of the AVX2 build's loop)
  vf rows[R][2];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    rows[r][0] = c[r][0];
    rows[r][1] = c[r][1];
  }
  if (n == W * V) {  // whole rows of the tile: vector read-modify-writes
    for (int64_t r = 0; r < m; ++r) {
      float* cr = C + r * ldc;
      for (int v = 0; v < V; ++v) {
        vf x = rows[r][v];
        if (e.bias) x += vload(e.bias + W * v);
        vstore(cr + W * v, e.acc ? x + vload(cr + W * v) : x);
      }
    }
    return;
  }
  // a right edge tile: through a buffer, writing only the valid part
  alignas(64) float buf[R][2 * W];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) vstore(buf[r] + W * v, rows[r][v]);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const float x = e.bias ? buf[r][j] + e.bias[j] : buf[r][j];
      C[r * ldc + j] = e.acc ? x + C[r * ldc + j] : x;
    }
}

// C tile (m <= MR rows, n <= NR cols; with kTallTile up to 2 MR rows, from two packed slivers) with the kernel
// that wastes least.
inline void tile(int64_t kc, const float* Ap, const float* Bp, float* C, int64_t ldc, Epilogue e, int64_t m,
                 int64_t n) {
  const ARows<AFrom::Packed> a{Ap, MR * kc};
  if constexpr (kTallTile) {
    if (m > MR)
      return n > W ? kernel<kTallRows, 2>(kc, a, Bp, C, ldc, e, m, n)
                   : kernel<kTallRows, 1>(kc, a, Bp, C, ldc, e, m, n);
  }
  if (m > 4 && n > W) kernel<6, 2>(kc, a, Bp, C, ldc, e, m, n);
  else if (m > 4) kernel<6, 1>(kc, a, Bp, C, ldc, e, m, n);
  else if (n > W) kernel<4, 2>(kc, a, Bp, C, ldc, e, m, n);
  else kernel<4, 1>(kc, a, Bp, C, ldc, e, m, n);
}

// A tile of m = 2 MR (kTallTile), MR or 4 rows read in place from A (From: Rows or Cols), lda apart: the kernel of
// R = m rows reads only rows that exist.
template <AFrom From>
inline void tile_direct(int64_t kc, const float* A, int64_t lda, const float* Bp, float* C, int64_t ldc, Epilogue e,
                        int64_t m, int64_t n) {
  const ARows<From> a{A, lda};
  if constexpr (kTallTile) {
    if (m == kTallRows)
      return n > W ? kernel<kTallRows, 2>(kc, a, Bp, C, ldc, e, m, n)
                   : kernel<kTallRows, 1>(kc, a, Bp, C, ldc, e, m, n);
  }
  if (m == MR && n > W) kernel<6, 2>(kc, a, Bp, C, ldc, e, MR, n);
  else if (m == MR) kernel<6, 1>(kc, a, Bp, C, ldc, e, MR, n);
  else if (n > W) kernel<4, 2>(kc, a, Bp, C, ldc, e, 4, n);
  else kernel<4, 1>(kc, a, Bp, C, ldc, e, 4, n);
}

// The rows of a block's next tile, `left` rows before its end: a 12-row tile while a whole one fits, else MR.
inline int64_t tile_rows(int64_t left) { return kTallTile && left >= kTallRows ? kTallRows : MR; }

// A tile of the implicit A of sgemm_serial_gather: rows [0, m) at a + rows[i] (rows past m repeat the last, so
// that every address the kernel forms is valid; it stores only m rows).
inline void tile_gather(int64_t kc, const float* a, const int32_t* rows, int64_t m, const int32_t* step,
                        const float* Bp, float* C, int64_t ldc, Epilogue e, int64_t n) {
  auto row = [&](int64_t i) { return a + rows[std::min(i, m - 1)]; };
  const ARows<AFrom::Gather> g{row(0), row(1), row(2), row(3), row(4), row(5), step};
  if (m > 4 && n > W) kernel<6, 2>(kc, g, Bp, C, ldc, e, m, n);
  else if (m > 4) kernel<6, 1>(kc, g, Bp, C, ldc, e, m, n);
  else if (n > W) kernel<4, 2>(kc, g, Bp, C, ldc, e, m, n);
  else kernel<4, 1>(kc, g, Bp, C, ldc, e, m, n);
}

// Where the first R rows at `rows` stop being one run of consecutive offsets (R: they are one), or -1 where the
// rest is not a second run.
template <int R>
int runs_split(const int32_t* rows) {
  int split = 1;
  while (split < R && rows[split] == int64_t{rows[0]} + split) ++split;  // int64: no overflow past INT32_MAX
  for (int r = split + 1; r < R; ++r)
    if (rows[r] != int64_t{rows[split]} + (r - split)) return -1;
  return split;
}

// An R-row gathered tile of two runs split at `split` (runs_split), with the kernel of that split.
template <int R, int V, int Split = 1>
void tile_gather_runs(int split, int64_t kc, const float* a, const int32_t* rows, const int32_t* step, const float* Bp,
                      float* C, int64_t ldc, Epilogue e, int64_t n) {
  if constexpr (Split <= R) {
    if (split != Split) return tile_gather_runs<R, V, Split + 1>(split, kc, a, rows, step, Bp, C, ldc, e, n);
    const GatherRuns<Split> g{a + rows[0], a + rows[Split < R ? Split : 0], step};
    kernel<R, V>(kc, g, Bp, C, ldc, e, R, n);
  }
}

// The shape of one tile of a gathered product's rows, planned once per product (the rows do not change across its
// K slices and slivers): `rows` rows from its first, read as two runs split at `split` (runs_split), or through MR
// row pointers where split is 0.
struct GatherTile {
  int32_t rows, split;
};

// The tiles of M gathered rows, in order: with kTallTile, 12 or 10 rows wherever they are two runs (a convolution's
// positions along output rows of 11 or more; its taps, runs of KW = 5 along a kernel's rows), else MR or fewer.
// Returns their count (at most M / MR + 1: every tile but the last has MR rows or more).
int64_t plan_gather_tiles(int64_t M, const int32_t* rows, GatherTile* tiles) {
  int64_t count = 0;
  for (int64_t ir = 0; ir < M;) {
    GatherTile t{static_cast<int32_t>(std::min(MR, M - ir)), 0};
    if constexpr (kTallTile) {
      if (const int split = M - ir >= kTallRows ? runs_split<kTallRows>(rows + ir) : -1; split > 0)
        t = {kTallRows, split};
      else if (const int split10 = M - ir >= 10 ? runs_split<10>(rows + ir) : -1; split10 > 0) t = {10, split10};
    }
    tiles[count++] = t;
    ir += t.rows;
  }
  return count;
}

// One planned tile of a gathered product, at its first row's offsets `rows`.
inline void tile_gather_planned(GatherTile t, int64_t kc, const float* a, const int32_t* rows, const int32_t* step,
                                const float* Bp, float* C, int64_t ldc, Epilogue e, int64_t n) {
  if constexpr (kTallTile) {
    if (t.split > 0 && t.rows == kTallRows)
      return n > W ? tile_gather_runs<kTallRows, 2>(t.split, kc, a, rows, step, Bp, C, ldc, e, n)
                   : tile_gather_runs<kTallRows, 1>(t.split, kc, a, rows, step, Bp, C, ldc, e, n);
    if (t.split > 0)
      return n > W ? tile_gather_runs<10, 2>(t.split, kc, a, rows, step, Bp, C, ldc, e, n)
                   : tile_gather_runs<10, 1>(t.split, kc, a, rows, step, Bp, C, ldc, e, n);
  }
  tile_gather(kc, a, rows, t.rows, step, Bp, C, ldc, e, n);
}

// Whether column-major A (rs == 1) is read in place: one kSgemmMR-float piece of a column per step, so a tile
// touches one or two cache lines per step of its K slice (kSgemmKC steps). They stay in L1 if they spread over its 64
// sets, i.e. unless the column stride is a multiple of 256 bytes (then they fall in at most 16 sets of 12 ways).
// Even then reading in place wins while N is small: packing costs a read and a write of each element of A for
// only 2 N flops. Measured on one AVX-512 core (Xeon model 207): dy^T @ x of the charlm, K = 4096, stride 128 to
// 512, N = 128..512: 127-137 -> 141-146 GFLOP/s in place; mlp-big's dy^T @ x, K = 256, stride 1024, N = 784 and
// 1024: 153 packed, 136 in place. With a stride of a multiple of 4 KiB every line falls in one set, and the limit is
// lower (Xeon model 167, K = 256, stride 1024: N = 128 5% faster in place, 192 even, 256 3% and 512 12-15% faster
// packed - the share of each of 2 threads in mlp-big's 1024 x 1024 weight gradient).
// (N is a thread's share after sgemm splits the columns: each thread packs its own blocks of A.)
inline bool reads_columns_in_place(int64_t a_rs, int64_t a_cs, int64_t N) {
  return a_rs == 1 && (a_cs % 64 != 0 || N <= (a_cs % 1024 == 0 ? 192 : 512));
}

// Whether row-major A is read in place: while N is small (a transformer's x [4096, 128] @ W^T, N = 128..512), where
// packing would cost a read and a write of A per 2 N flops. Wider products pack it, so that the tile's 12 rows come
// from one stream, not from 12 rows lda apart (with lda a multiple of 4 KiB, in one set of L1): on one core of the
// Xeon model 167, mlp-big's x @ W1^T (256 x 1024 x 784) and dy @ W2 (256 x 1024 x 1024, lda 1024) ran 2-5% faster
// packed.
inline bool reads_rows_in_place(int64_t a_cs, int64_t N) { return a_cs == 1 && N <= 512; }

// The rows of C a block takes: MC (A packed: a block that stays in L2), except for row-major A read in place
// with a short K slice and a wide B. Such A rows are read again for every sliver of B in the block: 48 rows of
// K <= 128 fit in half of L1 beside the sliver, so they come from L2 once per block instead of once per sliver,
// which outweighs the B panel's extra passes (read from L2 once per block) when N >= 256. On one core of the
// Xeon model 167, charlm's x [4096, 128] @ W^T with N = 384 and 512 and dy [4096, 128] @ W2 [128, 512] ran 4-6%
// faster in the step with blocks of 48 rows than of 144; N = 128 ran 2-3% slower, and so did the products with
// K slices of 256 (the A rows' share of L1 would be 24, and the B panel's passes cost more).
inline int64_t block_rows(bool rows_a, int64_t N, int64_t kc) {
  constexpr int64_t kInL1 = 48;  // rows of A (kc <= 128 floats each) that stay in L1
  return rows_a && N >= 256 && kc <= 128 ? kInL1 : MC;
}

// C (+)= a product with K = 0, a sum of nothing: C kept (accumulate) or zeroed, plus bias[j] where bias is non-null.
void empty_product(int64_t M, int64_t N, float* C, int64_t ldc, bool accumulate, const float* bias) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = (accumulate ? C[i * ldc + j] : 0.f) + (bias ? bias[j] : 0.f);
}

// One thread's share: the whole product for rows [0, M) and cols [0, N) of its sub-problem (plus bias[j] per
// column where bias is non-null). Either operand may come pre-packed (Ap / Bp, laid out as in gemm.h), in which
// case its own pointer is not read.
void sgemm_serial(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* Ap_all,
                  const float* B, int64_t b_rs, int64_t b_cs, const float* Bp_all, float* C, int64_t ldc,
                  bool accumulate, const float* bias = nullptr) {
  const PackedBLayout blay(K, N);  // where a pre-packed B keeps each slice and sliver
  const int64_t kc_step = blay.kc, mpad = (M + MR - 1) / MR * MR;
  // Row-major A is read in place (ARows) unless the caller packed it already; column-major A too where that pays.
  const bool rows_a = !Ap_all && reads_rows_in_place(a_cs, N),
             cols_a = !Ap_all && !rows_a && reads_columns_in_place(a_rs, a_cs, N);
  const bool direct_a = rows_a || cols_a;
  const int64_t mc_step = block_rows(rows_a, N, kc_step);
  const int64_t nc_max = std::min(NC, blay.npad), mc_max = std::min(mc_step, mpad);
  Scratch bpack(Bp_all ? 0 : sizeof(float) * static_cast<size_t>(nc_max * kc_step));
  Scratch apack(Ap_all ? 0 : sizeof(float) * static_cast<size_t>(mc_max * kc_step));
  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += kc_step) {
      const int64_t kc = std::min(kc_step, K - pc);
      const bool acc = accumulate || pc > 0;  // later K slices add to what the first wrote
      const float* Bp = Bp_all ? Bp_all + blay.offset(pc, jc) : bpack.as<float>();
      if (!Bp_all) pack_b(kc, nc, B + pc * b_rs + jc * b_cs, b_rs, b_cs, bpack.as<float>());
      for (int64_t ic = 0; ic < M; ic += mc_step) {
        const int64_t mc = std::min(mc_step, M - ic);
        // rows [0, direct) of the block are read in place, in slivers of MR and a last one of exactly 4 rows (M = 64,
        // the blocks of attention: 10 x 6 + 4); the rest is packed (a ragged last sliver of 1, 2, 3 or 5 rows)
        const int64_t whole = direct_a ? mc / MR * MR : 0, direct = direct_a && mc - whole == 4 ? mc : whole;
        const float* Ap = Ap_all ? Ap_all + pc * mpad + ic * kc : apack.as<float>();
        if (!Ap_all && direct < mc)
          pack_a(mc - direct, kc, A + (ic + direct) * a_rs + pc * a_cs, a_rs, a_cs, apack.as<float>());
        for (int64_t jr = 0; jr < nc; jr += NR) {
          const int64_t n = std::min(NR, nc - jr);
          float* Cj = C + ic * ldc + jc + jr;
          const Epilogue e{acc, bias && pc == 0 ? bias + jc + jr : nullptr};
          int64_t ir = 0, rows = 0;
          const float* Ab = A + ic * a_rs + pc * a_cs;  // the block's first element
          for (; ir < direct && rows_a; ir += rows) {
            rows = std::min(tile_rows(direct - ir), direct - ir);
            tile_direct<AFrom::Rows>(kc, Ab + ir * a_rs, a_rs, Bp + jr * kc, Cj + ir * ldc, ldc, e, rows, n);
          }
          for (; ir < direct && cols_a; ir += rows) {
            rows = std::min(tile_rows(direct - ir), direct - ir);
            tile_direct<AFrom::Cols>(kc, Ab + ir, a_cs, Bp + jr * kc, Cj + ir * ldc, ldc, e, rows, n);
          }
          for (; ir < mc; ir += rows) {
            rows = std::min(tile_rows(mc - ir), mc - ir);
            tile(kc, Ap + (ir - direct) * kc, Bp + jr * kc, Cj + ir * ldc, ldc, e, rows, n);
          }
        }
      }
    }
  }
}

// A product of long K and small C split along K (a weight gradient, dy^T x over 4096 tokens: [512, 4096] x
// [4096, 128]): part p takes K rows [k0, k1) into its own C (part 0 into C itself, the others into scratch),
// which are then added in part order. Split along M or N, every part would pack all of B (or stream all of A) for
// a share of the work: at 2 threads charlm's weight gradients went 1.77-1.80x one thread that way. The sum's
// order depends on the thread count (docs/reproducibility.md).
void split_k(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* B, int64_t b_rs,
             int64_t b_cs, float* C, int64_t ldc, bool accumulate, int64_t parts, const float* bias) {
  const int64_t chunk = ((K + parts - 1) / parts + kSgemmKC - 1) / kSgemmKC * kSgemmKC;
  parts = (K + chunk - 1) / chunk;
  if (parts == 1)
    return sgemm_serial(M, N, K, A, a_rs, a_cs, nullptr, B, b_rs, b_cs, nullptr, C, ldc, accumulate, bias);
  Scratch partial(sizeof(float) * static_cast<size_t>((parts - 1) * M * N));
  float* extra = partial.as<float>();
  parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t k0 = p * chunk, kn = std::min(K, k0 + chunk) - k0;
      if (p == 0) sgemm_serial(M, N, kn, A, a_rs, a_cs, nullptr, B, b_rs, b_cs, nullptr, C, ldc, accumulate, bias);
      else
        sgemm_serial(M, N, kn, A + k0 * a_cs, a_rs, a_cs, nullptr, B + k0 * b_rs, b_rs, b_cs, nullptr,
                     extra + (p - 1) * M * N, N, false);
    }
  });
  parallel_for(0, M, std::max<int64_t>(1, 4096 / N), [&](int64_t i0, int64_t i1) {
    for (int64_t p = 1; p < parts; ++p)
      for (int64_t i = i0; i < i1; ++i) {
        float* c = C + i * ldc;
        const float* e = extra + (p - 1) * M * N + i * N;
        for (int64_t j = 0; j < N; ++j) c[j] += e[j];
      }
  });
}

}  // namespace

bool sgemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* B, int64_t b_rs,
           int64_t b_cs, float* C, int64_t ldc, bool accumulate, int threads, const float* bias) {
  if (M == 0 || N == 0) return true;
  if (K == 0) {
    empty_product(M, N, C, ldc, accumulate, bias);
    return true;
  }
  // Threads split the larger of M and N into independent sub-products (each packs its own blocks); below
  // ~1 MFLOP per thread the fork costs more than it saves.
  const int64_t flops = 2 * M * N * K;
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, flops / (1 << 20)));
  if (parts == 1) {
    sgemm_serial(M, N, K, A, a_rs, a_cs, nullptr, B, b_rs, b_cs, nullptr, C, ldc, accumulate, bias);
    return true;
  }
  if (K >= 8 * std::max(M, N)) {
    split_k(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, ldc, accumulate, parts, bias);
    return true;
  }
  const bool split_n = N >= M;
  const int64_t len = split_n ? N : M, unit = split_n ? NR : MR;
  const int64_t chunk = ((len + parts - 1) / parts + unit - 1) / unit * unit;
  parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t s = p * chunk, e = std::min(len, s + chunk);
      if (s >= e) continue;
      if (split_n)
        sgemm_serial(M, e - s, K, A, a_rs, a_cs, nullptr, B + s * b_cs, b_rs, b_cs, nullptr, C + s, ldc, accumulate,
                     bias ? bias + s : nullptr);
      else
        sgemm_serial(e - s, N, K, A + s * a_rs, a_rs, a_cs, nullptr, B, b_rs, b_cs, nullptr, C + s * ldc, ldc,
                     accumulate, bias);
    }
  });
  return true;
}

void sgemm_serial_gather(int64_t M, int64_t N, int64_t K, const float* a, const int32_t* row_off,
                         const int32_t* step_off, const float* Bp, float* C, int64_t ldc, bool accumulate,
                         const float* bias) {
  if (M == 0 || N == 0) return;
  if (K == 0) return empty_product(M, N, C, ldc, accumulate, bias);
  // No blocks of A to pack: A is read from its source (an image of a few tens of KB, in L1 or L2) for each
  // K slice and B sliver, which stays in L1 across all of M.
  const PackedBLayout lay(K, N);
  Scratch plan(sizeof(GatherTile) * static_cast<size_t>(M / MR + 1));
  GatherTile* tiles = plan.as<GatherTile>();
  const int64_t count = plan_gather_tiles(M, row_off, tiles);
  for (int64_t pc = 0; pc < K; pc += lay.kc) {
    const int64_t kc = std::min(lay.kc, K - pc);
    const bool acc = accumulate || pc > 0;
    for (int64_t jr = 0; jr < N; jr += NR) {
      const float* Bs = Bp + lay.offset(pc, jr);
      const int64_t n = std::min(NR, N - jr);
      for (int64_t t = 0, ir = 0; t < count; ir += tiles[t++].rows)
        tile_gather_planned(tiles[t], kc, a, row_off + ir, step_off + pc, Bs, C + ir * ldc + jr, ldc,
                            {acc, bias && pc == 0 ? bias + jr : nullptr}, n);
    }
  }
}

void sgemm_pack_a(int64_t M, int64_t K, const float* A, int64_t rs, int64_t cs, float* out) {
  const int64_t kc_step = sgemm_slice_depth(K), mpad = (M + MR - 1) / MR * MR;
  for (int64_t pc = 0; pc < K; pc += kc_step)
    pack_a(M, std::min(kc_step, K - pc), A + pc * cs, rs, cs, out + pc * mpad);
}

void sgemm_pack_b(int64_t K, int64_t N, const float* B, int64_t rs, int64_t cs, float* out) {
  sgemm_pack_b_columns(K, N, 0, N, B, rs, cs, out);
}

void sgemm_pack_b_columns(int64_t K, int64_t N, int64_t j0, int64_t nj, const float* B, int64_t rs, int64_t cs,
                          float* out) {
  const PackedBLayout lay(K, N);
  for (int64_t pc = 0; pc < K; pc += lay.kc) {
    const int64_t kc = std::min(lay.kc, K - pc);
    pack_b(kc, nj, B + pc * rs, rs, cs, out + pc * lay.npad + j0 * kc);
  }
}

void sgemm_serial_packed(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* Ap,
                         const float* B, int64_t b_rs, int64_t b_cs, const float* Bp, float* C, int64_t ldc,
                         bool accumulate) {
  if (M == 0 || N == 0) return;
  if (K == 0) return empty_product(M, N, C, ldc, accumulate, nullptr);
  sgemm_serial(M, N, K, A, a_rs, a_cs, Ap, B, b_rs, b_cs, Bp, C, ldc, accumulate);
}

// Eight rows of `in` at a time, read whole (callers keep `in` in L1 or L2). `out` is often memory that is not in
// cache (a fresh output, last written a training step ago): each 8 x 8 block asks for the lines of `out` it will
// write three blocks later, for writing, so that their reads from L3 overlap the work instead of stalling it.
void transpose_f32(int64_t rows, int64_t cols, const float* in, int64_t ld_in, float* out, int64_t ld_out) {
  int64_t i = 0;
  for (; i + 8 <= rows; i += 8) {
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
      for (int c = 0; c < 8; ++c) __builtin_prefetch(out + (j + c) * ld_out + i + 24, 1);
      transpose8x8(in + i * ld_in + j, ld_in, out + j * ld_out + i, ld_out);
    }
    for (; j < cols; ++j)
      for (int64_t r = i; r < i + 8; ++r) out[j * ld_out + r] = in[r * ld_in + j];
  }
  for (; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[j * ld_out + i] = in[i * ld_in + j];
}

#else

void sgemm_serial_gather(int64_t, int64_t, int64_t, const float*, const int32_t*, const int32_t*, const float*, float*,
                         int64_t, bool, const float*) {
  throw InternalError("sgemm_serial_gather: this build has no AVX2/FMA kernel");
}

void transpose_f32(int64_t rows, int64_t cols, const float* in, int64_t ld_in, float* out, int64_t ld_out) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[j * ld_out + i] = in[i * ld_in + j];
}

void sgemm_pack_a(int64_t, int64_t, const float*, int64_t, int64_t, float*) {
  throw InternalError("sgemm_pack_a: this build has no AVX2/FMA kernel");
}
void sgemm_pack_b(int64_t, int64_t, const float*, int64_t, int64_t, float*) {
  throw InternalError("sgemm_pack_b: this build has no AVX2/FMA kernel");
}
void sgemm_pack_b_columns(int64_t, int64_t, int64_t, int64_t, const float*, int64_t, int64_t, float*) {
  throw InternalError("sgemm_pack_b_columns: this build has no AVX2/FMA kernel");
}
void sgemm_serial_packed(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*, const float*, int64_t,
                         int64_t, const float*, float*, int64_t, bool) {
  throw InternalError("sgemm_serial_packed: this build has no AVX2/FMA kernel");
}

bool sgemm(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t,
           bool, int, const float*) {
  return false;  // no AVX2/FMA kernel in this build: the caller uses Eigen
}

#endif

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
