// The losses against float64 references computed here (huge logits included), their gradchecks, the
// agreement of cross_entropy with logitcrossentropy(onehotbatch), onehotbatch, the errors (naming the loss
// and the shapes) and clip_grad_norm_.
#include <cmath>

#include "test_util.h"

using namespace ember;

namespace {

const TensorOptions f64{.dtype = kFloat64};

// mean over rows of -sum_c t[i][c] * log_softmax(z[i])[c], computed stably in float64.
double soft_ce_ref(const std::vector<double>& z, const std::vector<double>& t, int64_t n, int64_t c) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    double m = -INFINITY;
    for (int64_t k = 0; k < c; ++k) m = std::max(m, z[i * c + k]);
    double s = 0;
    for (int64_t k = 0; k < c; ++k) s += std::exp(z[i * c + k] - m);
    const double lse = m + std::log(s);
    for (int64_t k = 0; k < c; ++k) total -= t[i * c + k] * (z[i * c + k] - lse);
  }
  return total / static_cast<double>(n);
}
std::vector<double> onehot_ref(const std::vector<int64_t>& labels, int64_t c) {
  std::vector<double> t(labels.size() * static_cast<size_t>(c), 0.0);
  for (size_t i = 0; i < labels.size(); ++i) t[i * c + labels[i]] = 1;
  return t;
}
// Gradient of soft_ce_ref w.r.t. z: (softmax(z) * sum(t) - t) / n.
std::vector<double> soft_ce_grad_ref(const std::vector<double>& z, const std::vector<double>& t, int64_t n, int64_t c) {
  std::vector<double> g(z.size());
  for (int64_t i = 0; i < n; ++i) {
    double m = -INFINITY, s = 0, ts = 0;
    for (int64_t k = 0; k < c; ++k) m = std::max(m, z[i * c + k]);
    for (int64_t k = 0; k < c; ++k) s += std::exp(z[i * c + k] - m);
    for (int64_t k = 0; k < c; ++k) ts += t[i * c + k];
    for (int64_t k = 0; k < c; ++k)
      g[i * c + k] = (std::exp(z[i * c + k] - m) / s * ts - t[i * c + k]) / static_cast<double>(n);
  }
  return g;
}
double bce_ref(const std::vector<double>& x, const std::vector<double>& t) {
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += std::max(x[i], 0.0) - x[i] * t[i] + std::log1p(std::exp(-std::fabs(x[i])));
  return s / static_cast<double>(x.size());
}

::testing::AssertionResult gradcheck_ok(const autograd::TensorFn& fn, const std::vector<Tensor>& in) {
  autograd::GradcheckResult r = autograd::gradcheck_report(fn, in);
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.report;
}

}  // namespace

// --------------------------------------------------------------------------------------------- values

TEST(Losses, CrossEntropyValue) {
  manual_seed(1);
  Tensor z = randn({6, 5}) * 3.0;
  std::vector<int64_t> labels = {0, 4, 2, 2, 1, 3};
  Tensor y = tensor<int64_t>(labels, {6});
  Tensor loss = nn::cross_entropy(z, y);
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_EQ(loss.dtype(), kFloat32);
  EXPECT_NEAR(loss.item(), soft_ce_ref(test::values(z), onehot_ref(labels, 5), 6, 5), 1e-5);
  // int32 targets work too.
  EXPECT_NEAR(nn::cross_entropy(z, tensor<int32_t>({0, 4, 2, 2, 1, 3}, {6})).item(), loss.item(), 1e-7);
  // float64 logits give a float64 loss.
  Tensor z64 = z.to(kFloat64);
  Tensor l64 = nn::cross_entropy(z64, y);
  EXPECT_EQ(l64.dtype(), kFloat64);
  EXPECT_NEAR(l64.item(), soft_ce_ref(test::values(z64), onehot_ref(labels, 5), 6, 5), 1e-12);
}

