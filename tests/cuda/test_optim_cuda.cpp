// tests: the fused optimiser kernels on CUDA against the CPU's, step by step, for float32, float64 and the 16-bit
// floats (float32 state), every
// option path (SGD without momentum, with momentum and dampening, Nesterov, weight decay; Adam with L2
// decay; AdamW with decoupled decay) and a non-contiguous parameter. The gradients are fixed (fed with
// set_grad), so the only difference is the arithmetic of the kernels. Also run with the CPU standing in for
// the GPU (the *OnCpu suite), so the test code is exercised on every machine. And one step over many parameters
// at once, as the multi-tensor launches see it: mixed dtypes, two param groups, parameters at different step
// counts, empty ones, more tensors than one launch's table holds, tensors that cross chunks and (on a GPU) one
// that crosses launches.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

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

// The parameters of the multi-tensor test: sizes that cross kBatchChunk (65536) and, with `huge`, one that needs
// more than a launch's 320 chunks; 40 small ones (more than a launch's 36 tensors); an empty one; dtypes mixed.
std::vector<Tensor> many_params(bool huge) {
  manual_seed(5);
  std::vector<int64_t> sizes = {0, 1, 3, 1000, 65536, 65541, 3 * 65536 + 17};
  for (int i = 0; i < 40; ++i) sizes.push_back(1 + 37 * i);
  if (huge) sizes.push_back(330 * 65536 + 7);
  const DType dtypes[] = {kFloat32, kBFloat16, kFloat16, kFloat64};
  std::vector<Tensor> ps;
  for (size_t i = 0; i < sizes.size(); ++i)
    ps.push_back(randn({sizes[i]}, {.dtype = sizes[i] > 70000 ? kFloat32 : dtypes[i % 4]}).requires_grad_());
  return ps;
}

using MakeGroups = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>, std::vector<Tensor>)>;

// Three steps of one optimiser over all of many_params on `dev` (the odd ones in a second group; parameter 5 gets
// no gradient at the first step, so its step count lags); the parameters afterwards, on the CPU.
std::vector<Tensor> run_many(const MakeGroups& make, Device dev, bool huge) {
  std::vector<Tensor> ps = many_params(huge), even, odd;
  for (Tensor& p : ps) p = p.detach().to(dev).requires_grad_();
  for (size_t i = 0; i < ps.size(); ++i) (i % 2 ? odd : even).push_back(ps[i]);
  std::unique_ptr<optim::Optimizer> opt = make(even, odd);
  for (int k = 0; k < 3; ++k) {
    for (size_t i = 0; i < ps.size(); ++i)
      ps[i].set_grad(k == 0 && i == 5 ? Tensor() : fixed_grad(ps[i], static_cast<int>(i), k));
    opt->step();
  }
  std::vector<Tensor> out;
  for (const Tensor& p : ps) out.push_back(p.detach().to(Device::cpu()).to(kFloat64));
  return out;
}

void check_many(const std::string& what, const MakeGroups& make) {
  const bool huge = g_dev.is_cuda();  // the launch-crossing tensor, where a GPU makes it cheap
  const std::vector<Tensor> cpu = run_many(make, Device::cpu(), huge), dev = run_many(make, g_dev, huge);
  const std::vector<Tensor> ref = many_params(huge);
  ASSERT_EQ(cpu.size(), dev.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    const DType dt = ref[i].dtype();
    const double tol = dt == kFloat32 ? 1e-5 : dt == kFloat64 ? 1e-12 : dt == kFloat16 ? 4e-3 : 3e-2;
    const std::vector<double> c = cpu[i].to_vector<double>(), d = dev[i].to_vector<double>();
    const std::vector<double> before = ref[i].to(kFloat64).to_vector<double>();
    ASSERT_EQ(c.size(), d.size());
    size_t moved = 0;
    for (size_t j = 0; j < c.size(); ++j) {
      ASSERT_NEAR(d[j], c[j], tol * std::max(1.0, std::fabs(c[j])))
          << what << " parameter " << i << " (" << dt << ", " << c.size() << " elements) element " << j;
      moved += d[j] != before[j];
    }
    // (16-bit parameters can round back to where they started when the gradient's sign turns)
    if (!is_reduced_float(dt))
      EXPECT_GT(moved + (c.empty() ? 1 : 0), c.size() / 2) << what << " parameter " << i << " was not updated";
  }
}

OPTIM_TEST(ManyParametersInOneStep) {
  check_many("adamw", [](std::vector<Tensor> a, std::vector<Tensor> b) {
    using G = optim::AdamW::ParamGroup;
    return std::make_unique<optim::AdamW>(std::vector<G>{{std::move(a), {}}, {std::move(b), {.weight_decay = 0}}},
                                          optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1});
  });
  check_many("adam l2", [](std::vector<Tensor> a, std::vector<Tensor> b) {
    using G = optim::Adam::ParamGroup;
    return std::make_unique<optim::Adam>(std::vector<G>{{std::move(a), {}}, {std::move(b), {.lr = 0.03}}},
                                         optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1});
  });
  check_many("sgd", [](std::vector<Tensor> a, std::vector<Tensor> b) {
    using G = optim::SGD::ParamGroup;
    return std::make_unique<optim::SGD>(std::vector<G>{{std::move(a), {}}, {std::move(b), {.momentum = 0}}},
                                        optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  });
}

}  // namespace
}  // namespace ember
