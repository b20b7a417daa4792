// defines: sgemm — a BLIS-style float32 GEMM. The loops block C into NC-column and MC-row tiles and K into
// KC slices so that a packed KC x NR sliver of B stays in L1, an MC x KC block of A in L2 and a KC x NC panel
// of B in L3; the 6 x 16 micro-kernel keeps its C tile in 12 AVX registers and does two FMAs per broadcast.
#include "gemm.h"

#include <algorithm>
#include <cstring>

#include "cpu_backend.h"
#include "parallel.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_HAVE_SGEMM_KERNEL 1
#endif

namespace ember::cpu {

#ifdef EMBER_HAVE_SGEMM_KERNEL
namespace {

constexpr int64_t MR = 6, NR = 16;          // micro-tile of C
constexpr int64_t KC = 256, MC = 144, NC = 3072;  // cache blocks (MC a multiple of MR, NC of NR)

// Packs rows [0, mc) x cols [0, kc) of A into MR-row slivers: sliver s holds, for each p, MR values
// A[s*MR + r, p]; rows past mc are zero so the kernel never needs a row count.
void pack_a(int64_t mc, int64_t kc, const float* A, int64_t rs, int64_t cs, float* out) {
  for (int64_t i = 0; i < mc; i += MR) {
    const int64_t rows = std::min(MR, mc - i);
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t r = 0; r < rows; ++r) out[p * MR + r] = A[(i + r) * rs + p * cs];
      for (int64_t r = rows; r < MR; ++r) out[p * MR + r] = 0.f;
    }
    out += MR * kc;
  }
}

// Packs rows [0, kc) x cols [0, nc) of B into NR-column slivers, zero-padded past nc.
void pack_b(int64_t kc, int64_t nc, const float* B, int64_t rs, int64_t cs, float* out) {
  for (int64_t j = 0; j < nc; j += NR) {
    const int64_t cols = std::min(NR, nc - j);
    if (cs == 1 && cols == NR) {
      for (int64_t p = 0; p < kc; ++p) std::memcpy(out + p * NR, B + p * rs + j, NR * sizeof(float));
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t c = 0; c < cols; ++c) out[p * NR + c] = B[p * rs + (j + c) * cs];
        for (int64_t c = cols; c < NR; ++c) out[p * NR + c] = 0.f;
      }
    }
    out += NR * kc;
  }
}

// C[6, 16] (+)= Ap[kc, 6]^T-sliver @ Bp[kc, 16]-sliver. Writes only the first m rows / n cols of C.
void micro_kernel(int64_t kc, const float* Ap, const float* Bp, float* C, int64_t ldc, bool acc, int64_t m, int64_t n) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(), c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(Bp), b1 = _mm256_loadu_ps(Bp + 8);
    __m256 a = _mm256_broadcast_ss(Ap + 0);
    c00 = _mm256_fmadd_ps(a, b0, c00); c01 = _mm256_fmadd_ps(a, b1, c01);
    a = _mm256_broadcast_ss(Ap + 1);
    c10 = _mm256_fmadd_ps(a, b0, c10); c11 = _mm256_fmadd_ps(a, b1, c11);
    a = _mm256_broadcast_ss(Ap + 2);
    c20 = _mm256_fmadd_ps(a, b0, c20); c21 = _mm256_fmadd_ps(a, b1, c21);
    a = _mm256_broadcast_ss(Ap + 3);
    c30 = _mm256_fmadd_ps(a, b0, c30); c31 = _mm256_fmadd_ps(a, b1, c31);
    a = _mm256_broadcast_ss(Ap + 4);
    c40 = _mm256_fmadd_ps(a, b0, c40); c41 = _mm256_fmadd_ps(a, b1, c41);
    a = _mm256_broadcast_ss(Ap + 5);
    c50 = _mm256_fmadd_ps(a, b0, c50); c51 = _mm256_fmadd_ps(a, b1, c51);
    Ap += MR;
    Bp += NR;
  }
  const __m256 rows[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (m == MR && n == NR) {
    for (int64_t r = 0; r < MR; ++r) {
      float* cr = C + r * ldc;
      __m256 v0 = rows[r][0], v1 = rows[r][1];
      if (acc) { v0 = _mm256_add_ps(v0, _mm256_loadu_ps(cr)); v1 = _mm256_add_ps(v1, _mm256_loadu_ps(cr + 8)); }
      _mm256_storeu_ps(cr, v0);
      _mm256_storeu_ps(cr + 8, v1);
    }
    return;
  }
  // An edge tile: go through a buffer and write only the valid part.
  alignas(32) float buf[MR][NR];
  for (int64_t r = 0; r < MR; ++r) { _mm256_store_ps(buf[r], rows[r][0]); _mm256_store_ps(buf[r] + 8, rows[r][1]); }
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) C[r * ldc + c] = acc ? C[r * ldc + c] + buf[r][c] : buf[r][c];
}

