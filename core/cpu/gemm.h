// defines: sgemm, the float32 GEMM of the CPU backend (packed, cache-blocked, an AVX2/FMA micro-kernel).
// Private to core/.
#pragma once
#include <cstdint>

namespace ember::cpu {

#if defined(__AVX2__) && defined(__FMA__)
inline constexpr bool kHaveSgemmKernel = true;
#else
inline constexpr bool kHaveSgemmKernel = false;
#endif

// C[M, N] (row-major, row stride ldc) = A[M, K] @ B[K, N], or += when accumulate. A and B take any element
// strides (rs = row stride, cs = column stride): both are packed, so transposed views cost nothing extra.
// Uses up to `threads` OpenMP threads. Returns false when this build has no AVX2/FMA kernel (caller falls back).
bool sgemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* B, int64_t b_rs,
           int64_t b_cs, float* C, int64_t ldc, bool accumulate, int threads);

// Single-threaded C (+)= A @ B for float (our kernel) and double (Eigen), any strides for A and B; used inside
// per-image loops (conv2d) that already run one image per thread.
void gemm_serial(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* B,
                 int64_t b_rs, int64_t b_cs, float* C, int64_t ldc, bool accumulate);
void gemm_serial(int64_t M, int64_t N, int64_t K, const double* A, int64_t a_rs, int64_t a_cs, const double* B,
                 int64_t b_rs, int64_t b_cs, double* C, int64_t ldc, bool accumulate);

}  // namespace ember::cpu