TEST(Losses, HugeLogitsStayFinite) {
  std::vector<double> zv = {1000, -1000, 0, -1000, 1000, 999, -1000, -1000, -1000};
  std::vector<int64_t> labels = {1, 2, 0};
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor z = tensor(zv, {3, 3}, {.dtype = dt}).requires_grad_();
    Tensor loss = nn::cross_entropy(z, tensor<int64_t>(labels, {3}));
    const double ref = soft_ce_ref(zv, onehot_ref(labels, 3), 3, 3);  // (2000 + (1 + log1p(e^-1)) + log 3) / 3
    EXPECT_TRUE(std::isfinite(loss.item()));
    EXPECT_NEAR(loss.item(), ref, 1e-4 * ref);
    loss.backward();
    std::vector<double> g = test::values(z.grad());
    for (double v : g) EXPECT_TRUE(std::isfinite(v));
    EXPECT_TENSOR_NEAR(z.grad(), Shape({3, 3}), soft_ce_grad_ref(zv, onehot_ref(labels, 3), 3, 3), 1e-6, 1e-4);
  }
  // binary_cross_entropy_with_logits at +-1000: 0, 1000, 1000, 0.
  std::vector<double> xv = {1000, -1000, 1000, -1000}, tv = {1, 1, 0, 0};
  Tensor x = tensor(xv, {4}, {.dtype = kFloat32}).requires_grad_();
  Tensor l = nn::binary_cross_entropy_with_logits(x, tensor(tv, {4}, {.dtype = kFloat32}));
  EXPECT_NEAR(l.item(), bce_ref(xv, tv), 1e-3);
  EXPECT_NEAR(l.item(), 500.0, 1e-3);
  l.backward();
  EXPECT_TENSOR_NEAR(x.grad(), Shape({4}), (std::vector<double>{0, -0.25, 0.25, 0}), 1e-7);
}

TEST(Losses, LogitCrossEntropySoftTargets) {
  manual_seed(2);
  Tensor z = randn({4, 3});
  Tensor t = softmax(randn({4, 3}), 1);  // rows of probabilities
  EXPECT_NEAR(nn::logitcrossentropy(z, t).item(), soft_ce_ref(test::values(z), test::values(t), 4, 3), 1e-5);
  // Rows that do not sum to 1 are taken as they are (the gradient has the sum(t) term).
  Tensor t2 = rand({4, 3});
  Tensor zg = z.detach().requires_grad_();
  nn::logitcrossentropy(zg, t2).backward();
  EXPECT_TENSOR_NEAR(zg.grad(), Shape({4, 3}), soft_ce_grad_ref(test::values(z), test::values(t2), 4, 3), 1e-6, 1e-4);
}

TEST(Losses, CrossEntropyEqualsLogitCrossEntropyOfOneHot) {
  manual_seed(3);
  Tensor y = randint(0, 7, {10});
  Tensor z1 = randn({10, 7}, f64).requires_grad_();
  Tensor z2 = z1.detach().clone().requires_grad_();
  Tensor a = nn::cross_entropy(z1, y), b = nn::logitcrossentropy(z2, nn::onehotbatch(y, 7));
  EXPECT_NEAR(a.item(), b.item(), 1e-12);
  a.backward();
  b.backward();
  EXPECT_TENSOR_NEAR(z1.grad(), Shape({10, 7}), test::values(z2.grad()), 1e-14);
}

TEST(Losses, MseValue) {
  manual_seed(4);
  Tensor p = randn({3, 4}), t = randn({3, 4});
  std::vector<double> pv = test::values(p), tv = test::values(t);
  double ref = 0;
  for (size_t i = 0; i < pv.size(); ++i) ref += (pv[i] - tv[i]) * (pv[i] - tv[i]) / 12;
  EXPECT_NEAR(nn::mse_loss(p, t).item(), ref, 1e-6);
  EXPECT_EQ(nn::mse_loss(p, t).dim(), 0);
}

