// The built-in layers against references computed here in float64: Dense, Conv2d, the pools, Flatten,
// Dropout (statistically), BatchNorm1d/2d (batch statistics and PyTorch's running statistics), LayerNorm,
// Embedding; their shape errors; and gradchecks of each w.r.t. its input and (by central differences on
// the module's own float64 parameters) w.r.t. its parameters.
#include <cmath>
#include <functional>

#include <ember/core/raw_ops.h>

#include "test_util.h"

using namespace ember;

namespace {

const TensorOptions f64{.dtype = kFloat64};

// Checks every parameter's .grad (from one backward of loss()) against central differences of loss(),
// perturbing the module's own float64 parameters in place.
::testing::AssertionResult param_grads_match(nn::Module& m, const std::function<Tensor()>& loss, double eps = 1e-6,
                                             double atol = 1e-6, double rtol = 1e-4) {
  m.zero_grad();
  loss().backward();
  NoGradGuard g;
  for (const auto& [name, p] : m.named_parameters()) {
    if (!p.grad().defined()) return ::testing::AssertionFailure() << name << " got no gradient";
    if (p.dtype() != kFloat64 || !p.is_contiguous()) return ::testing::AssertionFailure() << name << ": not float64";
    std::vector<double> ana = test::values(p.grad());
    double* d = p.data<double>();
    for (int64_t i = 0; i < p.numel(); ++i) {
      const double orig = d[i];
      d[i] = orig + eps;
      const double fp = loss().item();
      d[i] = orig - eps;
      const double fm = loss().item();
      d[i] = orig;
      const double num = (fp - fm) / (2 * eps);
      if (!(std::fabs(num - ana[static_cast<size_t>(i)]) <= atol + rtol * std::fabs(num)))
        return ::testing::AssertionFailure()
               << name << " element " << i << ": numeric " << num << ", analytic " << ana[static_cast<size_t>(i)];
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult gradcheck_ok(const autograd::TensorFn& fn, const std::vector<Tensor>& in) {
  autograd::GradcheckResult r = autograd::gradcheck_report(fn, in);
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.report;
}

// Sets a parameter's values (under NoGradGuard, in place).
void assign(const Tensor& p, const std::vector<double>& v) {
  NoGradGuard g;
  Tensor dst = p;
  dst.copy_(tensor(v, p.shape(), {.dtype = p.dtype()}));
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

}  // namespace

// ------------------------------------------------------------------------------------------------ Dense

TEST(Dense, ForwardMatchesReference) {
  manual_seed(10);
  nn::Dense d(4, 3, nn::relu);
  Tensor x = randn({5, 4});
  std::vector<double> xv = test::values(x), w = test::values(d.weight()), b = test::values(d.bias()), ref;
  for (int i = 0; i < 5; ++i)
    for (int o = 0; o < 3; ++o) {
      double s = b[o];
      for (int k = 0; k < 4; ++k) s += xv[i * 4 + k] * w[o * 4 + k];
      ref.push_back(std::max(s, 0.0));
    }
  Tensor y = d(x);
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_TENSOR_NEAR(y, Shape({5, 3}), ref, 1e-5, 1e-5);
  // Leading batch dims pass through.
  EXPECT_TENSOR_NEAR(d(x.reshape({5, 1, 4})), Shape({5, 1, 3}), ref, 1e-5, 1e-5);
  EXPECT_EQ(d.weight().shape(), Shape({3, 4}));
}

TEST(Dense, DefaultInitIsUniformWithinFanInBound) {
  manual_seed(11);
  nn::Dense d(100, 50);
  const double bound = 1.0 / std::sqrt(100.0);
  for (const Tensor& p : d.parameters()) {
    EXPECT_TRUE(p.requires_grad());
    std::vector<double> v = test::values(p);
    double lo = 1e9, hi = -1e9;
    for (double x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    EXPECT_GE(lo, -bound);
    EXPECT_LE(hi, bound);
    EXPECT_GT(hi - lo, bound);  // spread, not constant
  }
  std::vector<double> w = test::values(d.weight());
  double lo = *std::min_element(w.begin(), w.end()), hi = *std::max_element(w.begin(), w.end());
  EXPECT_LT(lo, -0.9 * bound);  // 5000 uniform draws cover the range
  EXPECT_GT(hi, 0.9 * bound);
  EXPECT_NEAR(mean_of(w), 0.0, 0.01);
  // Two layers get different weights.
  nn::Dense e(100, 50);
  EXPECT_NE(test::values(e.weight()), w);
}

TEST(Dense, NoBias) {
  manual_seed(12);
  nn::Dense d(3, 2, nn::identity, {.bias = false});
  EXPECT_FALSE(d.bias().defined());
  ASSERT_EQ(d.named_parameters().size(), 1u);
  EXPECT_EQ(d.named_parameters()[0].first, "weight");
  Tensor x = randn({4, 3});
  std::vector<double> xv = test::values(x), w = test::values(d.weight()), ref;
  for (int i = 0; i < 4; ++i)
    for (int o = 0; o < 2; ++o)
      ref.push_back(xv[i * 3] * w[o * 3] + xv[i * 3 + 1] * w[o * 3 + 1] + xv[i * 3 + 2] * w[o * 3 + 2]);
  EXPECT_TENSOR_NEAR(d(x), Shape({4, 2}), ref, 1e-5, 1e-5);
}

TEST(Dense, WrongInputSizeNamesTheLayer) {
  nn::Dense d(4, 3, nn::relu);
  EXPECT_THROW_MSG(d(zeros({2, 5})), ShapeError, "Dense(4 => 3, relu)", "[2, 5]", "4");
  EXPECT_THROW_MSG(d(zeros({})), ShapeError, "Dense(4 => 3, relu)");
  EXPECT_THROW(nn::Dense(0, 3), ValueError);
  EXPECT_THROW(nn::Dense(3, -1), ValueError);
}

TEST(Dense, Gradcheck) {
  manual_seed(13);
  nn::Dense d(4, 3, nn::tanh);
  d.to(kFloat64);
  Tensor x = randn({5, 4}, f64);
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return d(in[0]); }, {x}));
  // The same computation written functionally, differentiated w.r.t. the module's own parameters.
  EXPECT_TRUE(gradcheck_ok([](const std::vector<Tensor>& in) { return ember::tanh(linear(in[0], in[1], in[2])); },
                           {x, d.weight().detach(), d.bias().detach()}));
  Tensor r = randn({5, 3}, f64);
  EXPECT_TRUE(param_grads_match(d, [&] { return sum(d(x) * r); }));
}

// ----------------------------------------------------------------------------------------------- Conv2d

TEST(Conv2d, MatchesFunctionalAndReference) {
  manual_seed(20);
  nn::Conv2d c(2, 3, 3, {.stride = 2, .padding = 1});
  EXPECT_EQ(c.weight().shape(), Shape({3, 2, 3, 3}));
  EXPECT_EQ(c.bias().shape(), Shape({3}));
  const double bound = 1.0 / std::sqrt(2.0 * 9);
  for (double v : test::values(c.weight())) EXPECT_LE(std::fabs(v), bound);
  Tensor x = randn({2, 2, 7, 7});
  Tensor y = c(x);
  EXPECT_EQ(y.shape(), Shape({2, 3, 4, 4}));  // (7 + 2 - 3) / 2 + 1
  EXPECT_EQ(test::values(y), test::values(conv2d(x, c.weight(), c.bias(), {2}, {1})));

  // A direct float64 reference of the same convolution.
  std::vector<double> xv = test::values(x), w = test::values(c.weight()), b = test::values(c.bias()), ref;
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < 3; ++o)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          double s = b[o];
          for (int ci = 0; ci < 2; ++ci)
            for (int ki = 0; ki < 3; ++ki)
              for (int kj = 0; kj < 3; ++kj) {
                const int r = i * 2 - 1 + ki, q = j * 2 - 1 + kj;
                if (r < 0 || r >= 7 || q < 0 || q >= 7) continue;
                s += xv[((n * 2 + ci) * 7 + r) * 7 + q] * w[((o * 2 + ci) * 3 + ki) * 3 + kj];
              }
          ref.push_back(s);
        }
  EXPECT_TENSOR_NEAR(y, Shape({2, 3, 4, 4}), ref, 1e-5, 1e-5);

