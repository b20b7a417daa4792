// nn::init: fan computation (2-D and conv weights), gains, the statistics of each initialiser on a large tensor,
// in-place semantics on parameters (no-grad, same handle, version bump), the current generator, dtypes, devices
// and the errors for tensors they cannot initialise.
#include <cmath>

#include "test_util.h"

using namespace ember;

namespace {
struct Stats {
  double mean = 0, std = 0, min = 0, max = 0;
};
Stats stats(const Tensor& t) {
  std::vector<double> v = test::values(t);
  Stats s{0, 0, v[0], v[0]};
  for (double x : v) {
    s.mean += x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / static_cast<double>(v.size() - 1));
  return s;
}
// Five standard errors of the mean (and, about, of the sample std) of n draws with this std: a false failure is
// a one-in-a-million event.
double tol(const Tensor& t, double std) { return 5 * std / std::sqrt(static_cast<double>(t.numel())); }
// A uniform draw on [-bound, bound]: inside it, reaching near both ends, with std bound / sqrt(3).
void expect_symmetric_uniform(const Tensor& t, double bound) {
  Stats s = stats(t);
  const double std = bound / std::sqrt(3.0);
  EXPECT_GE(s.min, -bound);
  EXPECT_LE(s.max, bound);
  EXPECT_LT(s.min, -0.99 * bound);
  EXPECT_GT(s.max, 0.99 * bound);
  EXPECT_NEAR(s.mean, 0, tol(t, std));
  EXPECT_NEAR(s.std, std, tol(t, std));
}
void expect_normal(const Tensor& t, double mean, double std) {
  Stats s = stats(t);
  EXPECT_NEAR(s.mean, mean, tol(t, std));
  EXPECT_NEAR(s.std, std, tol(t, std));
}
}  // namespace

TEST(Init, FanInAndFanOut) {
  auto [in2, out2] = nn::init::calculate_fan_in_and_fan_out(zeros({5, 3}));  // Dense weight [out, in]
  EXPECT_EQ(in2, 3);
  EXPECT_EQ(out2, 5);
  auto f4 = nn::init::calculate_fan_in_and_fan_out(zeros({8, 4, 3, 3}));  // Conv2d weight [out, in, kh, kw]
  EXPECT_EQ(f4.fan_in, 4 * 3 * 3);
  EXPECT_EQ(f4.fan_out, 8 * 3 * 3);
  auto f3 = nn::init::calculate_fan_in_and_fan_out(zeros({6, 2, 5}));
  EXPECT_EQ(f3.fan_in, 10);
  EXPECT_EQ(f3.fan_out, 30);
  EXPECT_THROW_MSG(nn::init::calculate_fan_in_and_fan_out(zeros({5})), ValueError, "calculate_fan_in_and_fan_out",
                   "[5]");
}

TEST(Init, Gains) {
  EXPECT_EQ(nn::init::calculate_gain("linear"), 1.0);
  EXPECT_EQ(nn::init::calculate_gain("conv2d"), 1.0);
  EXPECT_EQ(nn::init::calculate_gain("sigmoid"), 1.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("tanh"), 5.0 / 3);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu", 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("selu"), 0.75);
  EXPECT_THROW_MSG(nn::init::calculate_gain("swish"), ValueError, "calculate_gain", "\"swish\"");
}

TEST(Init, UniformAndNormal) {
  manual_seed(11);
  Tensor t = empty({400, 500});
  Tensor same = nn::init::uniform_(t, -0.5, 1.5);
  EXPECT_TRUE(same.is_same(t));
  Stats s = stats(t);
  EXPECT_GE(s.min, -0.5);
  EXPECT_LT(s.max, 1.5);
  EXPECT_NEAR(s.mean, 0.5, tol(t, 2 / std::sqrt(12.0)));
  EXPECT_NEAR(s.std, 2 / std::sqrt(12.0), tol(t, 2 / std::sqrt(12.0)));
  nn::init::uniform_(t);  // default U(0, 1)
  EXPECT_GE(stats(t).min, 0.0);
  EXPECT_LT(stats(t).max, 1.0);
  nn::init::normal_(t, 3.0, 0.5);
  expect_normal(t, 3.0, 0.5);
  nn::init::normal_(t);
  expect_normal(t, 0.0, 1.0);
  EXPECT_THROW_MSG(nn::init::uniform_(t, 1, 0), ValueError, "uniform_");
  EXPECT_THROW_MSG(nn::init::normal_(t, 0, -1), ValueError, "normal_", "std");
}