TEST(Losses, BceWithLogitsValue) {
  manual_seed(5);
  Tensor x = randn({5, 2}) * 4.0, t = rand({5, 2});
  EXPECT_NEAR(nn::binary_cross_entropy_with_logits(x, t).item(), bce_ref(test::values(x), test::values(t)), 1e-6);
  // Integer or bool 0/1 targets are accepted (cast to the logits' dtype).
  Tensor tb = gt(rand({5, 2}), 0.5);
  EXPECT_NEAR(nn::binary_cross_entropy_with_logits(x, tb).item(), bce_ref(test::values(x), test::values(tb)), 1e-6);
}

// ----------------------------------------------------------------------------------------- gradchecks

TEST(Losses, Gradchecks) {
  manual_seed(6);
  Tensor z = randn({4, 5}, f64);
  Tensor y = tensor<int64_t>({1, 0, 4, 4}, {4});
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return nn::cross_entropy(in[0], y); }, {z}));
  Tensor soft = rand({4, 5}, f64);
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return nn::logitcrossentropy(in[0], soft); }, {z}));
  // The gradient reaches soft targets too (as in PyTorch), e.g. a distillation target that is trained.
  EXPECT_TRUE(
      gradcheck_ok([](const std::vector<Tensor>& in) { return nn::logitcrossentropy(in[0], in[1]); }, {z, soft}));
  Tensor p = randn({3, 4}, f64), t = randn({3, 4}, f64);
  EXPECT_TRUE(gradcheck_ok([](const std::vector<Tensor>& in) { return nn::mse_loss(in[0], in[1]); }, {p, t}));
  Tensor x = randn({3, 4}, f64) * 3.0, tb = rand({3, 4}, f64);
  EXPECT_TRUE(gradcheck_ok(
      [&](const std::vector<Tensor>& in) { return nn::binary_cross_entropy_with_logits(in[0], tb); }, {x}));
  EXPECT_TRUE(gradcheck_ok(
      [](const std::vector<Tensor>& in) { return nn::binary_cross_entropy_with_logits(in[0], in[1]); }, {x, tb}));
  // Through a chain of ops (the loss node's incoming gradient is not 1).
  EXPECT_TRUE(
      gradcheck_ok([&](const std::vector<Tensor>& in) { return nn::cross_entropy(in[0] * 2.0, y) * 3.0; }, {z}));
}

TEST(Losses, TargetsWithoutGradGetNone) {
  Tensor z = randn({2, 3}).requires_grad_();
  Tensor t = softmax(randn({2, 3}), 1);
  nn::logitcrossentropy(z, t).backward();
  EXPECT_TRUE(z.grad().defined());
  EXPECT_FALSE(t.requires_grad());
  // Only the targets require grad.
  Tensor zc = randn({2, 3});
  Tensor tc = t.detach().clone().requires_grad_();
  nn::logitcrossentropy(zc, tc).backward();
  EXPECT_TRUE(tc.grad().defined());
  std::vector<double> zv = test::values(zc), g = test::values(tc.grad());
  for (int i = 0; i < 2; ++i) {
    double m = std::max({zv[i * 3], zv[i * 3 + 1], zv[i * 3 + 2]}), s = 0;
    for (int k = 0; k < 3; ++k) s += std::exp(zv[i * 3 + k] - m);
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(g[i * 3 + k], -(zv[i * 3 + k] - m - std::log(s)) / 2, 1e-6);
  }
}

// --------------------------------------------------------------------------------------- onehotbatch

TEST(OneHotBatch, Values) {
  std::vector<int64_t> labels = {2, 0, 4, 4, 1};
  Tensor oh = nn::onehotbatch(tensor<int64_t>(labels, {5}), 5);
  EXPECT_EQ(oh.dtype(), kFloat32);
  EXPECT_TENSOR_NEAR(oh, Shape({5, 5}), onehot_ref(labels, 5), 0, 0);
  EXPECT_TENSOR_NEAR(nn::onehotbatch(tensor<int32_t>({1, 0}, {2}), 3), Shape({2, 3}), onehot_ref({1, 0}, 3), 0, 0);
  EXPECT_EQ(nn::onehotbatch(zeros({0}, {.dtype = kInt64}), 3).shape(), Shape({0, 3}));
}

