// defines: the CPU fused optimiser updates, CpuBackend::sgd_step and CpuBackend::adam_step.
// Each walks one parameter once: per element it reads p, g and the state, and writes the new p and state
// (llm.c's gpt2_update), so a step is one sweep over memory instead of the ~10 an op-by-op update makes.
// The rules are PyTorch's (torch.optim.SGD / Adam / AdamW, single-tensor path; written out in
// ember/internal/scalar_fused.h), computed in the param's dtype.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "cpu_backend.h"
#include "ember/internal/scalar_fused.h"
#include "parallel.h"
#include "streamed.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {
namespace {

// sqrt and a division per element: worth threads a little sooner than a plain add.
constexpr int64_t kOptimGrain = 16384;

// The element loops on their own, with restrict pointers and the options as template flags, so that the
// compiler sees no aliasing and no branches and vectorises them (8 floats per AVX2 instruction). The update of
// one element is scalar::sgd_update / scalar::adam_update (scalar_fused.h), shared with the CUDA kernels.
// (The coefficients are taken by value into a local: with a reference, the compiler must assume that the stores
// to p may change them and reloads them every element.)
//
// The loops run in blocks of kOptimBlock elements, each first asking for the cache lines of every array kOptimAhead
// elements on (streamed.h): a step's state comes from L3 or memory (mlp-big: 52 MB a step), where the hardware
// prefetchers alone, with four streams to follow, left Adam's pass ~10% slower (mlp-big's Adam step 1.9-2.0 ->
// 1.73-1.78 ms at one thread, 0.98 -> 0.85 at two, on the Xeon model 167).
constexpr int64_t kOptimBlock = 64, kOptimAhead = 1024;

template <class T, bool WD, bool Momentum>
[[gnu::noinline]] void sgd_range(T* __restrict p, const T* __restrict gp, T* __restrict buf, int64_t n,
                                 const scalar::SgdCoeffs<T> c) {
  auto update = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) scalar::sgd_update<T, WD, Momentum>(p[i], gp[i], Momentum ? buf + i : nullptr, c);
  };
  if constexpr (Momentum) streamed<kOptimBlock, kOptimAhead>(n, update, p, gp, buf);
  else streamed<kOptimBlock, kOptimAhead>(n, update, p, gp);
}

template <class T>
void sgd_kernel(const SgdStepArgs& a) {
  T* p = static_cast<T*>(a.param.data_ptr());
  const T* gp = static_cast<const T*>(a.grad.data_ptr());
  T* buf = a.momentum_buf.defined() ? static_cast<T*>(a.momentum_buf.data_ptr()) : nullptr;
  const scalar::SgdCoeffs<T> c = scalar::sgd_coeffs<T>(a.hyper);
  const bool use_wd = a.hyper.weight_decay != 0;
  parallel_for(0, a.param.numel(), kOptimGrain, [&](int64_t begin, int64_t end) {
    auto run = [&]<bool WD, bool M>() {
      sgd_range<T, WD, M>(p + begin, gp + begin, M ? buf + begin : nullptr, end - begin, c);
    };
    if (use_wd && buf) run.template operator()<true, true>();
    else if (use_wd) run.template operator()<true, false>();
    else if (buf) run.template operator()<false, true>();
    else run.template operator()<false, false>();
  });
}

template <class T, bool L2, bool Decay>
[[gnu::noinline]] void adam_range(T* __restrict p, const T* __restrict gp, T* __restrict m, T* __restrict v, int64_t n,
                                  const scalar::AdamCoeffs<T> c) {
  streamed<kOptimBlock, kOptimAhead>(
      n,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) scalar::adam_update<T, L2, Decay>(p[i], gp[i], m[i], v[i], c);
      },
      p, gp, m, v);
}

template <class T>
void adam_kernel(const AdamStepArgs& a) {
  T* p = static_cast<T*>(a.param.data_ptr());
  const T* gp = static_cast<const T*>(a.grad.data_ptr());
  T* m = static_cast<T*>(a.exp_avg.data_ptr());
  T* v = static_cast<T*>(a.exp_avg_sq.data_ptr());
  const scalar::AdamCoeffs<T> c = scalar::adam_coeffs<T>(a.hyper);
  parallel_for(0, a.param.numel(), kOptimGrain, [&](int64_t begin, int64_t end) {
    auto run = [&]<bool L2, bool Decay>() {
      adam_range<T, L2, Decay>(p + begin, gp + begin, m + begin, v + begin, end - begin, c);
    };
    if (c.l2) run.template operator()<true, false>();
    else if (c.decay) run.template operator()<false, true>();
    else run.template operator()<false, false>();
  });
}

// A float16 / bfloat16 parameter with float32 state (mixed precision, amp.h): each thread widens 256 elements of
// p and g at a time to float32, runs the float32 loop above on them and its slice of the state, and rounds p back.
constexpr int64_t kWiden = 256;
template <class P, class Run>
void widened(const Tensor& param, const Tensor& grad, Run&& run) {
  P* p = static_cast<P*>(param.data_ptr());
  const P* gp = static_cast<const P*>(grad.data_ptr());
  parallel_for(0, param.numel(), kOptimGrain, [&](int64_t begin, int64_t end) {
    float pf[kWiden], gf[kWiden];
    for (int64_t i0 = begin; i0 < end; i0 += kWiden) {
      const int64_t len = std::min(kWiden, end - i0);
      for (int64_t k = 0; k < len; ++k) {
        pf[k] = scalar::ReducedFloat<P>::to_float(p[i0 + k]);
        gf[k] = scalar::ReducedFloat<P>::to_float(gp[i0 + k]);
      }
      run(pf, gf, i0, len);
      for (int64_t k = 0; k < len; ++k) p[i0 + k] = scalar::ReducedFloat<P>::from_float(pf[k]);
    }
  });
}