  nn::Conv2d nb(1, 2, 2, {.bias = false});
  EXPECT_EQ(nb.parameters().size(), 1u);
  EXPECT_EQ(nb(randn({1, 1, 5, 6})).shape(), Shape({1, 2, 4, 5}));
  EXPECT_THROW(c(randn({2, 3, 7, 7})), ShapeError);  // 3 channels into a 2-channel conv
  EXPECT_THROW(nn::Conv2d(1, 1, 3, {.stride = 0}), ValueError);
}

TEST(Conv2d, Gradcheck) {
  manual_seed(21);
  nn::Conv2d c(2, 3, 3, {.stride = 2, .padding = 1});
  c.to(kFloat64);
  Tensor x = randn({1, 2, 5, 5}, f64);
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return c(in[0]); }, {x}));
  Tensor r = randn({1, 3, 3, 3}, f64);
  EXPECT_TRUE(param_grads_match(c, [&] { return sum(c(x) * r); }));
}

// ------------------------------------------------------------------------------------------------ pools

TEST(Pool2d, MaxAndAvgMatchReference) {
  manual_seed(30);
  Tensor x = randn({2, 3, 4, 5});
  std::vector<double> xv = test::values(x);
  auto ref = [&](int k, int s, bool is_max) {
    const int oh = (4 - k) / s + 1, ow = (5 - k) / s + 1;
    std::vector<double> out;
    for (int nc = 0; nc < 6; ++nc)
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j) {
          double acc = is_max ? -INFINITY : 0;
          for (int a = 0; a < k; ++a)
            for (int b = 0; b < k; ++b) {
              const double v = xv[(nc * 4 + i * s + a) * 5 + j * s + b];
              acc = is_max ? std::max(acc, v) : acc + v / (k * k);
            }
          out.push_back(acc);
        }
    return out;
  };
  EXPECT_TENSOR_NEAR(nn::MaxPool2d(2)(x), Shape({2, 3, 2, 2}), ref(2, 2, true), 0, 0);
  EXPECT_TENSOR_NEAR(nn::MaxPool2d(2, 1)(x), Shape({2, 3, 3, 4}), ref(2, 1, true), 0, 0);
  EXPECT_TENSOR_NEAR(nn::AvgPool2d(2)(x), Shape({2, 3, 2, 2}), ref(2, 2, false), 1e-6);
  EXPECT_TENSOR_NEAR(nn::AvgPool2d(3, 1)(x), Shape({2, 3, 2, 3}), ref(3, 1, false), 1e-6);
  EXPECT_TRUE(nn::MaxPool2d(2).parameters().empty());
  EXPECT_THROW(nn::MaxPool2d(0), ValueError);
}

TEST(Flatten, KeepsTheBatchDim) {
  Tensor x = randn({2, 3, 4, 5});
  Tensor y = nn::Flatten()(x);
  EXPECT_EQ(y.shape(), Shape({2, 60}));
  EXPECT_EQ(test::values(y), test::values(x));
  EXPECT_EQ(nn::Flatten(2)(x).shape(), Shape({2, 3, 20}));
  EXPECT_EQ(nn::Flatten(0)(x).shape(), Shape({120}));
}

// ---------------------------------------------------------------------------------------------- Dropout