TEST(Init, Constants) {
  Tensor t = empty({3, 4});
  nn::init::constant_(t, 0.75);
  EXPECT_EQ(test::values(t), std::vector<double>(12, 0.75));
  nn::init::zeros_(t);
  EXPECT_EQ(test::values(t), std::vector<double>(12, 0.0));
  nn::init::ones_(t);
  EXPECT_EQ(test::values(t), std::vector<double>(12, 1.0));
  Tensor i = zeros({4}, {.dtype = kInt64});  // fills take any dtype
  nn::init::constant_(i, 7);
  EXPECT_EQ(i.to_vector<int64_t>(), std::vector<int64_t>(4, 7));
}

TEST(Init, Xavier) {
  manual_seed(12);
  Tensor w = empty({300, 700});  // fan_in 700, fan_out 300
  nn::init::xavier_uniform_(w);
  expect_symmetric_uniform(w, std::sqrt(6.0 / 1000));
  nn::init::xavier_uniform_(w, 2.0);
  expect_symmetric_uniform(w, 2 * std::sqrt(6.0 / 1000));
  nn::init::xavier_normal_(w);
  expect_normal(w, 0, std::sqrt(2.0 / 1000));
  Tensor conv = empty({64, 32, 3, 3});  // fan_in 288, fan_out 576
  nn::init::xavier_normal_(conv, nn::init::calculate_gain("relu"));
  expect_normal(conv, 0, std::sqrt(2.0) * std::sqrt(2.0 / (288 + 576)));
}

TEST(Init, Kaiming) {
  manual_seed(13);
  Tensor w = empty({300, 700});
  nn::init::kaiming_uniform_(w);  // a = 0, leaky_relu: gain sqrt(2), bound sqrt(6 / fan_in)
  expect_symmetric_uniform(w, std::sqrt(6.0 / 700));
  nn::init::kaiming_uniform_(w, {.mode = nn::init::FanOut});
  expect_symmetric_uniform(w, std::sqrt(6.0 / 300));
  // PyTorch's default Linear init: a = sqrt(5) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  nn::init::kaiming_uniform_(w, {.a = std::sqrt(5.0)});
  expect_symmetric_uniform(w, 1 / std::sqrt(700.0));
  nn::init::kaiming_normal_(w, {.nonlinearity = "relu"});
  expect_normal(w, 0, std::sqrt(2.0 / 700));
  nn::init::kaiming_normal_(w, {.mode = nn::init::FanOut, .nonlinearity = "linear"});
  expect_normal(w, 0, 1 / std::sqrt(300.0));
  Tensor conv = empty({64, 32, 3, 3});
  nn::init::kaiming_normal_(conv, {.nonlinearity = "tanh"});
  expect_normal(conv, 0, (5.0 / 3) / std::sqrt(288.0));
  EXPECT_THROW_MSG(nn::init::kaiming_normal_(w, {.nonlinearity = "softplus"}), ValueError, "\"softplus\"");
  nn::init::kaiming_uniform_(empty({0, 3}));  // nothing to draw
}

TEST(Init, Orthogonal) {
  manual_seed(14);
  auto gram = [](const Tensor& w, bool rows) {  // W W^T (rows) or W^T W, as a flat vector
    Tensor m = w.reshape({w.size(0), -1});
    return test::values(rows ? matmul(m, m.t()) : matmul(m.t(), m));
  };
  auto identity = [](int64_t n, double scale) {
    std::vector<double> e(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) e[static_cast<size_t>(i * n + i)] = scale;
    return e;
  };
  Tensor tall = empty({7, 4}, {.dtype = kFloat64});
  nn::init::orthogonal_(tall);
  EXPECT_TENSOR_NEAR(tensor(gram(tall, false), {4, 4}), Shape({4, 4}), identity(4, 1), 1e-12);  // orthonormal columns
  Tensor wide = empty({3, 5}, {.dtype = kFloat64});
  nn::init::orthogonal_(wide, 2.0);
  EXPECT_TENSOR_NEAR(tensor(gram(wide, true), {3, 3}), Shape({3, 3}), identity(3, 4), 1e-12);  // rows, scaled
  Tensor conv = empty({4, 2, 2, 2});                                                           // viewed as [4, 8]
  nn::init::orthogonal_(conv);
  EXPECT_TENSOR_NEAR(tensor(gram(conv, true), {4, 4}), Shape({4, 4}), identity(4, 1), 1e-5);
  Tensor square = empty({64, 64});
  nn::init::orthogonal_(square);
  EXPECT_TENSOR_NEAR(tensor(gram(square, false), {64, 64}), Shape({64, 64}), identity(64, 1), 1e-5);
  EXPECT_THROW_MSG(nn::init::orthogonal_(empty({5})), ValueError, "orthogonal_", "[5]");
}

