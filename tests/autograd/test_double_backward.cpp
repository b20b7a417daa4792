// Double backward: autograd::grad(..., {.create_graph = true}) returns gradients that are differentiable
// again. Table-driven: every case of tests/support/op_cases.h whose ops all have a differentiable backward
// gets a gradcheck of its gradient (the second derivative against finite differences of the first); cases
// through an op without one must throw, never return a wrong second derivative.
#include <gtest/gtest.h>

#include <algorithm>
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

bool unsupported(const OpCase& c) {
  try {
    std::vector<Tensor> in = c.inputs();
    for (Tensor& t : in)
      if (t.defined() && is_floating(t.dtype())) t = t.detach().requires_grad_(true);
    (void)first_derivative(c.fn)(in);
    return false;
  } catch (const Error& e) {
    if (std::string(e.what()).find("is not differentiable in Ember yet") != std::string::npos) return true;
    throw;
  }
}

class DoubleBackwardOps : public ::testing::TestWithParam<OpCase> {};

TEST_P(DoubleBackwardOps, SecondDerivativeMatchesNumericOrThrows) {
  const OpCase& c = GetParam();
  if (unsupported(c)) {
    // Only ops outside the supported list may refuse.
    // chain goes through slice; norm_inf / norm_neginf through max / min; methods_refusing through x.max(),
    // x.var(), x.softmax(), ...; chunk and split through slice; cross_entropy through log_softmax
    static const std::set<std::string> refusing = {"gelu",          "var",
                                                   "max",           "min",
                                                   "conv2d",        "max_pool2d",
                                                   "avg_pool2d",    "slice",
                                                   "select",        "cat",
                                                   "stack",         "softmax",
                                                   "log_softmax",   "batch_norm",
                                                   "sign",          "inplace",
                                                   "mlp_nll",       "conv_pool",
                                                   "chain",         "norm_inf",
                                                   "norm_neginf",   "methods_refusing",
                                                   "chunk",         "split",
                                                   "cross_entropy", "sdpa",
                                                   "layer_norm"};
    bool known = false;
    for (const std::string& op : refusing) known = known || c.name.rfind(op, 0) == 0;
    EXPECT_TRUE(known) << c.name << " refused double backward but its op is on the supported list";
    return;
  }
  autograd::GradcheckResult r =
      autograd::gradcheck_report(first_derivative(c.fn), c.inputs(), c.eps, std::max(c.atol, 1e-4), c.rtol);
  EXPECT_TRUE(r.ok) << c.name << ": " << r.report;
}

INSTANTIATE_TEST_SUITE_P(Ops, DoubleBackwardOps, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

// The table must exercise the supported ops, not skip its way to green.
TEST(DoubleBackward, SupportedOpsAreCheckedNotSkipped) {
  std::set<std::string> checked;
  for (const OpCase& c : all_cases())
    if (!unsupported(c)) checked.insert(c.name);
  auto expect_checked = [&](const std::string& name) {
    EXPECT_TRUE(std::any_of(checked.begin(), checked.end(),
                            [&](const std::string& c) { return c == name || c.rfind(name + "_", 0) == 0; }))
        << name << " was not double-backward checked";
  };
  for (const char* name : {"add",       "sub",     "mul",       "div",     "pow",        "neg",       "exp",
                           "log",       "sqrt",    "tanh",      "sigmoid", "softplus",   "relu",      "sum_dim1",
                           "mean_dim0", "reshape", "transpose", "permute", "expand_mul", "to_f32_f64"})
    expect_checked(name);
  // issue 17's ops and the Tensor math members
  for (const char* name : {"log1p", "sin", "cos", "silu", "leaky_relu", "elu", "logsumexp_dim1", "norm_p2_dim1"})
    expect_checked(name);
  for (const char* name : {"norm_p1_dim2", "norm_p3_negdim_keep", "cumsum_squared", "methods_elementwise",
                           "methods_reductions", "methods_matmul"})
    expect_checked(name);
  // the index and shape ops of issue 17 (index_select and its adjoint index_add, pad, and the composites over them
  // and over matmul / where)
  for (const char* name : {"index_select_dim0_repeat", "gather_dim1", "gather_noncontig", "scatter_add_dim1",
                           "scatter_add_dim0_src_larger", "masked_fill_plain", "masked_fill_tensor_value",
                           "sort_values_dim1", "topk_values_k2", "pad_last_dim", "pad_negative_crop", "einsum_matmul",
                           "einsum_ellipsis_bcast", "einsum_bilinear", "adaptive_avg_pool2d_5x7_to_3x4",
                           "nll_loss_weight_mean", "l1_loss_mean", "huber_loss_delta", "smooth_l1_loss_sum"})
    expect_checked(name);
}

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

TEST(DoubleBackward, UnsupportedOpThrowsNamingIt) {
  Tensor x = randn({1, 1, 4, 4}, {.dtype = kFloat64}).requires_grad_(true);
  Tensor w = randn({2, 1, 3, 3}, {.dtype = kFloat64});
  Tensor y = conv2d(x, w);
  EXPECT_THROW_MSG(autograd::grad({sum(y)}, {x}, {.create_graph = true}), Error, "conv2d");
  // Without create_graph the same graph is fine.
  EXPECT_EQ(autograd::grad({sum(conv2d(x, w))}, {x})[0].shape(), x.shape());
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
  Tensor h = softmax(x, 0);  // softmax has no double backward, but lies before h
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
