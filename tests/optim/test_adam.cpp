// Tests optim::Adam and optim::AdamW against torch.optim.Adam / AdamW's published algorithm, written out
// here in float64 (m_hat / (sqrt(v_hat) + eps) form): with and without (L2 or decoupled) weight decay,
// float32 params, per-parameter step counts, skipped params, state_dict round trip and load errors, option
// errors, and XOR convergence.
#include "optim_test_util.h"

namespace ember::test {
namespace {

// torch.optim.Adam (decoupled = false) / AdamW (decoupled = true), one parameter, float64.
struct AdamRef {
  optim::AdamOptions o;
  bool decoupled = false;
  std::vector<double> m, v;
  int t = 0;
  void step(std::vector<double>& p, std::vector<double> g) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      if (decoupled) p[i] *= 1 - o.lr * o.weight_decay;
      else g[i] += o.weight_decay * p[i];
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(o.beta1, t));
      const double v_hat = v[i] / (1 - std::pow(o.beta2, t));
      p[i] -= o.lr * m_hat / (std::sqrt(v_hat) + o.eps);
    }
  }
};

const std::vector<double> kInit0 = {0.5, -1.25, 2.0, 0.75, -0.5, 1.5};
const std::vector<double> kInit1 = {1.0, -2.0, 0.25, 3.0};

optim::AdamWOptions as_adamw(const optim::AdamOptions& o) {
  return {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay};
}

// Six steps on two parameters ([2, 3] and [4]), checked after every step.
void check_adam(const optim::AdamOptions& o, bool decoupled, DType dt, double tol) {
  Tensor p0 = make_param(kInit0, {2, 3}, dt), p1 = make_param(kInit1, {4}, dt);
  std::unique_ptr<optim::Optimizer> opt;
  if (decoupled) opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{p0, p1}, as_adamw(o));
  else opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p0, p1}, o);
  std::vector<double> r0 = kInit0, r1 = kInit1;
  AdamRef ref0{o, decoupled}, ref1{o, decoupled};
  for (int k = 0; k < 6; ++k) {
    auto g0 = fixed_grad(0, k, r0.size()), g1 = fixed_grad(1, k, r1.size());
    feed_grad(p0, g0);
    feed_grad(p1, g1);
    opt->step();
    ref0.step(r0, g0);
    ref1.step(r1, g1);
    EXPECT_TENSOR_NEAR(p0, Shape({2, 3}), r0, tol, tol) << "step " << k;
    EXPECT_TENSOR_NEAR(p1, Shape({4}), r1, tol, tol) << "step " << k;
  }
}

TEST(Adam, Defaults) { check_adam({}, false, kFloat64, 1e-12); }
TEST(Adam, CustomBetasEps) {
  check_adam({.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-3}, false, kFloat64, 1e-12);
}
TEST(Adam, WeightDecay) { check_adam({.lr = 0.01, .weight_decay = 0.1}, false, kFloat64, 1e-12); }
TEST(Adam, Float32) { check_adam({.lr = 0.01, .weight_decay = 0.1}, false, kFloat32, 2e-6); }
TEST(AdamW, DecoupledWeightDecay) { check_adam({.lr = 0.01, .weight_decay = 0.1}, true, kFloat64, 1e-12); }
TEST(AdamW, NoWeightDecayEqualsAdam) { check_adam({.lr = 0.01}, true, kFloat64, 1e-12); }
TEST(AdamW, Float32) { check_adam({.lr = 0.01, .beta2 = 0.99, .weight_decay = 0.5}, true, kFloat32, 2e-6); }

