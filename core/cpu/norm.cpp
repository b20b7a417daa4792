// defines: the CPU batch-norm passes (backend.h: batch_norm_stats / _elemt / _backward_reduce / _backward_elemt).
// x is viewed as [N, C, S] (S = the spatial size, 1 for [N, C]). With S > 1 a channel is N contiguous runs of S
// values, and a thread takes whole channels; with S == 1 a row of x holds one value of every channel, and the
// per-channel sums are accumulated row by row across channels. Sums are in the compute type within a run
// (vectorised) and in double across runs; the variance is a second pass over the deviations from the mean. Each
// elementwise pass is one multiply-add per element with per-channel coefficients worked out first, in double.
// E is the element type of x, y, dy, dx; T the compute type of the per-channel tensors: float for 16-bit elements
// (each widened as it is read and the result rounded once), E itself for float and double.
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "cpu_backend.h"
#include "ember/internal/scalar_fused.h"
#include "parallel.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {
namespace {

struct NCS {
  int64_t N, C, S;
  explicit NCS(const Tensor& x) : N(x.size(0)), C(x.size(1)), S(C && N ? x.numel() / (N * C) : 0) {}
  int64_t count() const { return N * S; }  // elements per channel
  // grain in channels: enough elements per thread to be worth a fork
  int64_t channel_grain() const { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(count(), 1)); }
};

// Calls f.template operator()<E, T>() for x's element type E and its compute type T.
template <class F>
void visit_bn(const char* op, DType dt, F&& f) {
  switch (dt) {
    case kFloat32:
      return f.template operator()<float, float>();
    case kFloat64:
      return f.template operator()<double, double>();
    case kBFloat16:
      return f.template operator()<BFloat16, float>();
    case kFloat16:
      return f.template operator()<Half, float>();
    default:
      throw InternalError(detail::str(op, ": takes a floating-point input, got ", dt));
  }
}

template <class T>
const T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}
template <class T>
T* mut(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

// Adds to ta (and tb) the sum of a(i) (and b(i)) over one run i in [0, n): eight partial sums per sum in Acc, so
// that the adds vectorise (float for float data: a run is one feature map), combined in a fixed order. b may be
// nullptr (one sum only).
template <class Acc, class FA, class FB>
inline void run_sums(int64_t n, FA a, FB b, double& ta, double& tb) {
  constexpr bool two = !std::is_same_v<FB, std::nullptr_t>;
  Acc sa[8] = {}, sb[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) {
      sa[k] += a(i + k);
      if constexpr (two) sb[k] += b(i + k);
    }
  Acc ra = 0, rb = 0;
  for (; i < n; ++i) {
    ra += a(i);
    if constexpr (two) rb += b(i);
  }
  for (int k = 0; k < 8; ++k) {
    ra += sa[k];
    rb += sb[k];
  }
  ta += static_cast<double>(ra);
  tb += static_cast<double>(rb);
}

// For every channel c: sa[c] = sum of a(i, c) and sb[c] = sum of b(i, c) (b may be nullptr) over the flat
// indices i of channel c, in double across runs and in Acc within one.
template <class Acc, class FA, class FB>
void channel_sums(const NCS& d, double* sa, double* sb, FA a, FB b) {
  constexpr bool two = !std::is_same_v<FB, std::nullptr_t>;
  if (d.S == 1) {
    // [N, C]: rows of C values; accumulate across channels, row by row (vectorises over c).
    parallel_for(0, d.C, 256, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) sa[c] = sb[c] = 0;
      for (int64_t n = 0; n < d.N; ++n)
        for (int64_t c = c0; c < c1; ++c) {
          sa[c] += static_cast<double>(a(n * d.C + c, c));
          if constexpr (two) sb[c] += static_cast<double>(b(n * d.C + c, c));
        }
    });
    return;
  }
  parallel_for(0, d.C, d.channel_grain(), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double x1 = 0, x2 = 0;
      for (int64_t n = 0; n < d.N; ++n) {
        const int64_t base = (n * d.C + c) * d.S;
        if constexpr (two)
          run_sums<Acc>(
              d.S, [&](int64_t i) { return a(base + i, c); }, [&](int64_t i) { return b(base + i, c); }, x1, x2);
        else
          run_sums<Acc>(
              d.S, [&](int64_t i) { return a(base + i, c); }, nullptr, x1, x2);
      }
      sa[c] = x1;
      sb[c] = x2;
    }
  });
}