// One thread's share: the whole product for rows [0, M) and cols [0, N) of its sub-problem.
void sgemm_serial(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* B,
                  int64_t b_rs, int64_t b_cs, float* C, int64_t ldc, bool accumulate) {
  const int64_t nc_max = std::min(NC, (N + NR - 1) / NR * NR), kc_max = std::min(KC, K);
  const int64_t mc_max = std::min(MC, (M + MR - 1) / MR * MR);
  Scratch bpack(sizeof(float) * static_cast<size_t>(nc_max * kc_max));
  Scratch apack(sizeof(float) * static_cast<size_t>(mc_max * kc_max));
  float* Bp = bpack.as<float>();
  float* Ap = apack.as<float>();
  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc);
      const bool acc = accumulate || pc > 0;  // later K slices add to what the first wrote
      pack_b(kc, nc, B + pc * b_rs + jc * b_cs, b_rs, b_cs, Bp);
      for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = std::min(MC, M - ic);
        pack_a(mc, kc, A + ic * a_rs + pc * a_cs, a_rs, a_cs, Ap);
        for (int64_t jr = 0; jr < nc; jr += NR)
          for (int64_t ir = 0; ir < mc; ir += MR)
            micro_kernel(kc, Ap + ir * kc, Bp + jr * kc, C + (ic + ir) * ldc + jc + jr, ldc, acc,
                         std::min(MR, mc - ir), std::min(NR, nc - jr));
      }
    }
  }
}

}  // namespace

bool sgemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* B, int64_t b_rs,
           int64_t b_cs, float* C, int64_t ldc, bool accumulate, int threads) {
  if (M == 0 || N == 0) return true;
  if (K == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.f);
    return true;
  }
  // Threads split the larger of M and N into independent sub-products (each packs its own blocks); below
  // ~1 MFLOP per thread the fork costs more than it saves.
  const int64_t flops = 2 * M * N * K;
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, flops / (1 << 20)));
  if (parts == 1) {
    sgemm_serial(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, ldc, accumulate);
    return true;
  }
  const bool split_n = N >= M;
  const int64_t len = split_n ? N : M, unit = split_n ? NR : MR;
  const int64_t chunk = ((len + parts - 1) / parts + unit - 1) / unit * unit;
  parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t s = p * chunk, e = std::min(len, s + chunk);
      if (s >= e) continue;
      if (split_n) sgemm_serial(M, e - s, K, A, a_rs, a_cs, B + s * b_cs, b_rs, b_cs, C + s, ldc, accumulate);
      else sgemm_serial(e - s, N, K, A + s * a_rs, a_rs, a_cs, B, b_rs, b_cs, C + s * ldc, ldc, accumulate);
    }
  });
  return true;
}

#else

bool sgemm(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t,
           bool, int) {
  return false;  // no AVX2/FMA kernel in this build: the caller uses Eigen
}

#endif

}  // namespace ember::cpu
