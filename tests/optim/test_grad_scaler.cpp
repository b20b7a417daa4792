// amp::GradScaler: PyTorch's scale trajectory on a sequence of steps with injected infs/NaNs, skipped steps,
// unscale_ before clipping, the stage errors, state_dict and checkpoints; and the optimisers on float16 /
// bfloat16 parameters (float32 state, one rounding per step).
#include <limits>

#include "optim_test_util.h"

using namespace ember;
using test::values;

namespace {

// A one-layer model trained on fixed data; `poison` puts an inf or NaN into a gradient before the step.
struct Toy {
  Tensor w = tensor(std::vector<double>{0.5, -0.25, 1.0, 0.75}, {2, 2}, {.dtype = kFloat32}).requires_grad_(true);
  Tensor b = tensor(std::vector<double>{0.1, -0.1}, {2}, {.dtype = kFloat32}).requires_grad_(true);
  optim::SGD opt{{w, b}, {.lr = 0.1}};
  Tensor x = tensor(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}, {.dtype = kFloat32});

  void backward(const amp::GradScaler& s) {
    opt.zero_grad();
    s.scale(sum(square(linear(x, w, b)))).backward();
  }
  static void poison(Tensor& p, double v) {
    std::vector<double> g = values(p.grad());
    g[1] = v;
    p.set_grad(tensor(g, p.shape(), {.dtype = p.dtype()}));
  }
};

}  // namespace

// PyTorch's _amp_update_scale_ (torch/amp/grad_scaler.py, growth_interval 3): the scale and growth tracker after
// each update, for the step sequence ok ok ok inf ok ok ok ok nan inf ok ok ok, worked out by hand from it.
TEST(GradScaler, ScaleTrajectoryMatchesPyTorch) {
  Toy r;
  amp::GradScaler s({.init_scale = 8.0, .growth_factor = 2.0, .backoff_factor = 0.5, .growth_interval = 3});
  const double kInf = std::numeric_limits<double>::infinity(), kNaN = std::nan("");
  const std::vector<double> poison = {0, 0, 0, kInf, 0, 0, 0, 0, kNaN, -kInf, 0, 0, 0};
  const std::vector<double> scale = {8, 8, 16, 8, 8, 8, 16, 16, 8, 4, 4, 4, 8};
  const std::vector<int64_t> tracker = {1, 2, 0, 0, 1, 2, 0, 1, 0, 0, 1, 2, 0};
  int steps = 0;
  for (size_t k = 0; k < poison.size(); ++k) {
    EXPECT_EQ(s.get_scale(), k == 0 ? 8.0 : scale[k - 1]);
    r.backward(s);
    if (poison[k] != 0) Toy::poison(k % 2 ? r.w : r.b, poison[k]);
    const std::vector<double> before = values(r.w);
    const bool stepped = s.step(r.opt);
    EXPECT_EQ(stepped, poison[k] == 0) << "step " << k;
    if (!stepped) EXPECT_EQ(values(r.w), before) << "a skipped step left the weights alone";
    steps += stepped;
    s.update();
    EXPECT_EQ(s.get_scale(), scale[k]) << "after step " << k;
    EXPECT_EQ(s.growth_tracker(), tracker[k]) << "after step " << k;
  }
  EXPECT_EQ(steps, 10);
}

// Factors that are not powers of two: the scale is a float32, as PyTorch's scale tensor, so each update rounds.
TEST(GradScaler, ScaleIsFloat32) {
  Toy r;
  amp::GradScaler s({.init_scale = 1.0, .growth_factor = 3.0, .backoff_factor = 0.1, .growth_interval = 1});
  r.backward(s);
  Toy::poison(r.w, std::numeric_limits<double>::infinity());
  s.step(r.opt);
  s.update();
  EXPECT_EQ(s.get_scale(), static_cast<double>(0.1f));  // 1 * 0.1 rounded to float32
  r.backward(s);
  s.step(r.opt);
  s.update();
  EXPECT_EQ(s.get_scale(), static_cast<double>(static_cast<float>(static_cast<double>(0.1f) * 3.0)));
}

TEST(GradScaler, GrowthStopsBelowFloat32Overflow) {
  Toy r;
  amp::GradScaler s({.init_scale = 2e38, .growth_interval = 1});
  r.w.set_grad(zeros({2, 2}));  // finite gradients (a real loss times 2e38 would overflow and back off)
  r.b.set_grad(zeros({2}));
  EXPECT_TRUE(s.step(r.opt));
  s.update();
  EXPECT_EQ(s.get_scale(), static_cast<double>(2e38f));  // 4e38 is not a float32: the scale stays
  EXPECT_EQ(s.growth_tracker(), 0);
}

