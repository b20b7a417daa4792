// Double backward: autograd::grad(..., {.create_graph = true}) returns gradients that are differentiable
// again. Table-driven: every case of tests/support/op_cases.h gets a gradcheck of its gradient (the second
// derivative against finite differences of the first); a checkpoint, whose rerun carries no graph, must throw.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "op_cases.h"
#include "test_util.h"

namespace ember {
namespace {

using namespace test_ops;

// A fixed random weighting of an output, so that the first derivative of sum(y * k) is not symmetric in y.
Tensor weights_like(const Tensor& y) {
  Generator g(1234);
  return randn(y.shape(), {.dtype = y.dtype(), .device = y.device(), .generator = &g});
}

// The first derivatives of sum(fn(in) * k) with respect to the floating inputs, flattened into one tensor,
// computed with create_graph: a function of the inputs whose own gradient is the second derivative.
TensorFn first_derivative(const TensorFn& fn) {
  return [fn](const std::vector<Tensor>& in) {
    // gradcheck evaluates the function under no-grad for its finite differences: differentiate anyway, from
    // leaves of our own when the inputs do not require grad.
    EnableGradGuard grad_on;
    std::vector<Tensor> args = in, xs;
    for (Tensor& t : args)
      if (t.defined() && is_floating(t.dtype())) {
        if (!t.requires_grad()) t = t.detach().requires_grad_(true);
        xs.push_back(t);
      }
    Tensor y = fn(args);
    std::vector<Tensor> gs =
        autograd::grad({sum(y * weights_like(y))}, xs, {.create_graph = true, .allow_unused = true});
    std::vector<Tensor> flat;
    Tensor link = zeros({}, {.dtype = kFloat64});  // 0 * sum(x): a second derivative that is zero stays in the graph
    for (size_t i = 0; i < gs.size(); ++i) {
      flat.push_back(gs[i].defined() ? gs[i].reshape({-1}) : zeros({xs[i].numel()}, {.dtype = kFloat64}));
      link = link + sum(xs[i]) * 0.0;
    }
    return cat(flat) + link;
  };
}

class DoubleBackwardOps : public ::testing::TestWithParam<OpCase> {};

// Every row of the table: each op's backward is differentiable again (built of recorded ops, or through the op's
// composite), so the second derivative matches finite differences of the first; nothing refuses.
TEST_P(DoubleBackwardOps, SecondDerivativeMatchesNumeric) {
  const OpCase& c = GetParam();
  autograd::GradcheckResult r =
      autograd::gradcheck_report(first_derivative(c.fn), c.inputs(), c.eps, std::max(c.atol, 1e-4), c.rtol);
  EXPECT_TRUE(r.ok) << c.name << ": " << r.report;
}

// The first derivatives a create_graph pass returns are the plain backward's (the second-derivative check above sees
// only how they change: a linear op's wrongly placed gradient would pass it).
TEST_P(DoubleBackwardOps, CreateGraphGivesThePlainGradients) {
  const OpCase& c = GetParam();
  std::vector<Tensor> in = c.inputs(), xs;
  for (Tensor& t : in)
    if (t.defined() && is_floating(t.dtype())) {
      t = t.detach().requires_grad_(true);
      xs.push_back(t);
    }
  auto grads = [&](bool create_graph) {
    const Tensor y = c.fn(in);
    return autograd::grad({sum(y * weights_like(y))}, xs, {.create_graph = create_graph, .allow_unused = true});
  };
  const std::vector<Tensor> plain = grads(false), recorded = grads(true);
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(plain[i].defined(), recorded[i].defined()) << c.name << " input " << i;
    if (!plain[i].defined()) continue;
    const std::vector<double> want = test::values(plain[i]);
    double scale = 1;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    EXPECT_TENSOR_NEAR(recorded[i], plain[i].shape(), want, 1e-12 * scale, 1e-10) << c.name << " input " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, DoubleBackwardOps, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

TEST(DoubleBackward, MatmulAndLinearHessianVectorProducts) {
  manual_seed(3);
  Tensor x = randn({4, 5}, {.dtype = kFloat64});
  Tensor w = randn({3, 5}, {.dtype = kFloat64});
  Tensor b = randn({3}, {.dtype = kFloat64});
  for (bool use_linear : {false, true}) {
    auto f = [&](const std::vector<Tensor>& in) {
      Tensor h = use_linear ? linear(in[0], in[1], in[2]) : matmul(in[0], in[1].t()) + in[2];
      return tanh(h);
    };
    EXPECT_TRUE(autograd::gradcheck(first_derivative(f), {x, w, b})) << (use_linear ? "linear" : "matmul");
  }
}

// A WGAN-GP style gradient penalty: the penalty on the input gradient's norm trains the weights, through the
// gradient itself. Checked against finite differences of the whole penalty.
TEST(DoubleBackward, GradientPenaltyTrainsTheWeights) {
  manual_seed(5);
  Tensor x = randn({6, 4}, {.dtype = kFloat64});
  Tensor w1 = randn({8, 4}, {.dtype = kFloat64}) * 0.5, b1 = randn({8}, {.dtype = kFloat64}) * 0.1;
  Tensor w2 = randn({1, 8}, {.dtype = kFloat64}) * 0.5;
  auto penalty = [&](const std::vector<Tensor>& in) {
    EnableGradGuard grad_on;  // gradcheck's finite differences run under no-grad
    Tensor xi = in[0].requires_grad() ? in[0] : in[0].detach().requires_grad_(true);
    Tensor d = linear(softplus(linear(xi, in[1], in[2])), in[3]);
    Tensor gx = autograd::grad({sum(d)}, {xi}, {.create_graph = true})[0];
    Tensor norm = sqrt(sum(gx * gx, {1}) + 1e-12);
    return mean(square(norm - 1.0));
  };
  EXPECT_TRUE(autograd::gradcheck(penalty, {x, w1, b1, w2}));
  // And through backward(): the weights get .grad from the penalty.
  std::vector<Tensor> ps = {x, w1.detach().requires_grad_(true), b1.detach().requires_grad_(true),
                            w2.detach().requires_grad_(true)};
  penalty(ps).backward();
  for (size_t i = 1; i < ps.size(); ++i) EXPECT_TRUE(ps[i].grad().defined()) << "parameter " << i;
}

// A checkpoint's rerun differentiates fresh leaves: a create_graph pass through it refuses, naming it; without
// create_graph the same graph is fine.
TEST(DoubleBackward, CheckpointRefusesCreateGraphNamingIt) {
  Tensor x = randn({3, 4}, {.dtype = kFloat64}).requires_grad_(true);
  auto f = [](const std::vector<Tensor>& in) { return tanh(in[0]) * 2.0; };
  Tensor y = autograd::checkpoint(f, {x});
  EXPECT_THROW_MSG(autograd::grad({sum(y)}, {x}, {.create_graph = true}), Error, "checkpoint", "not differentiable");
  EXPECT_EQ(autograd::grad({sum(autograd::checkpoint(f, {x}))}, {x})[0].shape(), x.shape());
}

TEST(DoubleBackward, SecondDerivativeOfCubeIsSixX) {
  Tensor x = tensor<double>({-1.5, 0.5, 2.0}).requires_grad_(true);
  Tensor y = sum(x * x * x);
  Tensor g = autograd::grad({y}, {x}, {.create_graph = true})[0];  // 3x^2
  EXPECT_TRUE(g.requires_grad());
  Tensor h = autograd::grad({sum(g)}, {x})[0];  // 6x
  EXPECT_EQ(test::values(h), (std::vector<double>{-9.0, 3.0, 12.0}));
  // Without create_graph the gradient is a constant.
  Tensor g2 = autograd::grad({sum(x * x * x)}, {x})[0];
  EXPECT_FALSE(g2.requires_grad());
}

// A saved output (exp keeps y) must come back attached to its node: d2/dx2 exp(x) = exp(x).
TEST(DoubleBackward, SavedOutputsKeepTheirGraph) {
  Tensor x = tensor<double>({0.1, -0.7}).requires_grad_(true);
  Tensor g = autograd::grad({sum(exp(x))}, {x}, {.create_graph = true})[0];
  Tensor h = autograd::grad({sum(g)}, {x})[0];
  EXPECT_TENSOR_NEAR(h, x.shape(), test::values(exp(x.detach())), 1e-12, 1e-12);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {
// grad() runs only the part of the graph between the outputs and the requested inputs: a create_graph pass does
// not refuse ops before the inputs, and the graph there is not freed.
TEST(DoubleBackward, OnlyTheNodesBetweenOutputsAndInputsRun) {
  Tensor x = randn({5}, {.dtype = kFloat64}).requires_grad_(true);
  Tensor h = softmax(x, 0);  // lies before h: its backward never runs
  Tensor gh = autograd::grad({sum(h * h * h)}, {h}, {.create_graph = true})[0];  // 3h^2
  Tensor hh = autograd::grad({sum(gh)}, {h})[0];                                 // 6h
  EXPECT_TENSOR_NEAR(hh, h.shape(), test::values(h.detach() * 6.0), 1e-12, 1e-12);
  // Two heads on one trunk: a grad() to the trunk's output leaves the trunk's graph for a later backward().
  Tensor w = randn({5}, {.dtype = kFloat64}).requires_grad_(true);
  Tensor trunk = tanh(x * w);
  (void)autograd::grad({sum(trunk * 2.0)}, {trunk});
  sum(trunk * trunk).backward();  // would throw "backward through the graph a second time" if grad() had run it
  EXPECT_TRUE(w.grad().defined());
}

// x.mul_(x) and a view of x: the saved `other` must be its value before the op (or the op must be refused).
TEST(InPlace, SelfTimesSelfHasTheRightGradient) {
  Tensor a = tensor<double>({1.5, -2.0}).requires_grad_(true);
  Tensor x = a * 1.0;
  x.mul_(x);  // x = a^2
  sum(x).backward();
  EXPECT_EQ(test::values(a.grad()), (std::vector<double>{3.0, -4.0}));  // 2a
  Tensor b = tensor<double>({1.0, 2.0}).requires_grad_(true);
  Tensor y = b * 1.0;
  y.mul_(y.view({2}));  // other shares y's memory under another handle
  EXPECT_THROW_MSG(sum(y).backward(), Error, "modified by an in-place operation");
}
}  // namespace
}  // namespace ember