// Large enough for the fused kernel to split the parameter across threads.
TEST(AdamW, LargeParameter) {
  const optim::AdamOptions o{.lr = 0.01, .weight_decay = 0.1};
  const size_t n = 100003;
  std::vector<double> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = std::cos(0.001 * static_cast<double>(i));
  Tensor p = make_param(r, {static_cast<int64_t>(n)});
  optim::AdamW opt({p}, as_adamw(o));
  AdamRef ref{o, true};
  for (int k = 0; k < 3; ++k) {
    const auto g = fixed_grad(0, k, n);
    feed_grad(p, g);
    opt.step();
    ref.step(r, g);
  }
  EXPECT_TENSOR_NEAR(p, Shape({static_cast<int64_t>(n)}), r, 1e-12, 1e-12);
}

TEST(AdamW, DefaultWeightDecayIsPyTorchs) {
  Tensor p = make_param({1.0}, {1});
  optim::AdamW opt({p});
  EXPECT_EQ(opt.options().weight_decay, 1e-2);
  EXPECT_EQ(opt.lr(), 1e-3);
  EXPECT_STREQ(opt.name(), "AdamW");
}

// Each parameter counts its own steps: one that first gets a grad at step 3 is bias-corrected with t = 1.
TEST(Adam, SkipsParamsAndCountsStepsPerParam) {
  const optim::AdamOptions o{.lr = 0.1};
  Tensor a = make_param(kInit1, {4}), b = make_param({1.0, 2.0}, {2});
  Tensor c = tensor<double>({4.0, 5.0}, {2});  // does not require grad, yet has a stale grad
  c.set_grad(tensor<double>({1.0, 1.0}, {2}));
  optim::Adam opt({a, b, c}, o);
  std::vector<double> ra = kInit1, rb = {1.0, 2.0};
  AdamRef refa{o}, refb{o};
  for (int k = 0; k < 4; ++k) {
    if (k < 2) b.set_grad({});
    feed_grad(a, fixed_grad(0, k, 4));
    refa.step(ra, fixed_grad(0, k, 4));
    if (k >= 2) {
      feed_grad(b, fixed_grad(1, k, 2));
      refb.step(rb, fixed_grad(1, k, 2));
    }
    opt.step();
    EXPECT_TENSOR_NEAR(a, Shape({4}), ra, 1e-12, 1e-12) << "step " << k;
    EXPECT_TENSOR_NEAR(b, Shape({2}), rb, 1e-12, 1e-12) << "step " << k;
    EXPECT_TENSOR_NEAR(c, Shape({2}), (std::vector<double>{4.0, 5.0}), 0, 0);
  }
  optim::StateDict sd = opt.state_dict();
  std::vector<std::string> names;
  for (auto& [n, t] : sd) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"param_groups.lr", "state.0.step", "state.0.exp_avg", "state.0.exp_avg_sq",
                                             "state.1.step", "state.1.exp_avg", "state.1.exp_avg_sq"}));
  EXPECT_EQ(sd[1].second.item<double>(), 4.0);
  EXPECT_EQ(sd[4].second.item<double>(), 2.0);
  EXPECT_EQ(sd[0].second.dim(), 0);
  EXPECT_EQ(sd[0].second.dtype(), kFloat64);
}

// A step checks every parameter before it updates any: parameter 1, converted to float32 after its state was made
// in float64, fails the step with an error naming it, and parameter 0 is left as it was (value and step count).
TEST(Adam, ABadParameterFailsTheStepBeforeAnyUpdate) {
  Tensor a = make_param(kInit1, {4}), b = make_param({1.0, 2.0}, {2});
  optim::Adam opt({a, b}, {.lr = 0.1});
  feed_grad(a, fixed_grad(0, 0, 4));
  feed_grad(b, fixed_grad(1, 0, 2));
  opt.step();
  const std::vector<double> a_after_one = a.to_vector<double>();
  b.set_data(b.detach().to(kFloat32));
  feed_grad(a, fixed_grad(0, 1, 4));
  feed_grad(b, fixed_grad(1, 1, 2));
  try {
    opt.step();
    FAIL() << "expected an error for parameter 1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 1 is now float32"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.to_vector<double>(), a_after_one);
  EXPECT_EQ(opt.state_dict()[1].second.item<double>(), 1.0);  // state.0.step
}