// The unscaled gradients equal those of the unscaled loss, so clip_grad_norm_ after unscale_ sees the true norm,
// and step() does not unscale twice.
TEST(GradScaler, UnscaleGivesTrueGradients) {
  Toy plain, scaled;
  amp::GradScaler off({.enabled = false}), s({.init_scale = 1024.0});
  plain.backward(off);
  scaled.backward(s);
  EXPECT_TENSOR_NEAR(scaled.w.grad(), Shape({2, 2}), (values(plain.w.grad() * 1024.0)), 0, 1e-6);
  s.unscale_(scaled.opt);
  EXPECT_TENSOR_NEAR(scaled.w.grad(), Shape({2, 2}), values(plain.w.grad()), 0, 1e-6);
  EXPECT_TENSOR_NEAR(scaled.b.grad(), Shape({2}), values(plain.b.grad()), 0, 1e-6);
  const double n1 = nn::clip_grad_norm_({plain.w, plain.b}, 1.0), n2 = nn::clip_grad_norm_({scaled.w, scaled.b}, 1.0);
  EXPECT_NEAR(n1, n2, 1e-5 * n1);
  EXPECT_TRUE(s.step(scaled.opt));
  plain.opt.step();
  EXPECT_TENSOR_NEAR(scaled.w, Shape({2, 2}), values(plain.w), 0, 1e-6);
  s.update();
  EXPECT_EQ(s.get_scale(), 1024.0);
}

TEST(GradScaler, StridedAndLowPrecisionGradients) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    Tensor p = zeros({3, 4}, {.dtype = dt}).requires_grad_(true);
    optim::SGD opt({p}, {.lr = 1.0});
    Tensor g = tensor(std::vector<double>{8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96}, {4, 3}, {.dtype = dt});
    const std::vector<double> want = values(g.transpose(0, 1) / 8.0);
    p.set_grad(g.transpose(0, 1));  // non-contiguous: unscaled through a copy, written back
    amp::GradScaler s({.init_scale = 8.0});
    s.unscale_(opt);
    EXPECT_FALSE(p.grad().is_contiguous());
    EXPECT_TENSOR_NEAR(p.grad(), Shape({3, 4}), want, 0, 0) << dt;
    EXPECT_TRUE(s.step(opt)) << dt;
  }
}

TEST(GradScaler, SeveralOptimizersShareOneUpdate) {
  Toy a, b;
  amp::GradScaler s({.init_scale = 4.0, .growth_interval = 1});
  a.backward(s);
  b.backward(s);
  Toy::poison(b.b, std::nan(""));
  EXPECT_TRUE(s.step(a.opt));
  EXPECT_FALSE(s.step(b.opt));
  s.update();  // one of them saw a NaN: back off
  EXPECT_EQ(s.get_scale(), 2.0);
}

TEST(GradScaler, DisabledIsTransparent) {
  Toy r;
  amp::GradScaler s({.enabled = false});
  const Tensor loss = sum(r.x);
  EXPECT_TRUE(s.scale(loss).is_same(loss));
  EXPECT_EQ(s.get_scale(), 1.0);
  r.backward(s);
  const std::vector<double> before = values(r.w);
  EXPECT_TRUE(s.step(r.opt));
  EXPECT_NE(values(r.w), before);
  s.update();
  EXPECT_TRUE(s.state_dict().empty());
}

TEST(GradScaler, StageErrorsAndBadOptions) {
  Toy r;
  amp::GradScaler s;
  EXPECT_THROW_MSG(s.update(), Error, "GradScaler.update", "no inf/NaN checks");
  r.backward(s);
  s.unscale_(r.opt);
  EXPECT_THROW_MSG(s.unscale_(r.opt), Error, "unscale_", "already");
  s.step(r.opt);
  EXPECT_THROW_MSG(s.step(r.opt), Error, "GradScaler.step", "already");
  EXPECT_THROW_MSG(s.unscale_(r.opt), Error, "unscale_", "after step()");
  s.update();
  r.backward(s);
  EXPECT_NO_THROW(s.step(r.opt));  // a fresh iteration
  EXPECT_THROW_MSG(amp::GradScaler({.init_scale = 0}), ValueError, "init_scale");
  EXPECT_THROW_MSG(amp::GradScaler({.init_scale = 1e39}), ValueError, "init_scale");
  EXPECT_THROW_MSG(amp::GradScaler({.growth_factor = 1.0}), ValueError, "growth_factor");
  EXPECT_THROW_MSG(amp::GradScaler({.backoff_factor = 1.5}), ValueError, "backoff_factor");
  EXPECT_THROW_MSG(amp::GradScaler({.growth_interval = 0}), ValueError, "growth_interval");
  EXPECT_THROW_MSG(s.scale(tensor(std::vector<int64_t>{1}, {1})), DTypeError, "GradScaler.scale", "int64");
}