TEST(OneHotBatch, Errors) {
  EXPECT_THROW_MSG(nn::onehotbatch(tensor<int64_t>({0, 5}, {2}), 5), IndexError, "onehotbatch", "[0, 5)", "5");
  EXPECT_THROW_MSG(nn::onehotbatch(tensor<int64_t>({-1, 2}, {2}), 5), IndexError, "onehotbatch", "-1");
  EXPECT_THROW_MSG(nn::onehotbatch(tensor<float>({0, 1}, {2}), 5), DTypeError, "onehotbatch", "integers", "float32");
  EXPECT_THROW_MSG(nn::onehotbatch(tensor<int64_t>({0, 1}, {1, 2}), 5), ShapeError, "onehotbatch", "[1, 2]");
  EXPECT_THROW_MSG(nn::onehotbatch(tensor<int64_t>({0}, {1}), 0), ValueError, "num_classes");
}

// -------------------------------------------------------------------------------------------- errors

TEST(Losses, Errors) {
  Tensor z = randn({4, 3});
  // cross_entropy
  EXPECT_THROW_MSG(nn::cross_entropy(z, tensor<int64_t>({0, 1, 2}, {3})), ShapeError, "cross_entropy", "[4, 3]", "[3]");
  EXPECT_THROW_MSG(nn::cross_entropy(z, zeros({4})), DTypeError, "cross_entropy", "float32", "logitcrossentropy");
  EXPECT_THROW_MSG(nn::cross_entropy(z, tensor<int64_t>({0, 1, 3, 0}, {4})), IndexError, "cross_entropy", "[0, 3)",
                   "[4, 3]");
  EXPECT_THROW_MSG(nn::cross_entropy(z, tensor<int64_t>({0, -1, 2, 0}, {4})), IndexError, "cross_entropy");
  EXPECT_THROW_MSG(nn::cross_entropy(randn({4}), tensor<int64_t>({0}, {1})), ShapeError, "cross_entropy", "[4]");
  EXPECT_THROW_MSG(nn::cross_entropy(zeros({4, 3}, {.dtype = kInt64}), tensor<int64_t>({0, 0, 0, 0}, {4})), DTypeError,
                   "cross_entropy", "int64");
  // logitcrossentropy
  EXPECT_THROW_MSG(nn::logitcrossentropy(z, zeros({4, 2})), ShapeError, "logitcrossentropy", "[4, 3]", "[4, 2]");
  EXPECT_THROW_MSG(nn::logitcrossentropy(zeros({4, 3}, {.dtype = kInt32}), zeros({4, 3})), DTypeError,
                   "logitcrossentropy", "int32");
  // mse_loss
  EXPECT_THROW_MSG(nn::mse_loss(z, zeros({3, 4})), ShapeError, "mse_loss", "[4, 3]", "[3, 4]");
  EXPECT_THROW_MSG(nn::mse_loss(zeros({2}, {.dtype = kInt64}), zeros({2}, {.dtype = kInt64})), DTypeError, "mse_loss",
                   "int64");
  // binary_cross_entropy_with_logits
  EXPECT_THROW_MSG(nn::binary_cross_entropy_with_logits(z, zeros({4})), ShapeError, "binary_cross_entropy_with_logits",
                   "[4, 3]", "[4]");
  EXPECT_THROW_MSG(nn::binary_cross_entropy_with_logits(zeros({4}, {.dtype = kInt64}), zeros({4})), DTypeError,
                   "binary_cross_entropy_with_logits", "int64");
  // Undefined arguments.
  EXPECT_THROW(nn::cross_entropy(Tensor(), tensor<int64_t>({0}, {1})), Error);
  EXPECT_THROW(nn::mse_loss(z, Tensor()), Error);
}

