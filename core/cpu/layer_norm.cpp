// defines: the CPU row norms (backend.h: row_norm / row_norm_backward; layer and RMS norm) over the rows of x [N, D].
// A thread takes whole rows. Per row: the sum in sixteen partial sums of x's type (so the adds vectorise), then
// the variance as a second pass over the deviations (the row is in L1 by then), both combined in double; then
// one multiply-add per element. The backward's dx is per row in the same way; dw and db sum over rows: the same
// pass keeps partial sums per block of rows, added up per column at the end.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu_backend.h"
#include "parallel.h"
#include "vec_math.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {
namespace {

// Sum of f(i) for i in [0, n): sixteen partial sums in T (one AVX-512 vector, two AVX2 ones), added pairwise in T
// and the tail in double. (The partial sums once went to double one by one: for rows of D = 128, as in a
// transformer, those scalar conversions and adds cost more than the row's vector work.)
template <class T, class F>
inline double row_sum(int64_t n, F f) {
  constexpr int kLanes = 16;
  T s[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) s[k] += f(i + k);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) s[k] += s[k + w];
  double total = static_cast<double>(s[0]);
  for (; i < n; ++i) total += static_cast<double>(f(i));
  return total;
}

// The same sum for float rows with the sixteen partial sums in vector registers, the same additions in the same
// order (lane k adds f(k), f(k + 16), ...; then lanes k and k + 8, k + 4, k + 2, k + 1, as _mm512_reduce_add_ps
// and vec_math.h's rowvec::lanes_sum pair them): GCC kept the array above on the stack and reduced it one lane at a
// time, a chain of store-to-load forwards that took as long as the row's vector work for D = 128. fv(i) gives f(i) ..
// f(i + 15) as a vector (two in the AVX2 variant), fs(i) the scalar f(i) for the tail.
#if defined(__AVX512F__)
#define EMBER_NORM_VEC 1
using V16 = __m512;
inline V16 v16_load(const float* p) { return _mm512_loadu_ps(p); }
inline V16 v16_set1(float v) { return _mm512_set1_ps(v); }
inline V16 v16_add(V16 a, V16 b) { return _mm512_add_ps(a, b); }
inline V16 v16_sub(V16 a, V16 b) { return _mm512_sub_ps(a, b); }
inline V16 v16_mul(V16 a, V16 b) { return _mm512_mul_ps(a, b); }
inline float v16_reduce(V16 v) { return rowvec::lanes_sum(v); }
#elif defined(__AVX2__) && defined(__FMA__)
#define EMBER_NORM_VEC 1
struct V16 {
  __m256 lo, hi;  // lanes 0..7 and 8..15
};
inline V16 v16_load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline V16 v16_set1(float v) { return {_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
inline V16 v16_add(V16 a, V16 b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline V16 v16_sub(V16 a, V16 b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
inline V16 v16_mul(V16 a, V16 b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline float v16_reduce(V16 v) { return rowvec::lanes_sum(_mm256_add_ps(v.lo, v.hi)); }  // k + (k + 8) first
#endif
#ifdef EMBER_NORM_VEC
template <class FV, class FS>
inline double row_sum_f32(int64_t n, FV fv, FS fs) {
  V16 acc = v16_set1(0.f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = v16_add(acc, fv(i));
  double total = static_cast<double>(v16_reduce(acc));
  for (; i < n; ++i) total += static_cast<double>(fs(i));
  return total;
}
#endif

// Rows per chunk: enough elements per thread to be worth a fork.
int64_t row_grain(int64_t D) { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(D, 1)); }

template <class T>
const T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

}  // namespace

void CpuBackend::row_norm(const RowNormArgs& a) {
  const int64_t N = a.norm.rows, D = a.norm.cols;
  const double eps = a.norm.eps;
  const bool centred = a.norm.kind == RowNormKind::LayerNorm;  // RMS norm: the mean is taken as 0
  if (N == 0) return;
  visit_float("row_norm", a.x.dtype(), [&]<class T>() {
    const T *xp = ptr<T>(a.x), *wp = ptr<T>(a.w), *bp = ptr<T>(a.b);
    T *yp = static_cast<T*>(a.y.data_ptr()), *mp = static_cast<T*>(a.mean.data_ptr()),
      *rp = static_cast<T*>(a.rstd.data_ptr());
    parallel_for(0, N, row_grain(D), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        const T* __restrict xr = xp + n * D;
        T* __restrict yr = yp + n * D;
        auto sq = [&](T m, int64_t i) { return (xr[i] - m) * (xr[i] - m); };
        double mu = 0, var = 0;
        T m = 0;
#ifdef EMBER_NORM_VEC
        if constexpr (std::is_same_v<T, float>) {
          if (D && centred)
            mu = row_sum_f32(
                     D, [&](int64_t i) { return v16_load(xr + i); }, [&](int64_t i) { return xr[i]; }) /
                 static_cast<double>(D);
          m = static_cast<T>(mu);
          const V16 mv = v16_set1(m);
          auto dev2 = [&](int64_t i) {
            const V16 d = v16_sub(v16_load(xr + i), mv);
            return v16_mul(d, d);
          };
          if (D) var = row_sum_f32(D, dev2, [&](int64_t i) { return sq(m, i); }) / static_cast<double>(D);
        } else
#endif
        {
          if (D && centred) mu = row_sum<T>(D, [&](int64_t i) { return xr[i]; }) / static_cast<double>(D);
          m = static_cast<T>(mu);
          if (D) var = row_sum<T>(D, [&](int64_t i) { return sq(m, i); }) / static_cast<double>(D);
        }
        const T r = static_cast<T>(1.0 / std::sqrt(var + eps));
        mp[n] = m;
        rp[n] = r;
        if (wp && bp)
          for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - m) * r * wp[i] + bp[i];
        else if (wp)
          for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - m) * r * wp[i];
        else if (bp)
          for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - m) * r + bp[i];
        else
          for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - m) * r;
      }
    });
  });
}

