// defines: the CPU fused optimiser updates, CpuBackend::sgd_step and CpuBackend::adam_step.
// Each walks one parameter once: per element it reads p, g and the state, and writes the new p and state
// (llm.c's gpt2_update), so a step is one sweep over memory instead of the ~10 an op-by-op update makes.
// The rules are PyTorch's (torch.optim.SGD / Adam / AdamW, single-tensor path; written out in
// ember/internal/scalar_math.h), computed in the param's dtype.
#include <cmath>

#include "cpu_backend.h"
#include "parallel.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {
namespace {

// sqrt and a division per element: worth threads a little sooner than a plain add.
constexpr int64_t kOptimGrain = 16384;

// The element loops on their own, with restrict pointers and the options as template flags, so that the
// compiler sees no aliasing and no branches and vectorises them (8 floats per AVX2 instruction). The update of
// one element is scalar::sgd_update / scalar::adam_update (scalar_math.h), shared with the CUDA kernels.
// (The coefficients are taken by value into a local: with a reference, the compiler must assume that the stores
// to p may change them and reloads them every element.)
template <class T, bool WD, bool Momentum>
[[gnu::noinline]] void sgd_range(T* __restrict p, const T* __restrict gp, T* __restrict buf, int64_t n,
                                 const scalar::SgdCoeffs<T> c) {
  for (int64_t i = 0; i < n; ++i) scalar::sgd_update<T, WD, Momentum>(p[i], gp[i], Momentum ? buf + i : nullptr, c);
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
  for (int64_t i = 0; i < n; ++i) scalar::adam_update<T, L2, Decay>(p[i], gp[i], m[i], v[i], c);
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

void check_contiguous(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    EMBER_INTERNAL_ASSERT(!t->defined() || t->is_contiguous(), op, " takes contiguous tensors");
}

}  // namespace

void CpuBackend::sgd_step(const SgdStepArgs& a) {
  check_contiguous("sgd_step", {&a.param, &a.grad, &a.momentum_buf});
  visit_float("sgd_step", a.param.dtype(), [&]<class T>() { sgd_kernel<T>(a); });
}

void CpuBackend::adam_step(const AdamStepArgs& a) {
  check_contiguous("adam_step", {&a.param, &a.grad, &a.exp_avg, &a.exp_avg_sq});
  visit_float("adam_step", a.param.dtype(), [&]<class T>() { adam_kernel<T>(a); });
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
