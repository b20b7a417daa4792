// Tests optim::SGD against torch.optim.SGD's published update rule, written out here in float64: plain,
// momentum, dampening, nesterov, weight decay, float32 params, strided params, skipped params, zero_grad,
// state_dict round trip, option errors and XOR convergence.
#include "optim_test_util.h"

namespace ember::test {
namespace {

// torch.optim.SGD, one parameter, float64.
struct SgdRef {
  optim::SGDOptions o;
  std::vector<double> buf;
  void step(std::vector<double>& p, std::vector<double> g) {
    for (size_t i = 0; i < p.size(); ++i) g[i] += o.weight_decay * p[i];
    if (o.momentum != 0) {
      if (buf.empty()) {
        buf = g;
      } else {
        for (size_t i = 0; i < p.size(); ++i) buf[i] = o.momentum * buf[i] + (1 - o.dampening) * g[i];
      }
      for (size_t i = 0; i < p.size(); ++i) g[i] = o.nesterov ? g[i] + o.momentum * buf[i] : buf[i];
    }
    for (size_t i = 0; i < p.size(); ++i) p[i] -= o.lr * g[i];
  }
};

const std::vector<double> kInit0 = {0.5, -1.25, 2.0, 0.75, -0.5, 1.5};
const std::vector<double> kInit1 = {1.0, -2.0, 0.25, 3.0};

// Five steps on two parameters ([2, 3] and [4]), checked after every step.
void check_sgd(const optim::SGDOptions& o, DType dt, double tol) {
  Tensor p0 = make_param(kInit0, {2, 3}, dt), p1 = make_param(kInit1, {4}, dt);
  optim::SGD opt({p0, p1}, o);
  std::vector<double> r0 = kInit0, r1 = kInit1;
  SgdRef ref0{o}, ref1{o};
  for (int k = 0; k < 5; ++k) {
    auto g0 = fixed_grad(0, k, r0.size()), g1 = fixed_grad(1, k, r1.size());
    feed_grad(p0, g0);
    feed_grad(p1, g1);
    opt.step();
    ref0.step(r0, g0);
    ref1.step(r1, g1);
    EXPECT_TENSOR_NEAR(p0, Shape({2, 3}), r0, tol, tol) << "step " << k;
    EXPECT_TENSOR_NEAR(p1, Shape({4}), r1, tol, tol) << "step " << k;
  }
}

TEST(SGD, Plain) { check_sgd({.lr = 0.1}, kFloat64, 1e-12); }
TEST(SGD, Momentum) { check_sgd({.lr = 0.05, .momentum = 0.9}, kFloat64, 1e-12); }
TEST(SGD, Dampening) { check_sgd({.lr = 0.05, .momentum = 0.8, .dampening = 0.3}, kFloat64, 1e-12); }
TEST(SGD, Nesterov) { check_sgd({.lr = 0.05, .momentum = 0.9, .nesterov = true}, kFloat64, 1e-12); }
TEST(SGD, WeightDecay) { check_sgd({.lr = 0.1, .weight_decay = 0.01}, kFloat64, 1e-12); }
TEST(SGD, EverythingAtOnce) {
  check_sgd({.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.1}, kFloat64, 1e-12);
  check_sgd({.lr = 0.05, .momentum = 0.7, .weight_decay = 0.1, .dampening = 0.5}, kFloat64, 1e-12);
}
TEST(SGD, Float32) { check_sgd({.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01}, kFloat32, 1e-5); }

// Long enough for the fused kernel's blocks, its look-ahead and a split across threads (100,003 elements: a ragged
// last block), with and without momentum.
TEST(SGD, LargeParameter) {
  for (const double momentum : {0.0, 0.9}) {
    const optim::SGDOptions o{.lr = 0.05, .momentum = momentum, .weight_decay = 0.01};
    const size_t n = 100003;
    std::vector<double> r(n);
    for (size_t i = 0; i < n; ++i) r[i] = std::sin(0.001 * static_cast<double>(i));
    Tensor p = make_param(r, {static_cast<int64_t>(n)});
    optim::SGD opt({p}, o);
    SgdRef ref{o};
    for (int k = 0; k < 3; ++k) {
      const auto g = fixed_grad(0, k, n);
      feed_grad(p, g);
      opt.step();
      ref.step(r, g);
    }
    EXPECT_TENSOR_NEAR(p, Shape({static_cast<int64_t>(n)}), r, 1e-12, 1e-12) << "momentum " << momentum;
  }
}

TEST(SGD, LearningRateChangesTakeEffect) {
  Tensor p = make_param({1.0, 2.0}, {2});
  optim::SGD opt({p}, {.lr = 0.1});
  EXPECT_EQ(opt.lr(), 0.1);
  opt.set_lr(0.5);
  EXPECT_EQ(opt.lr(), 0.5);
  feed_grad(p, {1.0, -1.0});
  opt.step();
  EXPECT_TENSOR_NEAR(p, Shape({2}), (std::vector<double>{0.5, 2.5}), 0, 0);
}

TEST(SGD, SkipsParamsWithoutGradOrRequiresGrad) {
  Tensor a = make_param({1.0, 2.0}, {2}), b = make_param({3.0}, {1});
  Tensor c = tensor<double>({4.0, 5.0}, {2});  // does not require grad, yet has a stale grad
  c.set_grad(tensor<double>({1.0, 1.0}, {2}));
  optim::SGD opt({a, b, c}, {.lr = 1.0, .momentum = 0.5});
  feed_grad(a, {1.0, 1.0});
  opt.step();
  EXPECT_TENSOR_NEAR(a, Shape({2}), (std::vector<double>{0.0, 1.0}), 0, 0);
  EXPECT_TENSOR_NEAR(b, Shape({1}), (std::vector<double>{3.0}), 0, 0);
  EXPECT_TENSOR_NEAR(c, Shape({2}), (std::vector<double>{4.0, 5.0}), 0, 0);
  optim::StateDict sd = opt.state_dict();  // only parameter 0 has a momentum buffer
  ASSERT_EQ(sd.size(), 2u);
  EXPECT_EQ(sd[0].first, "param_groups.lr");
  EXPECT_EQ(sd[1].first, "state.0.momentum_buffer");
}

TEST(SGD, ZeroGradClearsGrads) {
  Tensor a = make_param({1.0, 2.0}, {2});
  optim::SGD opt({a}, {.lr = 1.0});
  feed_grad(a, {1.0, 1.0});
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  opt.step();  // nothing to do
  EXPECT_TENSOR_NEAR(a, Shape({2}), (std::vector<double>{1.0, 2.0}), 0, 0);
}

TEST(SGD, StepBumpsVersionAndWorksWithBackward) {
  Tensor w = make_param({1.0, -1.0}, {2});
  optim::SGD opt({w}, {.lr = 0.25});
  sum(w * w).backward();  // grad = 2w
  const uint32_t v = w.version();
  opt.step();
  EXPECT_GT(w.version(), v);
  EXPECT_TENSOR_NEAR(w, Shape({2}), (std::vector<double>{0.5, -0.5}), 1e-15, 0);
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.requires_grad());
}

// A strided (transposed) leaf and a strided grad: updated through a contiguous copy, written back in place.
TEST(SGD, StridedParamAndGrad) {
  Tensor base = tensor<double>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor p = base.t().detach();  // [2, 3], shares base's storage
  p.requires_grad_();
  ASSERT_FALSE(p.is_contiguous());
  Tensor g = tensor<double>({10, 20, 30, 40, 50, 60}, {3, 2}).t();  // [2, 3], strided
  p.set_grad(g);
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  opt.step();
  opt.step();  // buf = g, then 1.9 g: p -= 0.1 * 2.9 g
  const std::vector<double> want_p = {1 - 2.9, 3 - 8.7, 5 - 14.5, 2 - 5.8, 4 - 11.6, 6 - 17.4};
  const std::vector<double> want_base = {1 - 2.9, 2 - 5.8, 3 - 8.7, 4 - 11.6, 5 - 14.5, 6 - 17.4};
  EXPECT_TENSOR_NEAR(p, Shape({2, 3}), want_p, 1e-12, 1e-12);
  EXPECT_TENSOR_NEAR(base, Shape({3, 2}), want_base, 1e-12, 1e-12);
}

// Saving after 3 steps and loading into a fresh optimiser on copies gives the same 4th step, exactly.
TEST(SGD, StateDictRoundTrip) {
  const optim::SGDOptions o{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .dampening = 0.1};
  Tensor a0 = make_param(kInit0, {2, 3}), a1 = make_param(kInit1, {4});
  optim::SGD a({a0, a1}, o);
  for (int k = 0; k < 3; ++k) {
    feed_grad(a0, fixed_grad(0, k, 6));
    if (k > 0) feed_grad(a1, fixed_grad(1, k, 4));
    a.step();
  }
  a.set_lr(0.02);
  optim::StateDict sd = a.state_dict();
  Tensor b0 = a0.detach().clone(), b1 = a1.detach().clone();
  b0.requires_grad_();
  b1.requires_grad_();
  optim::SGD b({b0, b1}, {.lr = 1.0, .momentum = 0.9, .weight_decay = 0.01, .dampening = 0.1});
  b.load_state_dict(sd);
  EXPECT_EQ(b.lr(), 0.02);
  feed_grad(a0, fixed_grad(0, 3, 6));
  feed_grad(a1, fixed_grad(1, 3, 4));
  feed_grad(b0, fixed_grad(0, 3, 6));
  feed_grad(b1, fixed_grad(1, 3, 4));
  a.step();
  b.step();
  EXPECT_EQ(values(a0), values(b0));
  EXPECT_EQ(values(a1), values(b1));
}

TEST(SGD, LoadStateDictChecksEntries) {
  Tensor p = make_param({1.0, 2.0}, {2});
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  const TensorOptions f64{.dtype = kFloat64};
  const Tensor lr = full(Shape{}, 0.1, f64);
  EXPECT_THROW_MSG(opt.load_state_dict({{"param_groups.lr", lr}, {"state.0.momentum_buffer", zeros({3}, f64)}}), Error,
                   "state.0.momentum_buffer", "[3]", "[2]");
  EXPECT_THROW_MSG(opt.load_state_dict({{"param_groups.lr", lr}, {"state.0.exp_avg", zeros({2}, f64)}}), Error,
                   "unexpected entry 'state.0.exp_avg'");
  optim::SGD plain({p}, {.lr = 0.1});  // no momentum: no state at all
  EXPECT_THROW_MSG(plain.load_state_dict({{"param_groups.lr", lr}, {"state.0.momentum_buffer", zeros({2}, f64)}}),
                   Error, "unexpected entry 'state.0.momentum_buffer'");
}

TEST(SGD, BadOptionsThrow) {
  Tensor p = make_param({1.0}, {1});
  EXPECT_THROW_MSG(optim::SGD({p}, {.lr = -0.1}), ValueError, "SGD", "lr");
  EXPECT_THROW_MSG(optim::SGD({p}, {.lr = 0.1, .momentum = -0.5}), ValueError, "SGD", "momentum");
  EXPECT_THROW_MSG(optim::SGD({p}, {.lr = 0.1, .weight_decay = -1}), ValueError, "SGD", "weight_decay");
  EXPECT_THROW_MSG(optim::SGD({p}, {.lr = 0.1, .nesterov = true}), ValueError, "SGD", "nesterov");
  EXPECT_THROW_MSG(optim::SGD({p}, {.lr = 0.1, .momentum = 0.9, .nesterov = true, .dampening = 0.1}), ValueError, "SGD",
                   "nesterov", "dampening");
  EXPECT_THROW_MSG(optim::SGD({}, {.lr = 0.1}), ValueError, "SGD", "empty parameter list");
  EXPECT_THROW_MSG(optim::SGD({p, p}, {.lr = 0.1}), ValueError, "SGD", "more than once");
  EXPECT_THROW_MSG(optim::SGD({p * 2}, {.lr = 0.1}), ValueError, "SGD", "leaf");
  optim::SGD ok({p}, {.lr = 0.1});
  EXPECT_THROW_MSG(ok.set_lr(-1), ValueError, "SGD", "lr");
  EXPECT_EQ(ok.lr(), 0.1);
}

// float16 parameters step, in float32 arithmetic rounded once (test_grad_scaler.cpp has the exact checks).
TEST(SGD, StepsFloat16Params) {
  Tensor p = zeros({2}, {.dtype = kFloat16});
  p.requires_grad_();
  p.set_grad(ones({2}, {.dtype = kFloat16}));
  optim::SGD opt({p}, {.lr = 0.1});
  opt.step();
  EXPECT_EQ(p.dtype(), kFloat16);
  EXPECT_TENSOR_NEAR(p, Shape{2}, values(full({2}, -0.1, {.dtype = kFloat16})), 0, 0);
}

TEST(SGD, LearnsXor) {
  XorResult r = train_xor(
      [](std::vector<Tensor> ps) { return optim::SGD(std::move(ps), {.lr = 0.5, .momentum = 0.9}); }, 500, 0.05);
  EXPECT_LT(r.loss, 0.05) << "after " << r.steps << " steps";
}

}  // namespace
}  // namespace ember::test