TEST(Init, InPlaceOnParametersUnderNoGrad) {
  manual_seed(15);
  nn::Dense d(4, 3);
  Tensor w = d.weight();
  const uint32_t v0 = w.version();
  nn::init::xavier_uniform_(w);  // a leaf that requires grad: allowed, as a no-grad update
  EXPECT_GT(w.version(), v0);
  EXPECT_TRUE(w.is_same(d.weight()));
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(GradMode::is_enabled());  // restored
  // The version bump is what makes a graph that saved the old weight refuse to run.
  Tensor x = randn({2, 4});
  x.requires_grad_();
  Tensor y = d(x);
  nn::init::normal_(d.weight());
  EXPECT_THROW_MSG(sum(y).backward(), Error, "modified by an in-place operation");
  nn::init::zeros_(d.bias());
  EXPECT_EQ(test::values(d.bias()), std::vector<double>(3, 0.0));
}

TEST(Init, DrawsFromTheCurrentGenerator) {
  Tensor t = empty({16, 8});
  manual_seed(21);
  nn::init::normal_(t, 0.5, 2.0);
  manual_seed(21);
  EXPECT_EQ(test::values(t), test::values(normal({16, 8}, 0.5, 2.0)));
  manual_seed(22);
  nn::init::kaiming_uniform_(t);
  manual_seed(22);
  const double bound = std::sqrt(6.0 / 8);
  EXPECT_EQ(test::values(t), test::values(uniform({16, 8}, -bound, bound)));
}

TEST(Init, OtherFloatingDtypesAndViews) {
  manual_seed(23);
  Tensor d = empty({200, 300}, {.dtype = kFloat64});
  nn::init::kaiming_normal_(d);
  EXPECT_EQ(d.dtype(), kFloat64);
  expect_normal(d, 0, std::sqrt(2.0 / 300));
  Tensor h = empty({100, 100}, {.dtype = kBFloat16});
  nn::init::uniform_(h, -1, 1);
  EXPECT_EQ(h.dtype(), kBFloat16);
  EXPECT_LE(stats(h).max, 1.0);
  // A view is initialised in place, the rest of its base untouched.
  Tensor base = zeros({4, 6});
  nn::init::ones_(base.slice(1, 0, 3));
  EXPECT_EQ(test::values(base.slice(1, 3, 6)), std::vector<double>(12, 0.0));
  EXPECT_EQ(test::values(base.slice(1, 0, 3)), std::vector<double>(12, 1.0));
}

TEST(Init, BadInput) {
  EXPECT_THROW_MSG(nn::init::xavier_uniform_(zeros({5})), ValueError, "xavier_uniform_", "float32[5]");
  EXPECT_THROW_MSG(nn::init::xavier_normal_(zeros({})), ValueError, "xavier_normal_", "[]");
  EXPECT_THROW_MSG(nn::init::kaiming_uniform_(zeros({7})), ValueError, "kaiming_uniform_", "[7]");
  EXPECT_THROW_MSG(nn::init::kaiming_normal_(zeros({7})), ValueError, "kaiming_normal_", "[7]");
  Tensor i = zeros({3, 3}, {.dtype = kInt64});
  EXPECT_THROW_MSG(nn::init::uniform_(i), DTypeError, "uniform_", "int64");
  EXPECT_THROW_MSG(nn::init::normal_(i), DTypeError, "normal_", "int64");
  EXPECT_THROW_MSG(nn::init::xavier_uniform_(i), DTypeError, "xavier_uniform_", "int64");
  EXPECT_THROW_MSG(nn::init::kaiming_normal_(i), DTypeError, "kaiming_normal_", "int64");
  EXPECT_THROW_MSG(nn::init::orthogonal_(i), DTypeError, "orthogonal_", "int64");
  EXPECT_THROW_MSG(nn::init::zeros_(Tensor()), ValueError, "zeros_", "undefined");
  EXPECT_THROW_MSG(nn::init::uniform_(Tensor()), ValueError, "uniform_", "undefined");
}

TEST(Init, OnCuda) {
  EMBER_SKIP_IF_NO_CUDA();
  manual_seed(24);
  Tensor w = empty({256, 512}, {.device = Device::cuda()});
  nn::init::kaiming_uniform_(w);
  EXPECT_TRUE(w.is_cuda());
  expect_symmetric_uniform(w, std::sqrt(6.0 / 512));
  nn::init::orthogonal_(w);
  EXPECT_TRUE(w.is_cuda());
  Tensor g = matmul(w, w.t());
  EXPECT_NEAR(test::values(g)[0], 1.0, 1e-4);
  nn::init::constant_(w, 2.0);
  EXPECT_EQ(stats(w).min, 2.0);
}
