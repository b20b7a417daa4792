// One core's float32 FMA limit, measured: independent chains of fused multiply-adds on AVX2 (8 lanes, 12 chains)
// and, where the CPU has it, AVX-512 (16 lanes, 16 chains) registers, enough that nothing but the FMA units bounds
// them (4 cycles of latency on 2 ports need 8 in flight). bench/train_table.sh divides each row's FLOP rate by it.
//   ember_fma_peak          prints "avx2 <GFLOP/s> avx512 <GFLOP/s or ->", the best of 5 runs each
// Standard C++ and compiler intrinsics only (nothing of Ember), built without -march so both paths are in it.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace {

constexpr long kIters = 20'000'000;

template <class Body>
double best_gflops(double flops_per_iter, Body&& body) {
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    const float sink = body();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (sink == 12345.f) std::puts("");  // keeps the result alive
    best = std::max(best, flops_per_iter * kIters / s / 1e9);
  }
  return best;
}

// 12 chains on AVX2: with the two constants they fill 14 of its 16 registers (16 chains would spill to the stack).
__attribute__((target("avx2,fma"))) float chains_avx2() {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < kIters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"))) float chains_avx512() {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < kIters; ++it)
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);  // every chain feeds the result: none is dropped
  return _mm512_reduce_add_ps(s);
}

}  // namespace

int main() {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::printf("avx2 - avx512 -\n");
    return 0;
  }
  const double avx2 = best_gflops(12 * 8 * 2, chains_avx2);
  std::printf("avx2 %.1f avx512 ", avx2);
  if (__builtin_cpu_supports("avx512f")) std::printf("%.1f\n", best_gflops(16 * 16 * 2, chains_avx512));
  else std::printf("-\n");
  return 0;
}
