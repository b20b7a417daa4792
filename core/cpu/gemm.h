// defines: sgemm, the float32 GEMM of the CPU backend (packed, cache-blocked; a 6 x 16 AVX2/FMA micro-kernel, or
// in the AVX-512 variant 6 x 32 and 12 x 32 ones). Private to core/.
#pragma once
#include <algorithm>
#include <cstdint>
#include "isa.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

#if defined(__AVX2__) && defined(__FMA__)
inline constexpr bool kHaveSgemmKernel = true;
#else
inline constexpr bool kHaveSgemmKernel = false;
#endif

// The wide micro-kernel (16-float vectors, 32 columns per tile) of the AVX-512 variant; EMBER_SGEMM_WIDE builds it
// with AVX2 too, so that the tests check its logic on any machine (tests/core/test_cpu_variants.cpp).
#if defined(__AVX512F__) || defined(EMBER_SGEMM_WIDE)
#define EMBER_SGEMM_WIDE_KERNEL 1
#endif

// C[M, N] (row-major, row stride ldc) = A[M, K] @ B[K, N], or += when accumulate, plus bias[j] in every row when
// bias (N floats) is non-null, added as the tiles are stored. A and B take any element strides (rs = row stride,
// cs = column stride): B is packed, A read in place where its layout allows (row-major; column-major where that
// pays) and packed otherwise. Uses up to `threads` threads. Returns false when this build has no AVX2/FMA kernel
// (the caller falls back).
bool sgemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* B, int64_t b_rs,
           int64_t b_cs, float* C, int64_t ldc, bool accumulate, int threads, const float* bias = nullptr);

// Single-threaded C (+)= A @ B for float (our kernel) and double (Eigen), any strides for A and B; used inside
// per-image loops (conv2d) that already run one image per thread.
void gemm_serial(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* B,
                 int64_t b_rs, int64_t b_cs, float* C, int64_t ldc, bool accumulate);
void gemm_serial(int64_t M, int64_t N, int64_t K, const double* A, int64_t a_rs, int64_t a_cs, const double* B,
                 int64_t b_rs, int64_t b_cs, double* C, int64_t ldc, bool accumulate);

// Pre-packed operands, for callers that reuse one (conv2d packs its weights once for all images) or write one
// straight in packed form (conv2d's forward im2col). K is cut into slices of sgemm_slice_depth(K) rows (the last
// may be shorter); packed A holds, slice after slice, its kSgemmMR-row slivers (rows past M zero), and packed B
// its kSgemmNR-column slivers, each sliver storing its slice row by row. Only when kHaveSgemmKernel.
#ifdef EMBER_SGEMM_WIDE_KERNEL
inline constexpr int64_t kSgemmMR = 6, kSgemmNR = 32, kSgemmKC = 256;  // a KC x 32 sliver of B: 32 KiB, L1
#else
inline constexpr int64_t kSgemmMR = 6, kSgemmNR = 16, kSgemmKC = 384;
#endif

// K slices of equal depth at most kSgemmKC (K = 800 -> 4 x 200, not 3 x 256 + 32: a thin last slice costs a
// whole pass over C)
inline int64_t sgemm_slice_depth(int64_t K) {
  const int64_t slices = (K + kSgemmKC - 1) / kSgemmKC;
  return slices == 0 ? 1 : (K + slices - 1) / slices;
}
inline int64_t sgemm_packed_a_size(int64_t M, int64_t K) { return (M + kSgemmMR - 1) / kSgemmMR * kSgemmMR * K; }

// Where B[p, n .. n + kSgemmNR) lives in packed B [K, N], for n a multiple of kSgemmNR (columns past N are
// padding the kernel computes and drops; a writer should zero them).
struct PackedBLayout {
  int64_t K, N, kc, npad;
  PackedBLayout(int64_t K_, int64_t N_)
      : K(K_), N(N_), kc(sgemm_slice_depth(K_)), npad((N_ + kSgemmNR - 1) / kSgemmNR * kSgemmNR) {}
  int64_t size() const { return K * npad; }  // floats
  int64_t offset(int64_t p, int64_t n) const {
    const int64_t s0 = p / kc * kc;  // first row of p's slice
    return s0 * npad + n * std::min(kc, K - s0) + (p - s0) * kSgemmNR;
  }
};

// A [M, K] packed (sgemm_packed_a_size floats).
void sgemm_pack_a(int64_t M, int64_t K, const float* A, int64_t rs, int64_t cs, float* out);

// B [K, N] packed (PackedBLayout(K, N).size() floats).
void sgemm_pack_b(int64_t K, int64_t N, const float* B, int64_t rs, int64_t cs, float* out);
// Columns [j0, j0 + nj) of B [K, N], given as the [K, nj] matrix at B, packed into their place in packed B
// (j0 a multiple of kSgemmNR; nj one too unless j0 + nj == N): for callers that produce B a few columns at a time.
void sgemm_pack_b_columns(int64_t K, int64_t N, int64_t j0, int64_t nj, const float* B, int64_t rs, int64_t cs,
                          float* out);

// C[M, N] (+)= A @ B on this thread, A taken from Ap when it is non-null (packed by sgemm_pack_a) and B from Bp
// when that is non-null (laid out as PackedBLayout(K, N)); the plain pointer of a pre-packed operand is unused.
void sgemm_serial_packed(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* Ap,
                         const float* B, int64_t b_rs, int64_t b_cs, const float* Bp, float* C, int64_t ldc,
                         bool accumulate);

// C[M, N] (+)= A @ B (+ bias[j] in every row where bias is non-null, added with the first K slice) on this thread
// for an implicit A: A[i, p] = a[row_off[i] + step_off[p]], and B laid out as PackedBLayout(K, N). A convolution's
// column matrix is such an A, read from its zero-padded image (row_off: where each output position's window starts,
// step_off: where each (channel, kh, kw) lies within a window), or its transpose with the roles of the two tables
// swapped. Only when kHaveSgemmKernel.
void sgemm_serial_gather(int64_t M, int64_t N, int64_t K, const float* a, const int32_t* row_off,
                         const int32_t* step_off, const float* Bp, float* C, int64_t ldc, bool accumulate,
                         const float* bias = nullptr);

// out[j * ld_out + i] = in[i * ld_in + j] for a [rows, cols] matrix (8 x 8 blocks in vector registers).
void transpose_f32(int64_t rows, int64_t cols, const float* in, int64_t ld_in, float* out, int64_t ld_out);

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
