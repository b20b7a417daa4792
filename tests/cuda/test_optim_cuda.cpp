// tests: the fused optimiser kernels on CUDA against the CPU's, step by step, for float32, float64 and the 16-bit
// floats (float32 state), every
// option path (SGD without momentum, with momentum and dampening, Nesterov, weight decay; Adam with L2
// decay; AdamW with decoupled decay) and a non-contiguous parameter. The gradients are fixed (fed with
// set_grad), so the only difference is the arithmetic of the kernels. Also run with the CPU standing in for
// the GPU (the *OnCpu suite), so the test code is exercised on every machine.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "gpu_or_cpu.h"

namespace ember {
namespace {

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// The gradient of parameter `which` at step k: varied in sign and size, independent of the parameter.
Tensor fixed_grad(const Tensor& p, int which, int k) {
  std::vector<double> g(static_cast<size_t>(p.numel()));
  for (size_t i = 0; i < g.size(); ++i)
    g[i] =
        std::sin(0.37 * static_cast<double>(i + 1) + 1.3 * k + 2.1 * which) * (1.0 + 0.5 * static_cast<double>(i % 3));
  return tensor(g, p.shape(), {.dtype = p.dtype()}).to(p.device());
}

// Runs 5 steps on `dev`; returns the parameters (on the CPU) after each step.
std::vector<std::vector<double>> run(const MakeOpt& make, DType dt, Device dev) {
  manual_seed(2);
  Tensor a = randn({7, 5}, {.dtype = dt}).to(dev);
  Tensor b_base = randn({6, 4}, {.dtype = dt}).to(dev);
  Tensor b = b_base.t();  // a non-contiguous parameter: updated through a contiguous copy
  for (Tensor* t : {&a, &b}) t->requires_grad_();
  std::unique_ptr<optim::Optimizer> opt = make({a, b});
  std::vector<std::vector<double>> out;
  for (int k = 0; k < 5; ++k) {
    a.set_grad(fixed_grad(a, 0, k));
    b.set_grad(fixed_grad(b, 1, k));
    opt->step();
    out.push_back(test::values(a));
    out.push_back(test::values(b));
  }
  EXPECT_EQ(a.device(), dev);
  return out;
}

// float16 / bfloat16 parameters (float32 state, one rounding per step): the two devices may differ by an ulp
// where a fused multiply-add rounds differently, which later steps carry along.
void check(const std::string& what, const MakeOpt& make) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const auto cpu = run(make, dt, Device::cpu()), dev = run(make, dt, g_dev);
    const double tol = dt == kFloat32 ? 1e-5 : dt == kFloat64 ? 1e-12 : dt == kFloat16 ? 4e-3 : 3e-2;
    for (size_t i = 0; i < cpu.size(); ++i)
      for (size_t j = 0; j < cpu[i].size(); ++j)
        ASSERT_NEAR(dev[i][j], cpu[i][j], tol * std::max(1.0, std::fabs(cpu[i][j])))
            << what << " " << dt << " step " << i / 2 << " parameter " << i % 2 << " element " << j;
  }
}

template <class O, class Opts>
MakeOpt make(Opts o) {
  return [o](std::vector<Tensor> p) { return std::make_unique<O>(std::move(p), o); };
}

class CudaOptim : public CudaSuite {};

#define OPTIM_TEST(Name) EMBER_GPU_AND_CPU_TEST(CudaOptim, CudaOptimOnCpu, Name)

OPTIM_TEST(SgdEveryOption) {
  check("sgd plain", make<optim::SGD>(optim::SGDOptions{.lr = 0.1}));
  check("sgd weight decay", make<optim::SGD>(optim::SGDOptions{.lr = 0.1, .weight_decay = 0.01}));
  check("sgd momentum dampening", make<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.3}));
  check("sgd nesterov",
        make<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.8, .nesterov = true, .weight_decay = 0.01}));
}

OPTIM_TEST(AdamAndAdamW) {
  check("adam", make<optim::Adam>(optim::AdamOptions{.lr = 0.01}));
  check("adam l2", make<optim::Adam>(optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1}));
  check("adamw", make<optim::AdamW>(optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1}));
}

}  // namespace
}  // namespace ember