// out[i] = k1[c] * u[i] + k2[c] * v[i] + k3[c] over every element (v may be null: k2 unused), c = i's channel,
// then relu of it when Relu; in T, each element of E read widened and the result rounded once. Masked: u[i] counts
// as 0 where mask[i] is not > 0 (batch_norm_relu's backward: ReLU's rule applied as dy is read).
template <class E, class T, bool Relu = false, bool Masked = false>
void channel_affine(const NCS& d, E* out, const E* u, const E* v, const T* k1, const T* k2, const T* k3,
                    const E* mask = nullptr) {
  const auto act = [](T r) { return Relu ? scalar::unary<UnaryOp::Relu>(r) : r; };
  const auto at = [](const E* x, const E* m, int64_t i) {
    if constexpr (Masked) return static_cast<T>(m[i]) > T(0) ? static_cast<T>(x[i]) : T(0);
    else return static_cast<T>(x[i]);
  };
  const int64_t rows = d.N * d.C;
  parallel_for(0, rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(d.S, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const int64_t c = r % d.C, o = r * d.S;
                   const T a = k1[c], b = v ? k2[c] : T(0), e = k3[c];
                   E* __restrict y = out + o;
                   const E* __restrict x = u + o;
                   const E* __restrict m = Masked ? mask + o : nullptr;
                   if (v) {
                     const E* __restrict w = v + o;
                     for (int64_t i = 0; i < d.S; ++i)
                       y[i] = convert<E>(act(a * at(x, m, i) + b * static_cast<T>(w[i]) + e));
                   } else {
                     for (int64_t i = 0; i < d.S; ++i) y[i] = convert<E>(act(a * at(x, m, i) + e));
                   }
                 }
               });
}

}  // namespace

void CpuBackend::batch_norm_stats(const Tensor& mean, const Tensor& var, const Tensor& x) {
  const NCS d(x);
  if (d.C == 0) return;
  visit_bn("batch_norm_stats", x.dtype(), [&]<class E, class T>() {
    // two passes, as PyTorch's: the mean, then the sum of squared deviations from it (no cancellation)
    const E* xp = ptr<E>(x);
    std::vector<double> s1(static_cast<size_t>(d.C)), s2(static_cast<size_t>(d.C)), unused(static_cast<size_t>(d.C));
    channel_sums<T>(
        d, s1.data(), unused.data(), [&](int64_t i, int64_t) { return static_cast<T>(xp[i]); }, nullptr);
    const double m = static_cast<double>(d.count());
    std::vector<T> mu(static_cast<size_t>(d.C));
    for (int64_t c = 0; c < d.C; ++c) mu[static_cast<size_t>(c)] = static_cast<T>(s1[static_cast<size_t>(c)] / m);
    channel_sums<T>(
        d, s2.data(), unused.data(),
        [&](int64_t i, int64_t c) {
          const T v = static_cast<T>(xp[i]) - mu[static_cast<size_t>(c)];
          return v * v;
        },
        nullptr);
    for (int64_t c = 0; c < d.C; ++c) {
      mut<T>(mean)[c] = mu[static_cast<size_t>(c)];
      mut<T>(var)[c] = static_cast<T>(s2[static_cast<size_t>(c)] / m);
    }
  });
}

void CpuBackend::batch_norm_elemt(const BatchNormElemtArgs& a) {
  const Tensor &y = a.y, &x = a.x, &mean = a.mean, &invstd = a.invstd, &w = a.w, &b = a.b;
  const NCS d(x);
  if (x.numel() == 0) return;
  visit_bn("batch_norm_elemt", x.dtype(), [&]<class E, class T>() {
    // y = scale[c] * x + shift[c]: scale = invstd * w, shift = b - mean * scale
    std::vector<T> scale(static_cast<size_t>(d.C)), shift(static_cast<size_t>(d.C));
    for (int64_t c = 0; c < d.C; ++c) {
      const scalar::BnAffine k = scalar::bn_affine(ptr<T>(mean)[c], ptr<T>(invstd)[c], w.defined() ? ptr<T>(w)[c] : 1.0,
                                                   b.defined() ? ptr<T>(b)[c] : 0.0);
      scale[static_cast<size_t>(c)] = static_cast<T>(k.scale);
      shift[static_cast<size_t>(c)] = static_cast<T>(k.shift);
    }
    if (a.relu) channel_affine<E, T, true>(d, mut<E>(y), ptr<E>(x), nullptr, scale.data(), nullptr, shift.data());
    else channel_affine<E, T>(d, mut<E>(y), ptr<E>(x), nullptr, scale.data(), nullptr, shift.data());
  });
}