TEST(Losses, DeviceMismatch) {
  EMBER_SKIP_IF_NO_CUDA();
  Tensor z = randn({4, 3});
  Tensor zc = z.cuda();
  EXPECT_THROW_MSG(nn::cross_entropy(zc, tensor<int64_t>({0, 1, 2, 0}, {4})), DeviceError, "cross_entropy", "cuda:0",
                   "cpu");
  EXPECT_THROW_MSG(nn::logitcrossentropy(zc, z), DeviceError, "logitcrossentropy", "cuda:0", "cpu");
  EXPECT_THROW_MSG(nn::mse_loss(zc, z), DeviceError, "mse_loss", "cuda:0", "cpu");
  EXPECT_THROW_MSG(nn::binary_cross_entropy_with_logits(zc, z), DeviceError, "binary_cross_entropy_with_logits",
                   "cuda:0", "cpu");
  // On the GPU itself the values agree with the CPU.
  Tensor y = tensor<int64_t>({0, 1, 2, 0}, {4});
  EXPECT_NEAR(nn::cross_entropy(zc, y.cuda()).cpu().item(), nn::cross_entropy(z, y).item(), 1e-5);
}

// ------------------------------------------------------------------------------------- clip_grad_norm_

TEST(ClipGradNorm, ScalesToMaxNorm) {
  manual_seed(7);
  Tensor a = randn({3, 4}).requires_grad_(), b = randn({5}).requires_grad_(), c = randn({2}).requires_grad_();
  a.set_grad(randn({3, 4}) * 3.0);
  b.set_grad(randn({5}));
  // c has no gradient: skipped.
  std::vector<double> ga = test::values(a.grad()), gb = test::values(b.grad());
  double sq = 0;
  for (double v : ga) sq += v * v;
  for (double v : gb) sq += v * v;
  const double norm = std::sqrt(sq);

  // Above the norm: unchanged.
  EXPECT_NEAR(nn::clip_grad_norm_({a, b, c}, norm * 2), norm, 1e-5 * norm);
  EXPECT_EQ(test::values(a.grad()), ga);
  EXPECT_EQ(test::values(b.grad()), gb);
  EXPECT_FALSE(c.grad().defined());

  // Below: every gradient scaled by the same factor so the new norm is max_norm.
  const double max_norm = norm / 4;
  EXPECT_NEAR(nn::clip_grad_norm_({a, b, c}, max_norm), norm, 1e-5 * norm);
  std::vector<double> na = test::values(a.grad()), nb = test::values(b.grad());
  double nsq = 0;
  for (double v : na) nsq += v * v;
  for (double v : nb) nsq += v * v;
  EXPECT_NEAR(std::sqrt(nsq), max_norm, 1e-5 * max_norm);
  for (size_t i = 0; i < ga.size(); ++i) EXPECT_NEAR(na[i], ga[i] / 4, 1e-5 * std::fabs(ga[i]) + 1e-7);
  for (size_t i = 0; i < gb.size(); ++i) EXPECT_NEAR(nb[i], gb[i] / 4, 1e-5 * std::fabs(gb[i]) + 1e-7);
  // Returns the norm before clipping: now max_norm.
  EXPECT_NEAR(nn::clip_grad_norm_({a, b}, max_norm), max_norm, 1e-5 * max_norm);

  EXPECT_EQ(nn::clip_grad_norm_({c}, 1.0), 0.0);  // no gradients at all
  EXPECT_THROW(nn::clip_grad_norm_({a}, -1.0), ValueError);
}

TEST(ClipGradNorm, WorksOnAModel) {
  manual_seed(8);
  nn::Chain m{nn::Dense(4, 8, nn::relu), nn::Dense(8, 2)};
  nn::cross_entropy(m(randn({16, 4}) * 10.0), randint(0, 2, {16})).backward();
  double sq = 0;
  for (const Tensor& p : m.parameters())
    for (double v : test::values(p.grad())) sq += v * v;
  const double before = nn::clip_grad_norm_(m.parameters(), 0.01);
  EXPECT_NEAR(before, std::sqrt(sq), 1e-5 * std::sqrt(sq));
  double after = 0;
  for (const Tensor& p : m.parameters())
    for (double v : test::values(p.grad())) after += v * v;
  EXPECT_NEAR(std::sqrt(after), std::min(0.01, before), 1e-6);
}