template <class P>
void sgd_kernel_reduced(const SgdStepArgs& a) {
  float* buf = a.momentum_buf.defined() ? static_cast<float*>(a.momentum_buf.data_ptr()) : nullptr;
  const scalar::SgdCoeffs<float> c = scalar::sgd_coeffs<float>(a.hyper);
  const bool use_wd = a.hyper.weight_decay != 0;
  widened<P>(a.param, a.grad, [&](float* p, const float* g, int64_t at, int64_t n) {
    float* b = buf ? buf + at : nullptr;
    if (use_wd && b) sgd_range<float, true, true>(p, g, b, n, c);
    else if (use_wd) sgd_range<float, true, false>(p, g, b, n, c);
    else if (b) sgd_range<float, false, true>(p, g, b, n, c);
    else sgd_range<float, false, false>(p, g, b, n, c);
  });
}

template <class P>
void adam_kernel_reduced(const AdamStepArgs& a) {
  float* m = static_cast<float*>(a.exp_avg.data_ptr());
  float* v = static_cast<float*>(a.exp_avg_sq.data_ptr());
  const scalar::AdamCoeffs<float> c = scalar::adam_coeffs<float>(a.hyper);
  widened<P>(a.param, a.grad, [&](float* p, const float* g, int64_t at, int64_t n) {
    if (c.l2) adam_range<float, true, false>(p, g, m + at, v + at, n, c);
    else if (c.decay) adam_range<float, false, true>(p, g, m + at, v + at, n, c);
    else adam_range<float, false, false>(p, g, m + at, v + at, n, c);
  });
}

// x *= inv_scale over one tensor, counting the elements that were inf or NaN (|x| <= max is false for both;
// a compare the compiler vectorises, where a branch on std::isfinite would not).
template <class T, class C>
[[gnu::noinline]] int64_t unscale_range(T* __restrict x, int64_t n, const C inv) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    C v;
    if constexpr (is_reduced_v<T>) v = scalar::ReducedFloat<T>::to_float(x[i]);
    else v = x[i];
    bad += !(std::fabs(v) <= std::numeric_limits<C>::max());
    v *= inv;
    if constexpr (is_reduced_v<T>) x[i] = scalar::ReducedFloat<T>::from_float(v);
    else x[i] = v;
  }
  return bad;
}

void check_contiguous(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    EMBER_INTERNAL_ASSERT(!t->defined() || t->is_contiguous(), op, " takes contiguous tensors");
}

}  // namespace

// All checked first, then one parameter after another: each kernel spreads its parameter over the pool.
void CpuBackend::sgd_step(const std::vector<SgdStepArgs>& steps) {
  for (const SgdStepArgs& a : steps) check_contiguous("sgd_step", {&a.param, &a.grad, &a.momentum_buf});
  for (const SgdStepArgs& a : steps) {
    if (a.param.dtype() == kFloat16) sgd_kernel_reduced<Half>(a);
    else if (a.param.dtype() == kBFloat16) sgd_kernel_reduced<BFloat16>(a);
    else visit_float("sgd_step", a.param.dtype(), [&]<class T>() { sgd_kernel<T>(a); });
  }
}

void CpuBackend::adam_step(const std::vector<AdamStepArgs>& steps) {
  for (const AdamStepArgs& a : steps) check_contiguous("adam_step", {&a.param, &a.grad, &a.exp_avg, &a.exp_avg_sq});
  for (const AdamStepArgs& a : steps) {
    if (a.param.dtype() == kFloat16) adam_kernel_reduced<Half>(a);
    else if (a.param.dtype() == kBFloat16) adam_kernel_reduced<BFloat16>(a);
    else visit_float("adam_step", a.param.dtype(), [&]<class T>() { adam_kernel<T>(a); });
  }
}

void CpuBackend::amp_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale) {
  std::atomic<int64_t> bad{0};
  for (const Tensor& g : grads) {
    check_contiguous("amp_unscale", {&g});
    auto run = [&]<class T, class C>() {
      T* x = static_cast<T*>(g.data_ptr());
      parallel_for(0, g.numel(), kOptimGrain, [&](int64_t begin, int64_t end) {
        if (const int64_t b = unscale_range<T, C>(x + begin, end - begin, static_cast<C>(inv_scale)))
          bad.fetch_add(b, std::memory_order_relaxed);
      });
    };
    switch (g.dtype()) {
      case kFloat32:
        run.template operator()<float, float>();
        break;
      case kFloat64:
        run.template operator()<double, double>();
        break;
      case kFloat16:
        run.template operator()<Half, float>();
        break;
      case kBFloat16:
        run.template operator()<BFloat16, float>();
        break;
      default:
        throw InternalError(detail::str("amp_unscale: a gradient of dtype ", g.dtype()));
    }
  }
  if (bad.load() > 0) *static_cast<float*>(found_inf.data_ptr()) = 1.0f;
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