void CpuBackend::batch_norm_backward_reduce(const BatchNormGradReduceArgs& a) {
  const Tensor &sum_dy = a.sum_dy, &sum_dy_xmu = a.sum_dy_xmu, &dy = a.dy, &x = a.x, &mean = a.mean;
  const NCS d(x);
  if (d.C == 0) return;
  visit_bn("batch_norm_backward_reduce", x.dtype(), [&]<class E, class T>() {
    const E *xp = ptr<E>(x), *gp = ptr<E>(dy), *yp = ptr<E>(a.relu_y);
    const T* mp = ptr<T>(mean);
    std::vector<double> s1(static_cast<size_t>(d.C)), s2(static_cast<size_t>(d.C));
    if (yp) {  // batch_norm_relu: dy is 0 where the output is not > 0
      const auto g = [&](int64_t i) { return static_cast<T>(yp[i]) > T(0) ? static_cast<T>(gp[i]) : T(0); };
      channel_sums<T>(
          d, s1.data(), s2.data(), [&](int64_t i, int64_t) { return g(i); },
          [&](int64_t i, int64_t c) { return g(i) * (static_cast<T>(xp[i]) - mp[c]); });
    } else {
      channel_sums<T>(
          d, s1.data(), s2.data(), [&](int64_t i, int64_t) { return static_cast<T>(gp[i]); },
          [&](int64_t i, int64_t c) { return static_cast<T>(gp[i]) * (static_cast<T>(xp[i]) - mp[c]); });
    }
    for (int64_t c = 0; c < d.C; ++c) {
      mut<T>(sum_dy)[c] = static_cast<T>(s1[static_cast<size_t>(c)]);
      mut<T>(sum_dy_xmu)[c] = static_cast<T>(s2[static_cast<size_t>(c)]);
    }
  });
}

void CpuBackend::batch_norm_backward_elemt(const BatchNormGradElemtArgs& a) {
  const Tensor &dx = a.dx, &dy = a.dy, &x = a.x, &mean = a.mean, &invstd = a.invstd, &w = a.w, &sum_dy = a.sum_dy,
               &sum_dy_xmu = a.sum_dy_xmu;
  const int64_t count = a.count;
  const NCS d(x);
  if (x.numel() == 0) return;
  visit_bn("batch_norm_backward_elemt", x.dtype(), [&]<class E, class T>() {
    // dx = k1 * dy + k2 * x + k3 per channel (scalar::bn_backward)
    std::vector<T> k1(static_cast<size_t>(d.C)), k2(static_cast<size_t>(d.C)), k3(static_cast<size_t>(d.C));
    const bool batch_stats = sum_dy.defined();
    for (int64_t c = 0; c < d.C; ++c) {
      const size_t i = static_cast<size_t>(c);
      const scalar::BnBackward k = scalar::bn_backward(
          ptr<T>(mean)[c], ptr<T>(invstd)[c], w.defined() ? ptr<T>(w)[c] : 1.0, batch_stats ? ptr<T>(sum_dy)[c] : 0.0,
          batch_stats ? ptr<T>(sum_dy_xmu)[c] : 0.0, static_cast<double>(count), batch_stats);
      k1[i] = static_cast<T>(k.k1);
      k2[i] = static_cast<T>(k.k2);
      k3[i] = static_cast<T>(k.k3);
    }
    const E* xs = batch_stats ? ptr<E>(x) : nullptr;
    if (a.relu_y.defined())
      channel_affine<E, T, false, true>(d, mut<E>(dx), ptr<E>(dy), xs, k1.data(), k2.data(), k3.data(),
                                        ptr<E>(a.relu_y));
    else
      channel_affine<E, T>(d, mut<E>(dx), ptr<E>(dy), xs, k1.data(), k2.data(), k3.data());
  });
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