TEST(Dropout, EvalIsIdentity) {
  nn::Dropout d(0.5);
  d.eval();
  Tensor x = randn({100});
  EXPECT_EQ(test::values(d(x)), test::values(x));
}

TEST(Dropout, TrainZeroesAboutPAndScalesTheRest) {
  manual_seed(40);
  const double p = 0.3;
  const int64_t n = 100000;
  nn::Dropout d(p);
  Tensor x = (rand({n}) + 0.5).requires_grad_();  // no zeros of its own
  Tensor y = d(x);
  std::vector<double> xv = test::values(x), yv = test::values(y);
  int64_t zeros_seen = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    if (yv[i] == 0) {
      ++zeros_seen;
    } else {
      ASSERT_NEAR(yv[i], xv[i] / (1 - p), 1e-6) << i;
    }
  }
  // Binomial(n, p): standard deviation sqrt(p (1 - p) / n) ~ 0.00145 of n; allow 6 of them.
  const double frac = static_cast<double>(zeros_seen) / static_cast<double>(n);
  EXPECT_NEAR(frac, p, 6 * std::sqrt(p * (1 - p) / static_cast<double>(n)));
  // The gradient is the same mask, scaled.
  sum(y).backward();
  std::vector<double> g = test::values(x.grad());
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], yv[i] == 0 ? 0.0 : 1 / (1 - p), 1e-6) << i;
  // Each call draws a new mask.
  EXPECT_NE(test::values(d(x)), yv);
}

TEST(Dropout, EdgeProbabilities) {
  Tensor x = rand({1000}) + 0.5;
  nn::Dropout none(0.0), all(1.0);
  EXPECT_EQ(test::values(none(x)), test::values(x));
  EXPECT_EQ(test::values(all(x)), std::vector<double>(1000, 0.0));
  all.eval();
  EXPECT_EQ(test::values(all(x)), test::values(x));
  EXPECT_THROW_MSG(nn::Dropout(-0.1), ValueError, "Dropout", "[0, 1]");
  EXPECT_THROW(nn::Dropout(1.5), ValueError);
  EXPECT_THROW(nn::Dropout(NAN), ValueError);
}

// -------------------------------------------------------------------------------------------- BatchNorm

namespace {

// Per-channel statistics of x viewed as [N, C, S] (S = product of the spatial dims).
struct ChannelStats {
  std::vector<double> mean, var_biased, var_unbiased;
  int64_t count = 0;
};
ChannelStats channel_stats(const std::vector<double>& v, int64_t n, int64_t c, int64_t s) {
  ChannelStats st;
  st.count = n * s;
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < s; ++k) sum += v[(i * c + ch) * s + k];
    const double m = sum / static_cast<double>(st.count);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < s; ++k) sq += (v[(i * c + ch) * s + k] - m) * (v[(i * c + ch) * s + k] - m);
    st.mean.push_back(m);
    st.var_biased.push_back(sq / static_cast<double>(st.count));
    st.var_unbiased.push_back(sq / static_cast<double>(st.count - 1));
  }
  return st;
}

// (x - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c] over [N, C, S].
std::vector<double> bn_ref(const std::vector<double>& v, int64_t n, int64_t c, int64_t s,
                           const std::vector<double>& mean, const std::vector<double>& var,
                           const std::vector<double>& w, const std::vector<double>& b, double eps = 1e-5) {
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t k = 0; k < s; ++k) {
        const size_t at = static_cast<size_t>((i * c + ch) * s + k);
        out[at] = (v[at] - mean[ch]) / std::sqrt(var[ch] + eps) * w[ch] + b[ch];
      }
  return out;
}

// x [N, C, S...] with channel ch ~ N(ch - 1, (ch + 1)^2): channels with distinct statistics.
Tensor channel_data(const Shape& s) {
  Shape pshape(s.size(), 1);
  pshape[1] = s[1];
  Tensor scale = arange(s[1]).to(kFloat32).reshape(pshape) + 1.0;
  return randn(s) * scale + (scale - 2.0);
}

