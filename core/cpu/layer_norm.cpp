// defines: the CPU row norms (backend.h: row_norm / row_norm_backward; layer and RMS norm) over the rows of x [N, D].
// A thread takes whole rows. Per row: the sum in sixteen partial sums of x's type (so the adds vectorise), then
// the variance as a second pass over the deviations (the row is in L1 by then), both combined in double; then
// one multiply-add per element. The backward's dx is per row in the same way; dw and db sum over rows, so they
// run as a second pass split by columns instead (each thread owns a slice of D and walks every row).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_backend.h"
#include "parallel.h"

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
        const double mu = D && centred ? row_sum<T>(D, [&](int64_t i) { return xr[i]; }) / static_cast<double>(D) : 0.0;
        const T m = static_cast<T>(mu);
        const double var =
            D ? row_sum<T>(D, [&](int64_t i) { return (xr[i] - m) * (xr[i] - m); }) / static_cast<double>(D) : 0.0;
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

void CpuBackend::row_norm_backward(const RowNormGradArgs& a) {
  const int64_t N = a.norm.rows, D = a.norm.cols;
  const Tensor &dx = a.dx, &dw = a.dw, &db = a.db;
  const bool centred = a.norm.kind == RowNormKind::LayerNorm;  // RMS norm: no mean, so no mean(g) term
  visit_float("row_norm_backward", a.x.dtype(), [&]<class T>() {
    const T *xp = ptr<T>(a.x), *gp = ptr<T>(a.dy), *wp = ptr<T>(a.w), *mp = ptr<T>(a.mean), *rp = ptr<T>(a.rstd);
    if (dx.defined() && N > 0) {
      T* dxp = static_cast<T*>(dx.data_ptr());
      parallel_for(0, N, row_grain(D), [&](int64_t n0, int64_t n1) {
        for (int64_t n = n0; n < n1; ++n) {
          const T* __restrict xr = xp + n * D;
          const T* __restrict gr = gp + n * D;
          T* __restrict o = dxp + n * D;
          const T m = mp[n], r = rp[n];
          // a = mean of g (layer norm), c = mean of g * xhat, with g = dy * w
          auto g = [&](int64_t i) { return wp ? gr[i] * wp[i] : gr[i]; };
          const T a = centred ? static_cast<T>(row_sum<T>(D, g) / static_cast<double>(D)) : T(0);
          const T c = static_cast<T>(row_sum<T>(D, [&](int64_t i) { return g(i) * ((xr[i] - m) * r); }) /
                                     static_cast<double>(D));
          for (int64_t i = 0; i < D; ++i) o[i] = r * (g(i) - a - (xr[i] - m) * r * c);
        }
      });
    }
    if (!dw.defined() && !db.defined()) return;
    T* dwp = dw.defined() ? static_cast<T*>(dw.data_ptr()) : nullptr;
    T* dbp = db.defined() ? static_cast<T*>(db.data_ptr()) : nullptr;
    // Column slices: each thread sums its slice of D over every row (vectorises over the columns), in T over
    // blocks of 64 rows and in double across blocks.
    parallel_for(0, D, std::max<int64_t>(8, D / std::max<int64_t>(1, N * D / kElementwiseGrain)),
                 [&](int64_t j0, int64_t j1) {
                   const int64_t len = j1 - j0;
                   std::vector<double> sw(static_cast<size_t>(len)), sb(static_cast<size_t>(len));
                   std::vector<T> bw(static_cast<size_t>(len)), bb(static_cast<size_t>(len));
                   for (int64_t n0 = 0; n0 < N; n0 += 64) {
                     T* __restrict fw = bw.data();
                     T* __restrict fb = bb.data();
                     for (int64_t j = 0; j < len; ++j) fw[j] = fb[j] = T(0);
                     for (int64_t n = n0; n < std::min(N, n0 + 64); ++n) {
                       const T* __restrict xr = xp + n * D + j0;
                       const T* __restrict gr = gp + n * D + j0;
                       const T m = mp[n], r = rp[n];
                       for (int64_t j = 0; j < len; ++j) {
                         fw[j] += gr[j] * ((xr[j] - m) * r);
                         fb[j] += gr[j];
                       }
                     }
                     for (int64_t j = 0; j < len; ++j) {
                       sw[static_cast<size_t>(j)] += static_cast<double>(fw[j]);
                       sb[static_cast<size_t>(j)] += static_cast<double>(fb[j]);
                     }
                   }
                   for (int64_t j = j0; j < j1; ++j) {
                     if (dwp) dwp[j] = static_cast<T>(sw[static_cast<size_t>(j - j0)]);
                     if (dbp) dbp[j] = static_cast<T>(sb[static_cast<size_t>(j - j0)]);
                   }
                 });
  });
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