// dx row by row; dw and db from the same pass, as partial sums of blocks of kNormBlock rows (in T, in row order),
// then added block by block in double per column. The blocks are fixed, whatever the thread count, so dw and db
// come out the same on any number of threads; and x and dy are read once (a second pass over them for dw and db,
// split by columns, took ~1% of a charlm training step, its 2-4 MiB operands coming back from L3). The partial sums
// of at most kPartialBytes are held at a time: long inputs go in groups of blocks.
constexpr int64_t kNormBlock = 64;
constexpr int64_t kPartialBytes = 256 << 10;

void CpuBackend::row_norm_backward(const RowNormGradArgs& a) {
  const int64_t N = a.norm.rows, D = a.norm.cols;
  const bool centred = a.norm.kind == RowNormKind::LayerNorm;  // RMS norm: no mean, so no mean(g) term
  visit_float("row_norm_backward", a.x.dtype(), [&]<class T>() {
    const T *xp = ptr<T>(a.x), *gp = ptr<T>(a.dy), *wp = ptr<T>(a.w), *mp = ptr<T>(a.mean), *rp = ptr<T>(a.rstd);
    T* dxp = a.dx.defined() ? static_cast<T*>(a.dx.data_ptr()) : nullptr;
    T* dwp = a.dw.defined() ? static_cast<T*>(a.dw.data_ptr()) : nullptr;
    T* dbp = a.db.defined() ? static_cast<T*>(a.db.data_ptr()) : nullptr;
    const bool sums = dwp || dbp;
    // row n's dx, and its terms added to a block's partial sums fw (of g * xhat) and fb (of g) when they exist
    auto row = [&](int64_t n, T* __restrict fw, T* __restrict fb) {
      const T* __restrict xr = xp + n * D;
      const T* __restrict gr = gp + n * D;
      const T m = mp[n], r = rp[n];
      if (fw)
        for (int64_t j = 0; j < D; ++j) {
          fw[j] += gr[j] * ((xr[j] - m) * r);
          fb[j] += gr[j];
        }
      if (!dxp) return;
      T* __restrict o = dxp + n * D;
      // av = mean of g (layer norm), c = mean of g * xhat, with g = dy * w
      auto g = [&](int64_t i) { return wp ? gr[i] * wp[i] : gr[i]; };
      auto gxhat = [&](int64_t i) { return g(i) * ((xr[i] - m) * r); };
      double sum_g = 0, sum_gxhat = 0;
#ifdef EMBER_NORM_VEC
      if constexpr (std::is_same_v<T, float>) {
        const V16 mv = v16_set1(m), rv = v16_set1(r);
        auto gv = [&](int64_t i) { return wp ? v16_mul(v16_load(gr + i), v16_load(wp + i)) : v16_load(gr + i); };
        if (centred) sum_g = row_sum_f32(D, gv, g);
        sum_gxhat = row_sum_f32(
            D, [&](int64_t i) { return v16_mul(gv(i), v16_mul(v16_sub(v16_load(xr + i), mv), rv)); }, gxhat);
      } else
#endif
      {
        if (centred) sum_g = row_sum<T>(D, g);
        sum_gxhat = row_sum<T>(D, gxhat);
      }
      const T av = centred ? static_cast<T>(sum_g / static_cast<double>(D)) : T(0);
      const T c = static_cast<T>(sum_gxhat / static_cast<double>(D));
      for (int64_t i = 0; i < D; ++i) o[i] = r * (g(i) - av - (xr[i] - m) * r * c);
    };
    const int64_t blocks = (N + kNormBlock - 1) / kNormBlock;
    const int64_t group =
        sums ? std::max<int64_t>(4 * num_threads(), kPartialBytes / std::max<int64_t>(1, 2 * D * sizeof(T)))
             : std::max<int64_t>(blocks, 1);
    Scratch part(sums ? sizeof(T) * static_cast<size_t>(2 * std::min(group, blocks) * D) : 0);
    T* pp = part.as<T>();  // block b of the group: fw at pp + 2 b D, fb after it
    std::vector<double> sw(sums ? static_cast<size_t>(D) : 0), sb(sw.size());
    for (int64_t g0 = 0; g0 < blocks; g0 += group) {
      const int64_t g1 = std::min(blocks, g0 + group);
      parallel_for(g0, g1, std::max<int64_t>(1, row_grain(D) / kNormBlock), [&](int64_t b0, int64_t b1) {
        for (int64_t blk = b0; blk < b1; ++blk) {
          T* fw = sums ? pp + 2 * (blk - g0) * D : nullptr;
          if (fw) std::fill(fw, fw + 2 * D, T(0));
          for (int64_t n = blk * kNormBlock; n < std::min(N, (blk + 1) * kNormBlock); ++n)
            row(n, fw, fw ? fw + D : nullptr);
        }
      });
      if (!sums) continue;
      // The partials added block by block, along their rows (each column still adds its blocks in order).
      parallel_for(0, D, std::max<int64_t>(16, kElementwiseGrain / std::max<int64_t>(1, 2 * (g1 - g0))),
                   [&](int64_t j0, int64_t j1) {
                     for (int64_t blk = 0; blk < g1 - g0; ++blk)
                       for (int64_t j = j0; j < j1; ++j) {
                         sw[static_cast<size_t>(j)] += static_cast<double>(pp[2 * blk * D + j]);
                         sb[static_cast<size_t>(j)] += static_cast<double>(pp[(2 * blk + 1) * D + j]);
                       }
                   });
    }
    for (int64_t j = 0; j < D && sums; ++j) {
      if (dwp) dwp[j] = static_cast<T>(sw[static_cast<size_t>(j)]);
      if (dbp) dbp[j] = static_cast<T>(sb[static_cast<size_t>(j)]);
    }
  });
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