void check_batchnorm(nn::BatchNorm& bn, const Shape& shape) {
  const int64_t n = shape[0], c = shape[1], s = shape.numel() / (n * c);
  auto bufs = bn.named_buffers();
  ASSERT_EQ(bufs.size(), 3u);
  EXPECT_EQ(bufs[0].first, "running_mean");
  EXPECT_EQ(bufs[1].first, "running_var");
  EXPECT_EQ(bufs[2].first, "num_batches_tracked");
  Tensor rm = bufs[0].second, rv = bufs[1].second, nbt = bufs[2].second;
  EXPECT_EQ(test::values(rm), std::vector<double>(static_cast<size_t>(c), 0.0));
  EXPECT_EQ(test::values(rv), std::vector<double>(static_cast<size_t>(c), 1.0));
  EXPECT_EQ(nbt.dtype(), kInt64);

  // Training: batch statistics; running stats as PyTorch (momentum 0.1, unbiased variance).
  std::vector<double> exp_rm(static_cast<size_t>(c), 0.0), exp_rv(static_cast<size_t>(c), 1.0);
  const std::vector<double> ones_c(static_cast<size_t>(c), 1.0), zeros_c(static_cast<size_t>(c), 0.0);
  for (int step = 0; step < 3; ++step) {
    Tensor x = channel_data(shape);
    std::vector<double> xv = test::values(x);
    ChannelStats st = channel_stats(xv, n, c, s);
    Tensor y = bn(x);
    EXPECT_TENSOR_NEAR(y, shape, bn_ref(xv, n, c, s, st.mean, st.var_biased, ones_c, zeros_c), 1e-4, 1e-4);
    ChannelStats ys = channel_stats(test::values(y), n, c, s);
    for (int64_t ch = 0; ch < c; ++ch) {
      EXPECT_NEAR(ys.mean[ch], 0.0, 1e-5);
      EXPECT_NEAR(ys.var_biased[ch], 1.0, 1e-3);  // var / (var + eps)
    }
    for (int64_t ch = 0; ch < c; ++ch) {
      exp_rm[ch] = 0.9 * exp_rm[ch] + 0.1 * st.mean[ch];
      exp_rv[ch] = 0.9 * exp_rv[ch] + 0.1 * st.var_unbiased[ch];
    }
    EXPECT_TENSOR_NEAR(rm, Shape({c}), exp_rm, 1e-5, 1e-5);
    EXPECT_TENSOR_NEAR(rv, Shape({c}), exp_rv, 1e-5, 1e-5);
    EXPECT_EQ(nbt.item<int64_t>(), step + 1);
  }

  // Eval: the running statistics and the affine parameters; nothing is updated.
  std::vector<double> w, b;
  for (int64_t ch = 0; ch < c; ++ch) {
    w.push_back(0.5 + 0.25 * static_cast<double>(ch));
    b.push_back(0.1 * static_cast<double>(ch) - 0.2);
  }
  assign(bn.named_parameters()[0].second, w);
  assign(bn.named_parameters()[1].second, b);
  bn.eval();
  Tensor x = channel_data(shape);
  std::vector<double> xv = test::values(x);
  EXPECT_TENSOR_NEAR(bn(x), shape, bn_ref(xv, n, c, s, exp_rm, exp_rv, w, b), 1e-4, 1e-4);
  EXPECT_TENSOR_NEAR(rm, Shape({c}), exp_rm, 1e-5, 1e-5);
  EXPECT_EQ(nbt.item<int64_t>(), 3);
  // Training again uses the batch statistics with the affine parameters.
  bn.train();
  ChannelStats st = channel_stats(xv, n, c, s);
  EXPECT_TENSOR_NEAR(bn(x), shape, bn_ref(xv, n, c, s, st.mean, st.var_biased, w, b), 1e-4, 1e-4);
  EXPECT_EQ(nbt.item<int64_t>(), 4);
}

}  // namespace

TEST(BatchNorm, OneD) {
  manual_seed(50);
  nn::BatchNorm1d bn(3);
  check_batchnorm(bn, {16, 3});
}

TEST(BatchNorm, OneDWithLength) {
  manual_seed(51);
  nn::BatchNorm1d bn(4);
  check_batchnorm(bn, {5, 4, 6});
}

TEST(BatchNorm, TwoD) {
  manual_seed(52);
  nn::BatchNorm2d bn(3);
  check_batchnorm(bn, {4, 3, 5, 5});
}

TEST(BatchNorm, ShapeErrors) {
  nn::BatchNorm2d bn2(3);
  EXPECT_THROW_MSG(bn2(zeros({4, 3, 5})), ShapeError, "BatchNorm2d(3)", "[4, 3, 5]");
  EXPECT_THROW_MSG(bn2(zeros({4, 2, 5, 5})), ShapeError, "BatchNorm2d(3)", "[4, 2, 5, 5]");
  nn::BatchNorm1d bn1(3);
  EXPECT_THROW_MSG(bn1(zeros({4, 5})), ShapeError, "BatchNorm1d(3)");
  EXPECT_THROW_MSG(bn1(zeros({1, 3})), ValueError, "more than one value");  // one sample in training
  bn1.eval();
  EXPECT_EQ(bn1(zeros({1, 3})).shape(), Shape({1, 3}));
  nn::BatchNorm1d plain(3, {.affine = false});
  EXPECT_TRUE(plain.parameters().empty());
  EXPECT_EQ(plain.buffers().size(), 3u);
}

// BatchNorm2d(c, {.relu = true}): exactly relu(BatchNorm2d(c)) — output, running statistics and every gradient, in
// training and evaluation, float32 and bf16 — and a step's plan holds no more (the normalised tensor is never made).
TEST(BatchNorm, FusedReluEqualsBatchNormThenRelu) {
  for (DType dt : {kFloat32, kBFloat16})
    for (bool training : {true, false}) {
      manual_seed(54);
      nn::BatchNorm2d fused(3, {.relu = true}), plain(3);
      for (nn::BatchNorm* bn : {&fused, &plain}) {
        NoGradGuard g;
        bn->named_parameters()[0].second.copy_(tensor(std::vector<double>{0.5, 1.5, -1.0}, {3}));
        bn->named_parameters()[1].second.copy_(tensor(std::vector<double>{0.1, -0.2, 0.3}, {3}));
        bn->train(training);
      }
      const Tensor x0 = randn({4, 3, 5, 5}).to(dt), gy = randn({4, 3, 5, 5}).to(dt);
      Tensor xa = x0.detach().requires_grad_(), xb = x0.detach().requires_grad_();
      const Tensor ya = fused(xa), yb = relu(plain(xb));
      (ya * gy).sum().backward();
      (yb * gy).sum().backward();
      const std::string what = detail::str(dt, training ? " training" : " eval");
      EXPECT_EQ(ya.dtype(), dt) << what;
      EXPECT_EQ(test::values(ya), test::values(yb)) << what;
      EXPECT_EQ(test::values(xa.grad()), test::values(xb.grad())) << what;
      for (size_t i = 0; i < 2; ++i)
        EXPECT_EQ(test::values(fused.named_parameters()[i].second.grad()),
                  test::values(plain.named_parameters()[i].second.grad()))
            << what << " parameter " << i;
      for (size_t i = 0; i < 2; ++i)
        EXPECT_EQ(test::values(fused.buffers()[i]), test::values(plain.buffers()[i])) << what << " buffer " << i;
    }
  EXPECT_EQ(nn::BatchNorm2d(3, {.relu = true}).repr(), "BatchNorm2d(3, relu = true)");
  // the forward never makes the normalised [64, 16, 28, 28] float32 tensor: its peak is at least that much lower
  auto forward = [](bool fuse) {
    return memory::plan(Device::cpu(), [fuse] {
      nn::Chain net{nn::Conv2d(1, 16, 3, {.padding = 1}), nn::BatchNorm2d(16, {.relu = fuse})};
      Tensor y = net(randn({64, 1, 28, 28}));
      if (!fuse) y = relu(y);
    });
  };
  const size_t fused_peak = forward(true).peak_bytes, plain_peak = forward(false).peak_bytes;
  EXPECT_LE(fused_peak + 64 * 16 * 28 * 28 * 4, plain_peak) << fused_peak << " vs " << plain_peak;
}