TEST(Adam, StepBumpsVersion) {
  Tensor w = make_param({1.0, -1.0}, {2});
  optim::Adam opt({w}, {.lr = 0.1});
  sum(w * w).backward();
  const uint32_t v = w.version();
  opt.step();
  EXPECT_GT(w.version(), v);
  // the first Adam step moves each element by about lr
  EXPECT_TENSOR_NEAR(w, Shape({2}), (std::vector<double>{0.9, -0.9}), 1e-7, 0);
}

// Saving after 3 steps and loading into a fresh optimiser on copies gives the same 4th step, exactly; a
// parameter without state (never stepped) stays without.
template <class Opt, class Options>
void check_round_trip(const Options& o) {
  Tensor a0 = make_param(kInit0, {2, 3}), a1 = make_param(kInit1, {4}), a2 = make_param({7.0}, {1});
  Opt a({a0, a1, a2}, o);
  for (int k = 0; k < 3; ++k) {
    feed_grad(a0, fixed_grad(0, k, 6));
    if (k > 0) feed_grad(a1, fixed_grad(1, k, 4));
    a.step();
  }
  a.set_lr(0.003);
  optim::StateDict sd = a.state_dict();
  EXPECT_EQ(sd.size(), 7u);  // lr + 3 entries for each of parameters 0 and 1
  std::vector<Tensor> bs;
  for (const Tensor& p : {a0, a1, a2}) {
    bs.push_back(p.detach().clone());
    bs.back().requires_grad_();
  }
  Options fresh = o;
  fresh.lr = 1.0;  // the lr comes from the dict; the other hyperparameters from the constructor
  Opt b(bs, fresh);
  b.load_state_dict(sd);
  EXPECT_EQ(b.lr(), 0.003);
  for (int which = 0; which < 3; ++which) {
    Tensor pa = std::vector<Tensor>{a0, a1, a2}[which];
    const auto g = fixed_grad(which, 3, static_cast<size_t>(pa.numel()));
    feed_grad(pa, g);
    feed_grad(bs[which], g);
  }
  optim::StateDict before = b.state_dict();
  a.step();
  b.step();
  EXPECT_EQ(values(a0), values(bs[0]));
  EXPECT_EQ(values(a1), values(bs[1]));
  EXPECT_EQ(values(a2), values(bs[2]));
  // the state_dict taken before the step is a snapshot
  EXPECT_EQ(values(before[2].second), values(sd[2].second));
  EXPECT_NE(values(b.state_dict()[2].second), values(sd[2].second));
}
TEST(Adam, StateDictRoundTrip) { check_round_trip<optim::Adam>(optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1}); }
TEST(AdamW, StateDictRoundTrip) {
  check_round_trip<optim::AdamW>(optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1});
}