// The mean over an empty batch is nan, as PyTorch's (0 / 0), not 0 or -0; the sum is 0. The backward gives empty
// gradients.
TEST(Losses, AnEmptyBatchGivesNan) {
  Tensor z = zeros({0, 5}).requires_grad_();
  const Tensor y = zeros({0}, {.dtype = kInt64});
  Tensor ce = nn::cross_entropy(z, y);
  EXPECT_TRUE(std::isnan(ce.item<float>())) << ce.item<float>();
  ce.backward();
  EXPECT_EQ(z.grad().shape(), Shape({0, 5}));
  EXPECT_TRUE(std::isnan(nn::logitcrossentropy(zeros({0, 5}), zeros({0, 5})).item<float>()));
  EXPECT_TRUE(std::isnan(nn::binary_cross_entropy_with_logits(zeros({0}), zeros({0})).item<float>()));
  EXPECT_TRUE(std::isnan(nn::mse_loss(zeros({0}), zeros({0})).item<float>()));
  EXPECT_TRUE(std::isnan(nn::cross_entropy(zeros({0, 5}), y, nn::CrossEntropyOptions{}).item<float>()));
  EXPECT_EQ(nn::cross_entropy(zeros({0, 5}), y, {.reduction = nn::Reduction::Sum}).item<float>(), 0.0f);
}

// ------------------------------------------------------------------ cross_entropy's fused kernels (class indices)

namespace {
// Logits [n, c] (float64) with a -inf entry away from the target in row 0 and large values in row 1, and targets.
std::pair<Tensor, Tensor> awkward_logits(int64_t n, int64_t c, uint64_t seed) {
  manual_seed(seed);
  Tensor z = randn({n, c}, f64) * 3.0;
  z.select(0, 0).slice(0, 1, 2).fill_(-INFINITY);
  z.select(0, 1).mul_(400.0);
  Tensor y = randint(0, c, {n}, {.dtype = kInt64});
  y.select(0, 0).fill_(0);
  return {z, y};
}
// mean over rows of lse(z[i]) - z[i][t_i] in float64 (the soft form's 0 * -inf would be NaN for a -inf logit).
double class_ce_ref(const std::vector<double>& z, const std::vector<int64_t>& labels, int64_t c) {
  const int64_t n = static_cast<int64_t>(labels.size());
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    double m = -INFINITY, s = 0;
    for (int64_t k = 0; k < c; ++k) m = std::max(m, z[i * c + k]);
    for (int64_t k = 0; k < c; ++k) s += std::exp(z[i * c + k] - m);
    total += m + std::log(s) - z[i * c + labels[i]];
  }
  return total / static_cast<double>(n);
}
std::vector<int64_t> labels_of(const Tensor& y) {
  std::vector<int64_t> v;
  for (double d : test::values(y)) v.push_back(static_cast<int64_t>(d));
  return v;
}
}  // namespace

// The fused forward and backward against the float64 references above, with 1,001 classes (vector loops and their
// tails), a -inf entry and logits in the thousands.
TEST(Losses, CrossEntropyFusedMatchesTheReferenceInFloat64) {
  const int64_t n = 37, c = 1001;
  auto [z0, y] = awkward_logits(n, c, 11);
  const std::vector<double> zv = test::values(z0), t = onehot_ref(labels_of(y), c);
  Tensor z = z0.clone().requires_grad_();
  Tensor loss = nn::cross_entropy(z, y);
  EXPECT_EQ(loss.dtype(), kFloat64);
  const double ref = class_ce_ref(zv, labels_of(y), c);
  EXPECT_NEAR(loss.item(), ref, 1e-12 * std::fabs(ref));
  (loss * 3.0).backward();
  std::vector<double> g = soft_ce_grad_ref(zv, t, n, c);
  for (double& v : g) v *= 3.0;
  EXPECT_TENSOR_NEAR(z.grad(), z.shape(), g, 1e-15, 1e-11);
}