TEST(BatchNorm, GradcheckInTrainMode) {
  manual_seed(53);
  nn::BatchNorm1d bn(3);
  bn.to(kFloat64);
  assign(bn.named_parameters()[0].second, {0.5, 1.5, -1.0});
  assign(bn.named_parameters()[1].second, {0.1, -0.2, 0.3});
  Tensor x = randn({6, 3}, f64), r = randn({6, 3}, f64);
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return bn(in[0]); }, {x}));
  EXPECT_TRUE(param_grads_match(bn, [&] { return sum(bn(x) * r); }));

  nn::BatchNorm2d bn2(2);
  bn2.to(kFloat64);
  Tensor x2 = randn({3, 2, 2, 3}, f64), r2 = randn({3, 2, 2, 3}, f64);
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return sum(bn2(in[0]) * r2); }, {x2}));
  EXPECT_TRUE(param_grads_match(bn2, [&] { return sum(bn2(x2) * r2); }));
  // In eval mode too (a fixed affine map of x).
  bn2.eval();
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return bn2(in[0]); }, {x2}));
}

// -------------------------------------------------------------------------------------------- LayerNorm

TEST(LayerNorm, NormalisesTheLastDim) {
  manual_seed(60);
  nn::LayerNorm ln(5);
  std::vector<double> w = {1.0, 0.5, 2.0, -1.0, 0.25}, b = {0.0, 0.1, -0.1, 0.2, 0.3};
  assign(ln.named_parameters()[0].second, w);
  assign(ln.named_parameters()[1].second, b);
  Tensor x = randn({3, 4, 5}) * 3.0 + 1.0;
  std::vector<double> xv = test::values(x), ref(xv.size());
  for (size_t row = 0; row < 12; ++row) {
    double m = 0, v = 0;
    for (size_t k = 0; k < 5; ++k) m += xv[row * 5 + k] / 5;
    for (size_t k = 0; k < 5; ++k) v += (xv[row * 5 + k] - m) * (xv[row * 5 + k] - m) / 5;
    for (size_t k = 0; k < 5; ++k) ref[row * 5 + k] = (xv[row * 5 + k] - m) / std::sqrt(v + 1e-5) * w[k] + b[k];
  }
  EXPECT_TENSOR_NEAR(ln(x), Shape({3, 4, 5}), ref, 1e-5, 1e-4);
  // Without the affine part each row has mean 0 and variance 1.
  nn::LayerNorm plain(5, {.affine = false});
  std::vector<double> y = test::values(plain(x));
  for (size_t row = 0; row < 12; ++row) {
    double m = 0, v = 0;
    for (size_t k = 0; k < 5; ++k) m += y[row * 5 + k] / 5;
    for (size_t k = 0; k < 5; ++k) v += (y[row * 5 + k] - m) * (y[row * 5 + k] - m) / 5;
    EXPECT_NEAR(m, 0.0, 1e-6);
    EXPECT_NEAR(v, 1.0, 1e-3);
  }
  EXPECT_THROW_MSG(ln(zeros({3, 4})), ShapeError, "LayerNorm(5)", "[3, 4]");
}

TEST(LayerNorm, Gradcheck) {
  manual_seed(61);
  nn::LayerNorm ln(4);
  ln.to(kFloat64);
  assign(ln.named_parameters()[0].second, {0.5, 1.5, -1.0, 2.0});
  Tensor x = randn({3, 4}, f64), r = randn({3, 4}, f64);
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return ln(in[0]); }, {x}));
  EXPECT_TRUE(param_grads_match(ln, [&] { return sum(ln(x) * r); }));
}

// The fused float32 kernels against float64 on rows far from 0 (mean 100, std 0.5: a one-pass variance in float32,
// E[x^2] - E[x]^2, would be off by 0.2%), on enough rows to split across threads; forward and the three gradients.
// Rows of 96 fill the sixteen partial sums of the row reductions exactly; rows of 37 leave a tail of 5.
TEST(LayerNorm, Float32MatchesFloat64FarFromZero) {
  for (const int64_t D : {96, 37}) {
    manual_seed(62);
    Tensor x64 = randn({300, D}, f64) * 0.5 + 100.0, w64 = randn({D}, f64), b64 = randn({D}, f64);
    Tensor g64 = randn({300, D}, f64);
    auto run = [&](DType dt) {
      Tensor x = x64.to(dt).requires_grad_(true), w = w64.to(dt).requires_grad_(true),
             b = b64.to(dt).requires_grad_(true);
      Tensor y = layer_norm(x, {D}, w, b, 1e-5);
      y.backward(g64.to(dt));
      return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
    };
    // the float32 input is x64 rounded to float32 (ulp 8e-6 at 100): the reference is computed from those values
    x64 = x64.to(kFloat32).to(kFloat64);
    const std::vector<Tensor> f32 = run(kFloat32), f64r = run(kFloat64);
    const char* what[] = {"y", "dx", "dw", "db"};
    for (size_t i = 0; i < 4; ++i)
      EXPECT_TENSOR_NEAR(f32[i], f64r[i].shape(), test::values(f64r[i]), 2e-4, 2e-4) << what[i] << ", D = " << D;
  }
}

