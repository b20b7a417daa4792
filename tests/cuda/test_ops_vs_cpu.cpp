// tests: every case of the gradcheck op table (tests/support/op_cases.h) run forward and backward on CUDA in
// float32 (TF32 off) and compared with the same case on the CPU: the outputs and every input gradient agree
// to a relative 1e-4, the second derivatives (double backward) to 1e-3. Inputs keep their strides on both devices
// (non-contiguous cases stay non-contiguous), so the strided kernel paths are exercised too. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <ember/core/backend.h>
#include <ember/core/raw_ops.h>
#include "op_cases.h"

#include "test_util.h"

namespace ember {
namespace {

using namespace test_ops;
using TV = std::vector<Tensor>;

// `t` (CPU float64, any strides) as float32 on `dev` with the same strides and offset: the whole storage
// is converted and moved, then viewed the way t views it. Non-floating tensors (indices, masks) keep their
// dtype. Floating results require grad (fresh leaves).
Tensor prepare(const Tensor& t, Device dev) {
  if (!t.defined()) return t;
  const int64_t cap = static_cast<int64_t>(t.impl()->storage->nbytes / t.itemsize());
  const bool fl = is_floating(t.dtype());
  Tensor flat = raw::as_strided(t, {cap}, {1}, 0);
  Tensor moved = (fl ? flat.to(kFloat32) : flat.contiguous()).to(dev);
  Tensor view = raw::as_strided(moved, t.shape(), t.strides(), t.storage_offset());
  if (fl) view.requires_grad_();
  return view;
}

// A fixed, element-varying output gradient, so that every output element's gradient differs.
Tensor seed_grad(const Tensor& y) {
  std::vector<double> g(static_cast<size_t>(y.numel()));
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::cos(0.7 * static_cast<double>(i) + 0.3);
  return tensor(g, y.shape(), {.dtype = y.dtype()}).to(y.device());
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

struct Result {
  Tensor y;
  TV inputs;
};
Result run(const OpCase& c, const TV& base, Device dev) {
  Result r;
  for (const Tensor& t : base) r.inputs.push_back(prepare(t, dev));
  r.y = c.fn(r.inputs);
  r.y.backward(seed_grad(r.y));
  return r;
}

// Second derivatives: the first derivatives of sum(y * seed) taken with create_graph, weighted by their own seed
// and summed, then backward() to the inputs (each op's double backward: its recorded backward, or its composite).
Result run_double(const OpCase& c, const TV& base, Device dev) {
  Result r;
  TV xs;
  for (const Tensor& t : base) {
    r.inputs.push_back(prepare(t, dev));
    if (r.inputs.back().defined() && r.inputs.back().requires_grad()) xs.push_back(r.inputs.back());
  }
  r.y = c.fn(r.inputs);
  const TV gs = autograd::grad({sum(r.y * seed_grad(r.y))}, xs, {.create_graph = true, .allow_unused = true});
  Tensor s = zeros({}, {.dtype = kFloat32, .device = dev});
  for (size_t i = 0; i < gs.size(); ++i) {
    s = s + sum(xs[i]) * 0.0;  // keeps every input in the graph, so each gets a (possibly zero) gradient
    if (gs[i].defined()) s = s + sum(gs[i] * seed_grad(gs[i]));
  }
  s.backward();
  return r;
}

// Every input gradient of the GPU run equals the CPU run's, to `rtol` (an absolute floor rtol / 10 scaled to the
// tensor: cancellation makes some elements tiny).
void expect_same_grads(const OpCase& c, const TV& base, const Result& cpu, const Result& gpu, double rtol,
                       const char* what) {
  for (size_t i = 0; i < base.size(); ++i) {
    if (!cpu.inputs[i].defined() || !cpu.inputs[i].requires_grad()) continue;
    const Tensor gc = cpu.inputs[i].grad(), gg = gpu.inputs[i].grad();
    ASSERT_EQ(gc.defined(), gg.defined()) << c.name << " input " << i;
    if (!gc.defined()) continue;
    EXPECT_TRUE(gg.is_cuda()) << c.name << " input " << i;
    const std::vector<double> gref = test::values(gc);
    EXPECT_TENSOR_NEAR(gg, gc.shape(), gref, rtol * 0.1 * std::max(1.0, max_abs(gref)), rtol)
        << c.name << " " << what << " of input " << i;
  }
}

class CudaVsCpu : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaVsCpu, ForwardAndBackwardMatchTheCpu) {
  EMBER_SKIP_IF_NO_CUDA();
  cuda::set_allow_tf32(false);
  const OpCase& c = GetParam();
  const TV base = c.inputs();
  const Result cpu = run(c, base, Device::cpu());
  const Result gpu = run(c, base, Device::cuda());
  ASSERT_TRUE(gpu.y.is_cuda()) << c.name;
  const std::vector<double> ref = test::values(cpu.y);
  // relative 1e-4, with an absolute floor scaled to the tensor (cancellation makes some elements tiny)
  EXPECT_TENSOR_NEAR(gpu.y, cpu.y.shape(), ref, 1e-5 * std::max(1.0, max_abs(ref)), 1e-4) << c.name << " output";
  expect_same_grads(c, base, cpu, gpu, 1e-4, "gradient");
}

TEST_P(CudaVsCpu, DoubleBackwardMatchesTheCpu) {
  EMBER_SKIP_IF_NO_CUDA();
  cuda::set_allow_tf32(false);
  const OpCase& c = GetParam();
  const TV base = c.inputs();
  const Result cpu = run_double(c, base, Device::cpu());
  const Result gpu = run_double(c, base, Device::cuda());
  expect_same_grads(c, base, cpu, gpu, 1e-3, "second-order gradient");
}

// The harness itself, with the CPU in the GPU's place: every case runs forward and backward in float32
// with its inputs' strides kept (runs on every machine).
TEST(CudaVsCpuHarness, EveryCaseRunsInFloat32OnTheCpu) {
  for (const OpCase& c : all_cases()) {
    const TV base = c.inputs();
    const Result r = run(c, base, Device::cpu());
    EXPECT_EQ(r.y.dtype() == kFloat32 || r.y.dtype() == kFloat64, true) << c.name;
    for (size_t i = 0; i < base.size(); ++i) {
      if (!base[i].defined()) continue;
      EXPECT_EQ(r.inputs[i].strides(), base[i].strides()) << c.name << " input " << i;
    }
    const Result d = run_double(c, base, Device::cpu());  // the second-order harness too
    for (size_t i = 0; i < base.size(); ++i)
      if (d.inputs[i].defined() && d.inputs[i].requires_grad())
        EXPECT_TRUE(d.inputs[i].grad().defined()) << c.name << " input " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaVsCpu, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

}  // namespace
}  // namespace ember