TEST(GradScaler, StateDictAndCheckpointRoundTrip) {
  Toy r;
  amp::GradScaler s({.init_scale = 256.0, .growth_factor = 4.0, .backoff_factor = 0.25, .growth_interval = 5});
  for (int k = 0; k < 3; ++k) {
    r.backward(s);
    s.step(r.opt);
    s.update();
  }
  const optim::StateDict sd = s.state_dict();
  ASSERT_EQ(sd.size(), 5u);
  EXPECT_EQ(sd[0].first, "scale");
  amp::GradScaler t;
  t.load_state_dict(sd);
  EXPECT_EQ(t.get_scale(), 256.0);
  EXPECT_EQ(t.growth_tracker(), 3);
  EXPECT_EQ(t.options().growth_factor, 4.0);
  EXPECT_EQ(t.options().growth_interval, 5);
  // through a checkpoint file
  const auto dir = test::tmpdir("grad_scaler");
  const std::string path = (dir / "ckpt.safetensors").string();
  nn::Dense model(2, 2);
  nn::save_checkpoint(path, {.model = &model, .scaler = &s, .step = 3});
  amp::GradScaler u;
  nn::load_checkpoint(path, {.model = &model, .scaler = &u});
  EXPECT_EQ(u.get_scale(), 256.0);
  EXPECT_EQ(u.growth_tracker(), 3);
  optim::StateDict bad = sd;
  bad.pop_back();
  EXPECT_THROW_MSG(t.load_state_dict(bad), Error, "_growth_tracker", "missing");
  EXPECT_THROW_MSG(t.load_state_dict({}), Error, "empty");
}

// --- float16 / bfloat16 parameters: the state is float32 and each step is the float32 update of the widened
// parameter, rounded once (PyTorch's fused optimisers keep the same arithmetic).
TEST(LowPrecisionParams, StepIsTheFloat32UpdateRoundedOnce) {
  auto make_opt = [](const std::string& which, Tensor p) -> std::unique_ptr<optim::Optimizer> {
    if (which == "sgd")
      return std::make_unique<optim::SGD>(std::vector<Tensor>{p},
                                          optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01});
    if (which == "adam")
      return std::make_unique<optim::Adam>(std::vector<Tensor>{p},
                                           optim::AdamOptions{.lr = 0.01, .weight_decay = 0.01});
    return std::make_unique<optim::AdamW>(std::vector<Tensor>{p}, optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1});
  };
  for (DType dt : {kBFloat16, kFloat16}) {
    for (const std::string which : {"sgd", "adam", "adamw"}) {
      Generator gen(7);
      Tensor low = randn({300}, {.dtype = dt, .generator = &gen}).requires_grad_(true);
      auto opt = make_opt(which, low);
      Tensor ref = low.detach().to(kFloat32).requires_grad_(true);
      auto ref_opt = make_opt(which, ref);
      for (int k = 0; k < 3; ++k) {
        const Tensor g = tensor(test::fixed_grad(0, k, 300), {300}, {.dtype = dt});
        low.set_grad(g);
        ref.set_grad(g.to(kFloat32));
        opt->step();
        ref_opt->step();
        EXPECT_EQ(low.dtype(), dt);
        EXPECT_TENSOR_NEAR(low, Shape{300}, values(ref.to(dt)), 0, 0) << which << " " << dt << " step " << k;
        NoGradGuard ng;
        ref.copy_(ref.to(dt));  // the reference continues from the rounded parameter, as the low one does
      }
      for (const auto& [name, t] : opt->state_dict())
        if (t.numel() == 300) EXPECT_EQ(t.dtype(), kFloat32) << which << " " << name;
    }
  }
}

TEST(LowPrecisionParams, Bf16ModelTrains) {
  manual_seed(3);
  nn::Chain model{nn::Dense(2, 16, nn::tanh), nn::Dense(16, 1)};
  model.to(kBFloat16);
  optim::AdamW opt(model.parameters(), {.lr = 0.05});
  const Tensor x = tensor(std::vector<double>{0, 0, 0, 1, 1, 0, 1, 1}, {4, 2}, {.dtype = kBFloat16});
  const Tensor y = tensor(std::vector<double>{0, 1, 1, 0}, {4, 1}, {.dtype = kBFloat16});
  double first = 0, last = 0;
  for (int k = 0; k < 300; ++k) {
    opt.zero_grad();
    Tensor loss = nn::mse_loss(model(x), y);
    loss.backward();
    opt.step();
    (k == 0 ? first : last) = loss.item<double>();
  }
  for (const Tensor& p : model.parameters()) EXPECT_EQ(p.dtype(), kBFloat16);
  EXPECT_LT(last, 0.05);
  EXPECT_LT(last, first / 4);
}