// dw and db sum over rows in fixed blocks of rows (core/cpu/layer_norm.cpp), so they come out the same bits on any
// thread count, and the same whether or not dx is computed in the same pass (x without grad).
TEST(LayerNorm, WeightGradientsDoNotDependOnThreadsOrOnDx) {
  const int saved = get_num_threads();
  manual_seed(63);
  // 2001 rows: 32 blocks of 64 rows, enough for 2 and 3 threads to split them
  const Tensor x0 = randn({2001, 70}) * 2.0 + 1.0, g = randn({2001, 70}), w0 = randn({70}), b0 = randn({70});
  auto grads = [&](int threads, bool x_grad) {
    set_num_threads(threads);
    Tensor x = x0.clone().requires_grad_(x_grad), w = w0.clone().requires_grad_(true),
           b = b0.clone().requires_grad_(true);
    layer_norm(x, {70}, w, b, 1e-5).backward(g);
    return std::vector<Tensor>{w.grad(), b.grad(), x_grad ? x.grad() : Tensor()};
  };
  const std::vector<Tensor> one = grads(1, true);
  for (int threads : {2, 3}) {
    const std::vector<Tensor> many = grads(threads, true), no_dx = grads(threads, false);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(test::values(many[i]), test::values(one[i])) << "gradient " << i << ", threads " << threads;
    for (size_t i = 0; i < 2; ++i)
      EXPECT_EQ(test::values(no_dx[i]), test::values(one[i])) << "gradient " << i << " without dx, threads " << threads;
  }
  set_num_threads(saved);
}

// Rows of 1024: the partial sums of dw and db are held 32 blocks of 64 rows at a time (256 KiB), so 2100 rows go in
// two groups; against float64, and the same bits on 1 and 2 threads.
TEST(LayerNorm, LongInputsSumTheirWeightGradientsInGroups) {
  const int saved = get_num_threads();
  manual_seed(64);
  const int64_t N = 2100, D = 1024;
  const Tensor x64 = randn({N, D}, f64) + 1.0, g64 = randn({N, D}, f64), w64 = randn({D}, f64), b64 = randn({D}, f64);
  auto grads = [&](DType dt, int threads) {
    set_num_threads(threads);
    Tensor x = x64.to(dt).requires_grad_(true), w = w64.to(dt).requires_grad_(true),
           b = b64.to(dt).requires_grad_(true);
    layer_norm(x, {D}, w, b, 1e-5).backward(g64.to(dt));
    return std::vector<Tensor>{w.grad(), b.grad(), x.grad()};
  };
  const std::vector<Tensor> one = grads(kFloat32, 1), two = grads(kFloat32, 2), ref = grads(kFloat64, 1);
  const char* what[] = {"dw", "db", "dx"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(test::values(two[i]), test::values(one[i])) << what[i];
    // dw and db add 2100 terms of about 1: float32 over blocks of 64, double across them
    EXPECT_TENSOR_NEAR(one[i], ref[i].shape(), test::values(ref[i]), 1e-3, 1e-4) << what[i];
  }
  set_num_threads(saved);
}

TEST(LayerNorm, BadInputsNameTheOp) {
  EXPECT_THROW_MSG(layer_norm(randn({2, 3}), {3}, tensor<int64_t>({1, 2, 3}), {}), DTypeError, "layer_norm", "weight");
  EXPECT_THROW_MSG(layer_norm(randn({2, 3}), {2, 3}, randn({3}), {}), ShapeError, "layer_norm", "[3]");
  EXPECT_THROW_MSG(layer_norm(randn({2, 3}), {3}, {}, {}, -1.0), ValueError, "layer_norm", "eps");
  // the raw backward checks what the autograd node would pass it
  EXPECT_THROW_MSG(
      raw::layer_norm_backward(randn({2, 3}), randn({2, 3}), 1, zeros({3}), ones({2}), {}, true, false, false),
      ShapeError, "layer_norm_backward", "mean");
  EXPECT_THROW_MSG(
      raw::layer_norm_backward(randn({2, 3}), randn({2, 3}), 3, zeros({2}), ones({2}), {}, true, false, false),
      ShapeError, "layer_norm_backward", "3 dims");
  // an integer input normalises in float32 (as Ember's other composite-style ops promote it)
  EXPECT_EQ(layer_norm(tensor<int64_t>({1, 2, 3, 5}, {2, 2}), {2}).dtype(), kFloat32);
}

// -------------------------------------------------------------------------------------------- RMSNorm

namespace {
// torch.nn.functional.rms_norm's formula in double: x / sqrt(mean(x^2) + eps) * w over rows of d values
std::vector<double> rms_reference(const std::vector<double>& x, const std::vector<double>& w, size_t d, double eps) {
  std::vector<double> y(x.size());
  for (size_t row = 0; row < x.size() / d; ++row) {
    double ms = 0;
    for (size_t k = 0; k < d; ++k) ms += x[row * d + k] * x[row * d + k] / static_cast<double>(d);
    for (size_t k = 0; k < d; ++k) y[row * d + k] = x[row * d + k] / std::sqrt(ms + eps) * (w.empty() ? 1.0 : w[k]);
  }
  return y;
}
}  // namespace