TEST(Adam, LoadStateDictMismatchesThrowNamingTheEntry) {
  Tensor p0 = make_param(kInit0, {2, 3}), p1 = make_param(kInit1, {4});
  optim::Adam opt({p0, p1}, {.lr = 0.01});
  feed_grad(p0, fixed_grad(0, 0, 6));
  feed_grad(p1, fixed_grad(1, 0, 4));
  opt.step();
  const optim::StateDict good = opt.state_dict();
  auto with = [&](const std::string& name, Tensor t) {
    optim::StateDict sd = good;
    for (auto& [n, v] : sd)
      if (n == name) v = t;
    return sd;
  };
  auto without = [&](const std::string& name) {
    optim::StateDict sd;
    for (auto& e : good)
      if (e.first != name) sd.push_back(e);
    return sd;
  };
  auto plus = [&](const std::string& name, Tensor t) {
    optim::StateDict sd = good;
    sd.emplace_back(name, t);
    return sd;
  };
  const TensorOptions f64{.dtype = kFloat64};
  EXPECT_THROW_MSG(opt.load_state_dict(with("state.0.exp_avg", zeros({3, 2}, f64))), Error, "Adam", "'state.0.exp_avg'",
                   "[3, 2]", "[2, 3]");
  EXPECT_THROW_MSG(opt.load_state_dict(with("state.1.exp_avg_sq", zeros({4}))), Error, "'state.1.exp_avg_sq'",
                   "float32", "float64");
  EXPECT_THROW_MSG(opt.load_state_dict(with("state.1.step", full(Shape{}, 1, {.dtype = kInt64}))), Error,
                   "'state.1.step'");
  EXPECT_THROW_MSG(opt.load_state_dict(with("state.1.step", full(Shape{}, -1.0, f64))), Error, "'state.1.step'");
  EXPECT_THROW_MSG(opt.load_state_dict(with("param_groups.lr", zeros({1}, f64))), Error, "'param_groups.lr'");
  EXPECT_THROW_MSG(opt.load_state_dict(without("param_groups.lr")), Error, "'param_groups.lr' is missing");
  EXPECT_THROW_MSG(opt.load_state_dict(without("state.0.exp_avg_sq")), Error, "'state.0.exp_avg_sq' is missing");
  EXPECT_THROW_MSG(opt.load_state_dict(plus("state.2.step", full(Shape{}, 1.0, f64))), Error,
                   "unexpected entry 'state.2.step'");
  EXPECT_THROW_MSG(opt.load_state_dict(plus("state.0.momentum_buffer", zeros({2, 3}, f64))), Error,
                   "unexpected entry 'state.0.momentum_buffer'");
  EXPECT_THROW_MSG(opt.load_state_dict(plus("lr", full(Shape{}, 1.0, f64))), Error, "unexpected entry 'lr'");
  EXPECT_THROW_MSG(opt.load_state_dict(plus("state.0.exp_avg", zeros({2, 3}, f64))), Error,
                   "'state.0.exp_avg' appears twice");
  // a failed load changes nothing
  EXPECT_EQ(opt.lr(), 0.01);
  optim::StateDict after = opt.state_dict();
  ASSERT_EQ(after.size(), good.size());
  for (size_t i = 0; i < good.size(); ++i) EXPECT_EQ(values(after[i].second), values(good[i].second)) << good[i].first;
}

TEST(Adam, BadOptionsThrow) {
  Tensor p = make_param({1.0}, {1});
  EXPECT_THROW_MSG(optim::Adam({p}, {.lr = -1e-3}), ValueError, "Adam", "lr");
  EXPECT_THROW_MSG(optim::Adam({p}, {.lr = std::nan("")}), ValueError, "Adam", "lr");
  EXPECT_THROW_MSG(optim::Adam({p}, {.beta1 = 1.0}), ValueError, "Adam", "beta1");
  EXPECT_THROW_MSG(optim::Adam({p}, {.beta2 = -0.1}), ValueError, "Adam", "beta2");
  EXPECT_THROW_MSG(optim::Adam({p}, {.eps = -1e-8}), ValueError, "Adam", "eps");
  EXPECT_THROW_MSG(optim::Adam({p}, {.weight_decay = -0.1}), ValueError, "Adam", "weight_decay");
  EXPECT_THROW_MSG(optim::AdamW({p}, {.beta1 = 1.5}), ValueError, "AdamW", "beta1");
  EXPECT_THROW_MSG(optim::AdamW({}, {}), ValueError, "AdamW", "empty parameter list");
}

TEST(Adam, LearnsXor) {
  XorResult r = train_xor([](std::vector<Tensor> ps) { return optim::Adam(std::move(ps), {.lr = 0.05}); }, 500, 0.05);
  EXPECT_LT(r.loss, 0.05) << "after " << r.steps << " steps";
}
TEST(AdamW, LearnsXor) {
  XorResult r = train_xor([](std::vector<Tensor> ps) { return optim::AdamW(std::move(ps), {.lr = 0.05}); }, 500, 0.05);
  EXPECT_LT(r.loss, 0.05) << "after " << r.steps << " steps";
}

}  // namespace
}  // namespace ember::test