// 16-bit logits are read as they are: the loss is float32 under autocast (PyTorch's rule for losses) and of the
// logits' dtype without it, the gradient of the logits' dtype; each equals the float64 reference of the same values
// to float32's precision (the loss) or one rounding to the 16-bit type (the gradient).
TEST(Losses, CrossEntropyOf16BitLogits) {
  const int64_t n = 19, c = 517;
  for (DType dt : {kBFloat16, kFloat16}) {
    for (bool autocast : {false, true}) {
      auto [z0, y] = awkward_logits(n, c, 12);
      Tensor z = z0.to(dt).requires_grad_();
      const std::vector<double> zv = test::values(z), t = onehot_ref(labels_of(y), c);
      Tensor loss;
      {
        amp::AutocastGuard ac(dt, autocast);
        loss = nn::cross_entropy(z, y);
      }
      const double ref = class_ce_ref(zv, labels_of(y), c);
      EXPECT_EQ(loss.dtype(), autocast ? kFloat32 : dt) << dt;
      EXPECT_NEAR(loss.to(kFloat64).item(), ref, (autocast ? 1e-6 : 1e-2) * std::fabs(ref)) << dt << autocast;
      loss.backward();
      ASSERT_EQ(z.grad().dtype(), dt);
      const std::vector<double> g = soft_ce_grad_ref(zv, t, n, c);
      const std::vector<double> got = test::values(z.grad());
      // one unit in the last place, relative; float16's subnormals below 2^-14 are 2^-24 apart
      const double eps = dt == kBFloat16 ? 1.0 / 128 : 1.0 / 1024, floor = dt == kFloat16 ? 0x1p-24 : 1e-30;
      for (size_t i = 0; i < g.size(); ++i)
        ASSERT_NEAR(got[i], g[i], eps * std::fabs(g[i]) + floor) << dt << " autocast " << autocast << " at " << i;
    }
  }
}

// No copy of the logits in float32 and no N x C temporaries: under bf16 autocast a training step's loss over
// [N, C] bf16 logits plans at the logits, their gradient and O(N) more — a float32 copy alone would add 4 N C bytes.
TEST(Losses, CrossEntropyUnderAutocastMakesNoFloat32Copy) {
  const int64_t n = 256, c = 4000;
  const memory::Plan p = memory::plan(Device::cpu(), [&] {
    Tensor z = randn({n, c}, {.dtype = kBFloat16}).requires_grad_();
    const Tensor y = randint(0, c, {n}, {.dtype = kInt64});
    Tensor loss;
    {
      amp::AutocastGuard ac(kBFloat16);
      loss = nn::cross_entropy(z, y);
    }
    loss.backward();
  });
  const size_t logits = memory::allocated_size(Device::cpu(), static_cast<size_t>(n * c) * 2);  // its size class
  EXPECT_LE(p.peak_bytes, 2 * logits + (size_t{64} << 10)) << p.to_string();
  EXPECT_GE(p.peak_bytes, 2 * logits) << p.to_string();
}

// A NaN logit makes its row's loss NaN (softmax's rule), and so the mean; an all -inf row too.
TEST(Losses, CrossEntropyNanAndAllMinusInfRows) {
  Tensor z = randn({3, 4});
  z.select(0, 1).select(0, 2).fill_(NAN);
  EXPECT_TRUE(std::isnan(nn::cross_entropy(z, tensor<int64_t>({0, 0, 0}, {3})).item<float>()));
  Tensor w = randn({2, 3});
  w.select(0, 0).fill_(-INFINITY);
  EXPECT_TRUE(std::isnan(nn::cross_entropy(w, tensor<int64_t>({1, 1}, {2})).item<float>()));
  // a target whose logit is -inf among finite ones: an infinite loss, as PyTorch's
  Tensor v = zeros({1, 3});
  v.select(0, 0).select(0, 2).fill_(-INFINITY);
  EXPECT_EQ(nn::cross_entropy(v, tensor<int64_t>({2}, {1})).item<float>(), INFINITY);
}