TEST(RMSNorm, NormalisesTheLastDim) {
  manual_seed(63);
  nn::RMSNorm norm(5);
  ASSERT_EQ(norm.named_parameters().size(), 1u);
  EXPECT_EQ(norm.named_parameters()[0].first, "weight");
  const std::vector<double> w = {1.0, 0.5, 2.0, -1.0, 0.25};
  assign(norm.named_parameters()[0].second, w);
  const Tensor x = randn({3, 4, 5}) * 3.0 + 1.0;
  // eps defaults to float32's machine epsilon, as PyTorch's
  EXPECT_TENSOR_NEAR(norm(x), Shape({3, 4, 5}), rms_reference(test::values(x), w, 5, 1.1920928955078125e-07), 1e-5,
                     1e-4);
  nn::RMSNorm plain(5, {.eps = 0.5, .elementwise_affine = false});
  EXPECT_TRUE(plain.named_parameters().empty());
  EXPECT_TENSOR_NEAR(plain(x), Shape({3, 4, 5}), rms_reference(test::values(x), {}, 5, 0.5), 1e-5, 1e-4);
  EXPECT_EQ(norm.repr(), "RMSNorm(5)");
  EXPECT_THROW_MSG(norm(zeros({3, 4})), ShapeError, "RMSNorm(5)", "[3, 4]");
}

TEST(RMSNorm, Gradcheck) {
  manual_seed(64);
  nn::RMSNorm norm(4, {.eps = 1e-3});
  norm.to(kFloat64);
  assign(norm.named_parameters()[0].second, {0.5, 1.5, -1.0, 2.0});
  const Tensor x = randn({3, 4}, f64), r = randn({3, 4}, f64);
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return norm(in[0]); }, {x}));
  EXPECT_TRUE(param_grads_match(norm, [&] { return sum(norm(x) * r); }));
  // (second derivatives: the rms_norm rows of tests/support/op_cases.h, in test_double_backward)
}

// The fused float32 kernels against float64 on rows far from 0, on enough rows to split across threads; forward
// and both gradients. A 16-bit input computes in float32 (an autocast "float32" op) and rounds once.
TEST(RMSNorm, Float32MatchesFloat64AndHalfRoundsOnce) {
  manual_seed(65);
  Tensor x64 = (randn({300, 96}, f64) * 0.5 + 100.0).to(kFloat32).to(kFloat64), w64 = randn({96}, f64);
  const Tensor g64 = randn({300, 96}, f64);
  auto run = [&](DType dt) {
    Tensor x = x64.to(dt).requires_grad_(true), w = w64.to(dt).requires_grad_(true);
    Tensor y = rms_norm(x, {96}, w, 1e-5);
    y.backward(g64.to(dt));
    return std::vector<Tensor>{y, x.grad(), w.grad()};
  };
  const std::vector<Tensor> f32 = run(kFloat32), f64r = run(kFloat64);
  const char* what[] = {"y", "dx", "dw"};
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TENSOR_NEAR(f32[i], f64r[i].shape(), test::values(f64r[i]), 2e-4, 2e-4) << what[i];
  const Tensor h = randn({4, 8}).to(kBFloat16);
  const Tensor yh = rms_norm(h, {8});
  EXPECT_EQ(yh.dtype(), kBFloat16);
  EXPECT_TENSOR_NEAR(yh.to(kFloat32), Shape({4, 8}), test::values(rms_norm(h.to(kFloat32), {8}).to(kBFloat16)), 0, 0);
}

TEST(RMSNorm, BadInputsNameTheOp) {
  EXPECT_THROW_MSG(rms_norm(randn({2, 3}), {3}, tensor<int64_t>({1, 2, 3})), DTypeError, "rms_norm", "weight");
  EXPECT_THROW_MSG(rms_norm(randn({2, 3}), {2, 3}, randn({3})), ShapeError, "rms_norm", "[3]");
  EXPECT_THROW_MSG(rms_norm(randn({2, 3}), {4}), ShapeError, "rms_norm", "normalized_shape");
  EXPECT_THROW_MSG(rms_norm(randn({2, 3}), {3}, {}, -1.0), ValueError, "rms_norm", "eps");
  EXPECT_THROW_MSG(rms_norm(Tensor(), {3}), Error, "rms_norm", "undefined");
  EXPECT_THROW_MSG(nn::RMSNorm(0), ValueError, "RMSNorm", "n");
  EXPECT_THROW_MSG(raw::row_norm_backward(RowNormKind::RmsNorm, randn({2, 3}), randn({2, 3}), 1, zeros({3}), ones({2}),
                                          {}, true, false, false),
                   ShapeError, "rms_norm_backward", "mean");
}

// -------------------------------------------------------------------------------------------- Embedding

TEST(Embedding, GathersRows) {
  manual_seed(70);
  nn::Embedding e(10, 4);
  EXPECT_EQ(e.weight().shape(), Shape({10, 4}));
  std::vector<int64_t> ids = {3, 0, 9, 3, 7, 1};
  Tensor idx = tensor<int64_t>(ids, {2, 3});
  Tensor y = e(idx);
  std::vector<double> w = test::values(e.weight()), ref;
  for (int64_t id : ids)
    for (int k = 0; k < 4; ++k) ref.push_back(w[static_cast<size_t>(id * 4 + k)]);
  EXPECT_TENSOR_NEAR(y, Shape({2, 3, 4}), ref, 0, 0);
  EXPECT_TENSOR_NEAR(e(tensor<int32_t>({9}, {1})), Shape({1, 4}), std::vector<double>(w.end() - 4, w.end()), 0, 0);
  EXPECT_THROW(e(tensor<int64_t>({10}, {1})), IndexError);
  EXPECT_THROW(e(tensor<int64_t>({-11}, {1})), IndexError);
  EXPECT_THROW_MSG(e(tensor<float>({1}, {1})), DTypeError, "Embedding");

  // Gradient: rows scatter-add (index 3 appears twice).
  sum(y).backward();
  std::vector<double> g = test::values(e.weight().grad()), gref(40, 0.0);
  for (int64_t id : ids)
    for (int k = 0; k < 4; ++k) gref[static_cast<size_t>(id * 4 + k)] += 1;
  EXPECT_EQ(g, gref);
}

// padding_idx as PyTorch's: the row starts at zero, its uses pass no gradient, a negative index counts from the end.
TEST(Embedding, PaddingIdxRowStartsAtZeroAndGetsNoGradient) {
  manual_seed(72);
  nn::Embedding e(6, 3, {.padding_idx = -1});  // row 5
  ASSERT_EQ(e.padding_idx(), 5);
  EXPECT_EQ(test::values(e.weight().select(0, 5)), std::vector<double>(3, 0.0));
  EXPECT_NE(test::values(e.weight().select(0, 4)), std::vector<double>(3, 0.0));
  {
    NoGradGuard g;
    e.weight().select(0, 5).fill_(2.5);  // a value set by hand is read as it is
  }
  Tensor idx = tensor<int64_t>({5, 1, 5, 2}, {2, 2});
  Tensor y = e(idx);
  EXPECT_EQ(test::values(y.select(0, 0).select(0, 0)), std::vector<double>(3, 2.5));
  sum(y * 3.0).backward();
  const std::vector<double> g = test::values(e.weight().grad());
  for (int64_t row = 0; row < 6; ++row)
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(g[static_cast<size_t>(row * 3 + k)], row == 1 || row == 2 ? 3.0 : 0.0) << "row " << row;
  EXPECT_EQ(e.repr(), "Embedding(6 => 3, padding_idx = 5)");
  EXPECT_THROW_MSG(nn::Embedding(6, 3, {.padding_idx = 6}), ValueError, "padding_idx 6", "num_embeddings");
  EXPECT_THROW_MSG(nn::Embedding(6, 3, {.padding_idx = -7}), ValueError, "padding_idx -7");
  // an index out of range names the layer and its size, not an internal op
  EXPECT_THROW_MSG(e(tensor<int64_t>({0, 6}, {2})), IndexError, "Embedding(6 => 3", "index 6",
                   "num_embeddings = 6");
}

TEST(Embedding, Gradcheck) {
  manual_seed(71);
  nn::Embedding e(6, 3);
  e.to(kFloat64);
  Tensor idx = tensor<int64_t>({5, 0, 2, 5}, {2, 2}), r = randn({2, 2, 3}, f64);
  EXPECT_TRUE(gradcheck_ok(
      [](const std::vector<Tensor>& in) {
        return index_select(in[0], 0, in[1].reshape({-1})).reshape({2, 2, 3});
      },
      {e.weight().detach(), idx}));
  EXPECT_TRUE(param_grads_match(e, [&] { return sum(e(idx) * r); }));
}

// ------------------------------------------------------------------------------------ a small model end to end

TEST(Layers, ConvNetGradcheck) {
  manual_seed(80);
  nn::Chain model{nn::Conv2d(1, 2, 3, {.padding = 1}),
                  nn::tanh,
                  nn::AvgPool2d(2),
                  nn::Flatten(),
                  nn::Dense(2 * 2 * 2, 3),
                  nn::LayerNorm(3)};
  model.to(kFloat64);
  Tensor x = randn({2, 1, 4, 4}, f64), r = randn({2, 3}, f64);
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return model(in[0]); }, {x}));
  EXPECT_TRUE(param_grads_match(model, [&] { return sum(model(x) * r); }));
}

// The functional batch_norm (ember::batch_norm, the fused op BatchNorm1d/2d run on) refuses bad arguments with
// messages that name the op and the shapes.
TEST(BatchNorm, FunctionalBadInputs) {
  Tensor x = randn({4, 3, 5}), w = ones({3}), b = zeros({3}), rm = zeros({3}), rv = ones({3});
  EXPECT_THROW_MSG(batch_norm(randn({4}), rm, rv), ShapeError, "batch_norm", "at least 2 dims", "[4]");
  EXPECT_THROW_MSG(batch_norm(x, rm, rv, ones({2})), ShapeError, "batch_norm", "weight", "[3]", "[2]");
  EXPECT_THROW_MSG(batch_norm(x, zeros({3, 1}), rv), ShapeError, "running_mean", "[3, 1]");
  EXPECT_THROW_MSG(batch_norm(x, {}, {}, w, b, /*training=*/false), ValueError, "batch_norm", "running statistics");
  EXPECT_THROW_MSG(batch_norm(x, rm, {}), ValueError, "running_mean and running_var");
  EXPECT_THROW_MSG(batch_norm(x.to(kInt64), rm, rv), DTypeError, "batch_norm", "int64");
  EXPECT_THROW_MSG(batch_norm(x, rm, rv, w, b, true, 1.5), ValueError, "momentum");
  EXPECT_THROW_MSG(batch_norm(randn({1, 3}), rm, rv), ValueError, "more than one value per channel");
  // what the module's buffers see: training moves them, evaluation does not
  batch_norm(x, rm, rv, w, b, true, 0.1);
  const std::vector<double> moved = test::values(rm);
  batch_norm(x, rm, rv, w, b, false, 0.1);
  EXPECT_EQ(test::values(rm), moved);
  EXPECT_NE(moved, std::vector<double>(3, 0.0));
}

// float16 and bfloat16 inputs are normalised in float32 and come back in their own dtype.
TEST(BatchNorm, HalfInputsComputeInFloat) {
  manual_seed(53);
  Tensor x = randn({8, 3, 4}) * 3.0 + 1.0;
  Tensor ref = batch_norm(x, {}, {}, {}, {}, true);
  for (DType dt : {kFloat16, kBFloat16}) {
    Tensor y = batch_norm(x.to(dt), {}, {}, {}, {}, true);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_TENSOR_NEAR(y.to(kFloat32), ref.shape(), test::values(ref), 3e-2, 2e-2) << name(dt);
  }
}
