// Autocast (amp.h): the guard's state, one test per row of docs/amp.md's op table (the output dtype), values and
// gradients against float32 within the low dtype's tolerance, the cast cache, backward and checkpointing under
// autocast, and bad input.
#include <thread>

#include "test_util.h"

using namespace ember;
using test::values;

namespace {

Tensor rnd(Shape s, uint64_t seed, DType dt = kFloat32) {
  Generator g(seed);
  return randn(s, {.dtype = dt, .generator = &g});
}
Tensor param(Shape s, uint64_t seed) { return rnd(s, seed).requires_grad_(true); }

double max_rel_err(const Tensor& got, const Tensor& want) {
  const std::vector<double> a = values(got), b = values(want);
  double worst = 0, scale = 1e-6;
  for (double v : b) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]) / scale);
  return worst;
}

}  // namespace

TEST(Autocast, GuardStateNestsAndRestores) {
  EXPECT_FALSE(amp::is_autocast_enabled());
  {
    amp::AutocastGuard a(kBFloat16);
    EXPECT_TRUE(amp::is_autocast_enabled());
    EXPECT_TRUE(amp::is_autocast_enabled(DeviceType::CPU));
    EXPECT_TRUE(amp::is_autocast_enabled(DeviceType::CUDA));
    EXPECT_EQ(amp::autocast_dtype(), kBFloat16);
    {
      amp::AutocastGuard b(Device::cuda(), kFloat16);
      EXPECT_EQ(amp::autocast_dtype(DeviceType::CUDA), kFloat16);
      EXPECT_EQ(amp::autocast_dtype(DeviceType::CPU), kBFloat16);
      amp::AutocastGuard off(kBFloat16, /*enabled=*/false);
      EXPECT_FALSE(amp::is_autocast_enabled());
    }
    EXPECT_EQ(amp::autocast_dtype(DeviceType::CUDA), kBFloat16);
    EXPECT_TRUE(amp::is_autocast_enabled());
  }
  EXPECT_FALSE(amp::is_autocast_enabled());
}

TEST(Autocast, IsPerThread) {
  amp::AutocastGuard a(kBFloat16);
  bool other = true;
  DType seen = kFloat32;
  std::thread t([&] {
    other = amp::is_autocast_enabled();
    seen = matmul(rnd({2, 3}, 1), rnd({3, 2}, 2)).dtype();
  });
  t.join();
  EXPECT_FALSE(other);
  EXPECT_EQ(seen, kFloat32);
  EXPECT_EQ(matmul(rnd({2, 3}, 1), rnd({3, 2}, 2)).dtype(), kBFloat16);
}

TEST(Autocast, DeviceGuardLeavesOtherDevicesAlone) {
  amp::AutocastGuard a(Device::cuda(), kFloat16);
  EXPECT_TRUE(amp::is_autocast_enabled());
  EXPECT_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(matmul(rnd({2, 3}, 1), rnd({3, 2}, 2)).dtype(), kFloat32);  // CPU tensors: untouched
}

TEST(Autocast, RefusesOtherDtypes) {
  EXPECT_THROW_MSG(amp::AutocastGuard g(kInt64), DTypeError, "AutocastGuard", "int64", "float16", "bfloat16");
  EXPECT_THROW_MSG(amp::AutocastGuard g(kFloat32), DTypeError, "AutocastGuard", "float32");
  EXPECT_THROW_MSG(amp::AutocastGuard g(Device::cuda(), kFloat64), DTypeError, "float64");
  EXPECT_FALSE(amp::is_autocast_enabled());  // a refused guard changed nothing
}

// --- the op table of docs/amp.md, one row each: the output dtype under autocast, for both low dtypes.
struct Row {
  const char* op;
  std::function<Tensor(DType in)> run;  // builds the op's inputs in dtype `in` and runs it
  enum Expect { kLow, kF32, kSame } expect;
  DType input = kFloat32;  // the inputs the row feeds (16-bit for the float32 list: they must come up)
};

std::vector<Row> rows() {
  auto x = [](Shape s, uint64_t seed, DType dt) { return rnd(s, seed).to(dt); };
  auto labels = [] { return tensor(std::vector<int64_t>{0, 2, 1, 2}, {4}); };
  const DType low = kBFloat16;  // the 16-bit input of the float32 list (a float16 input behaves the same)
  return {
      {"matmul",
       [=](DType d) {
         return matmul(x({4, 5}, 1, d), x({5, 3}, 2, d));
       },
       Row::kLow},
      {"matmul (batched)",
       [=](DType d) {
         return matmul(x({2, 4, 5}, 1, d), x({2, 5, 3}, 2, d));
       },
       Row::kLow},
      {"linear",
       [=](DType d) {
         return linear(x({4, 5}, 1, d), x({3, 5}, 2, d), x({3}, 3, d));
       },
       Row::kLow},
      {"conv2d",
       [=](DType d) {
         return conv2d(x({1, 2, 5, 5}, 1, d), x({3, 2, 3, 3}, 2, d), x({3}, 3, d));
       },
       Row::kLow},
      {"einsum",
       [=](DType d) {
         return einsum("ij,jk->ik", {x({4, 5}, 1, d), x({5, 3}, 2, d)});
       },
       Row::kLow},
      {"scaled_dot_product_attention",
       [=](DType d) {
         return scaled_dot_product_attention(x({1, 2, 4, 8}, 1, d), x({1, 2, 4, 8}, 2, d), x({1, 2, 4, 8}, 3, d));
       },
       Row::kLow},
      {"softmax",
       [=](DType d) {
         return softmax(x({4, 5}, 1, d), 1);
       },
       Row::kF32, low},
      {"log_softmax",
       [=](DType d) {
         return log_softmax(x({4, 5}, 1, d), 1);
       },
       Row::kF32, low},
      {"exp", [=](DType d) { return exp(x({4}, 1, d)); }, Row::kF32, low},
      {"log", [=](DType d) { return log(abs(x({4}, 1, d)) + 1); }, Row::kF32, low},
      {"log1p", [=](DType d) { return log1p(abs(x({4}, 1, d))); }, Row::kF32, low},
      {"pow (scalar)", [=](DType d) { return pow(x({4}, 1, d), 2.0); }, Row::kF32, low},
      {"pow (tensor)", [=](DType d) { return pow(abs(x({4}, 1, d)), x({4}, 2, d)); }, Row::kF32, low},
      {"softplus", [=](DType d) { return softplus(x({4}, 1, d)); }, Row::kF32, low},
      {"sum",
       [=](DType d) {
         return sum(x({4, 5}, 1, d));
       },
       Row::kF32, low},
      {"sum (dims)",
       [=](DType d) {
         return sum(x({4, 5}, 1, d), {1});
       },
       Row::kF32, low},
      {"cumsum",
       [=](DType d) {
         return cumsum(x({4, 5}, 1, d), 1);
       },
       Row::kF32, low},
      {"logsumexp",
       [=](DType d) {
         return logsumexp(x({4, 5}, 1, d), {1});
       },
       Row::kF32, low},
      {"norm",
       [=](DType d) {
         return norm(x({4, 5}, 1, d));
       },
       Row::kF32, low},
      {"layer_norm",
       [=](DType d) {
         return layer_norm(x({4, 5}, 1, d), {5});
       },
       Row::kF32, low},
      {"cross_entropy",
       [=](DType d) {
         return nn::cross_entropy(x({4, 3}, 1, d), labels());
       },
       Row::kF32, low},
      {"cross_entropy (options)",
       [=](DType d) {
         return nn::cross_entropy(x({4, 3}, 1, d), labels(), {.label_smoothing = 0.1});
       },
       Row::kF32, low},
      {"nll_loss",
       [=](DType d) {
         return nn::nll_loss(x({4, 3}, 1, d), labels());
       },
       Row::kF32, low},
      {"logitcrossentropy",
       [=](DType d) {
         return nn::logitcrossentropy(x({4, 3}, 1, d), softmax(x({4, 3}, 2, kFloat32), 1).to(d));
       },
       Row::kF32, low},
      {"binary_cross_entropy_with_logits",
       [=](DType d) { return nn::binary_cross_entropy_with_logits(x({4}, 1, d), x({4}, 2, d)); }, Row::kF32, low},
      {"mse_loss", [=](DType d) { return nn::mse_loss(x({4}, 1, d), x({4}, 2, d)); }, Row::kF32, low},
      {"l1_loss", [=](DType d) { return nn::l1_loss(x({4}, 1, d), x({4}, 2, d)); }, Row::kF32, low},
      {"huber_loss", [=](DType d) { return nn::huber_loss(x({4}, 1, d), x({4}, 2, d)); }, Row::kF32, low},
      {"smooth_l1_loss", [=](DType d) { return nn::smooth_l1_loss(x({4}, 1, d), x({4}, 2, d)); }, Row::kF32, low},
      // Not listed: they run in the dtype they are given (batch_norm with float32 statistics, as PyTorch's).
      {"batch_norm",
       [=](DType d) {
         return batch_norm(x({4, 3}, 1, d), {}, {});
       },
       Row::kSame, low},
      {"relu", [=](DType d) { return relu(x({4}, 1, d)); }, Row::kSame, low},
      {"mean",
       [=](DType d) {
         return mean(x({4, 5}, 1, d));
       },
       Row::kSame, low},
      {"max_pool2d",
       [=](DType d) {
         return max_pool2d(x({1, 1, 4, 4}, 1, d), {2});
       },
       Row::kSame, low},
  };
}

TEST(Autocast, OpTableOutputDtypes) {
  for (DType ac : {kBFloat16, kFloat16}) {
    amp::AutocastGuard g(ac);
    for (const Row& r : rows()) {
      const Tensor y = r.run(r.input);
      const DType want = r.expect == Row::kLow ? ac : r.expect == Row::kF32 ? kFloat32 : r.input;
      EXPECT_EQ(y.dtype(), want) << r.op << " under autocast " << ac;
    }
  }
  for (const Row& r : rows()) EXPECT_EQ(r.run(r.input).dtype(), r.input) << r.op << " without autocast";
}

// BatchNorm of a 16-bit input: the output and input gradient in the input's dtype, the statistics, the running
// statistics and the weight and bias gradients in float32 — each within the 16-bit rounding of what float32 BatchNorm
// gives on the same values (the values the 16-bit tensor holds), with and without autocast, for the [N, C] rows and
// the [N, C, H, W] runs, in training and evaluation.
TEST(Autocast, BatchNormKeeps16BitInputsWithFloat32Statistics) {
  for (DType low : {kBFloat16, kFloat16})
    for (const Shape& shape : {Shape{16, 3}, Shape{4, 3, 6, 5}})
      for (bool training : {true, false})
        for (bool autocast : {false, true}) {
          const std::string what = detail::str(low, " ", shape, training ? " training" : " eval",
                                               autocast ? " under autocast" : "");
          const Tensor x_low = (rnd(shape, 11) * 2.0 + 0.5).to(low);
          const Tensor x32 = x_low.to(kFloat32);  // the same values
          auto run = [&](const Tensor& x_in) {
            Tensor x = x_in.detach().requires_grad_(true), w = param({3}, 12), b = param({3}, 13);
            Tensor rm = rnd({3}, 14), rv = rnd({3}, 15).abs() + 0.5;
            Tensor y;
            {
              amp::AutocastGuard g(low, autocast);
              y = batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5);
            }
            (y.to(kFloat32) * rnd(shape, 16)).sum().backward();
            return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad(), rm, rv};
          };
          const std::vector<Tensor> got = run(x_low), want = run(x32);
          EXPECT_EQ(got[0].dtype(), low) << what;
          EXPECT_EQ(got[1].dtype(), low) << what;
          for (size_t i = 2; i < got.size(); ++i) EXPECT_EQ(got[i].dtype(), kFloat32) << what << " tensor " << i;
          const double tol = low == kBFloat16 ? 1.6e-2 : 2e-3;  // the output's rounding (and dy's, in backward)
          const char* names[] = {"y", "grad x", "grad w", "grad b", "running mean", "running var"};
          for (size_t i = 0; i < got.size(); ++i)
            EXPECT_LE(max_rel_err(got[i], want[i]), i >= 4 ? 1e-6 : tol) << what << " " << names[i];
        }
}

TEST(Autocast, PromoteListTakesTheWidest) {
  amp::AutocastGuard g(kBFloat16);
  const Tensor a = rnd({4}, 1).to(kBFloat16), b = rnd({4}, 2);
  EXPECT_EQ(cat({a, b}).dtype(), kFloat32);
  EXPECT_EQ(stack({a, b}).dtype(), kFloat32);
  EXPECT_EQ((a + b).dtype(), kFloat32);
  EXPECT_EQ(where(gt(b, 0.0), a, b).dtype(), kFloat32);
  const Tensor idx = tensor(std::vector<int64_t>{0, 1, 0, 1}, {4});
  const Tensor y = scatter_add(zeros({2}, {.dtype = kBFloat16}), 0, idx, b);  // mixed: refused without autocast
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_TENSOR_NEAR(y, Shape{2}, (std::vector<double>{values(b)[0] + values(b)[2], values(b)[1] + values(b)[3]}));
  EXPECT_EQ(scatter_add(zeros({2}, {.dtype = kFloat16}), 0, idx, b.to(kBFloat16)).dtype(), kFloat32);
}

TEST(Autocast, Float64AndIntegersAreLeftAlone) {
  amp::AutocastGuard g(kBFloat16);
  EXPECT_EQ(matmul(rnd({2, 3}, 1, kFloat64), rnd({3, 2}, 2, kFloat64)).dtype(), kFloat64);
  EXPECT_EQ(softmax(rnd({2, 3}, 1, kFloat64), 1).dtype(), kFloat64);
  const Tensor i = tensor(std::vector<int64_t>{1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(matmul(i, i).dtype(), kInt64);
}

// Values and gradients within the low dtype's rounding of the float32 run (a 3-layer MLP and a loss).
TEST(Autocast, MatchesFloat32WithinTolerance) {
  for (DType ac : {kBFloat16, kFloat16}) {
    const Tensor x = rnd({16, 32}, 3);
    const Tensor labels = tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5}, {16});
    const Tensor w1 = param({64, 32}, 4) * 0.2, w2 = param({10, 64}, 5) * 0.2;
    Tensor W1 = w1.detach().requires_grad_(true), W2 = w2.detach().requires_grad_(true);
    auto forward = [&] { return nn::cross_entropy(linear(gelu(linear(x, W1)), W2), labels); };
    const Tensor ref = forward();
    ref.backward();
    const Tensor g1 = W1.grad(), g2 = W2.grad();
    W1.set_grad({});
    W2.set_grad({});
    Tensor loss;
    {
      amp::AutocastGuard g(ac);
      loss = forward();
    }
    EXPECT_EQ(loss.dtype(), kFloat32);
    loss.backward();
    ASSERT_TRUE(W1.grad().defined());
    EXPECT_EQ(W1.grad().dtype(), kFloat32);  // master weights get float32 gradients
    EXPECT_EQ(W2.grad().dtype(), kFloat32);
    const double tol = ac == kBFloat16 ? 3e-2 : 4e-3;  // 8 and 11 mantissa bits, a few roundings deep
    EXPECT_LT(max_rel_err(loss, ref), tol) << ac;
    EXPECT_LT(max_rel_err(W1.grad(), g1), tol) << ac;
    EXPECT_LT(max_rel_err(W2.grad(), g2), tol) << ac;
  }
}

TEST(Autocast, CastCacheCastsAParameterOncePerRegion) {
  Tensor w = param({3, 3}, 1);
  const Tensor activation = rnd({3, 3}, 2) * 2;  // not a leaf that requires grad: never cached
  Tensor first;
  {
    amp::AutocastGuard g(kBFloat16);
    first = amp::lower(w);
    EXPECT_EQ(first.dtype(), kBFloat16);
    EXPECT_TRUE(first.impl() == amp::lower(w).impl());  // reused
    EXPECT_FALSE(amp::lower(activation).impl() == amp::lower(activation).impl());
    {
      amp::AutocastGuard inner(kBFloat16);  // a nested guard shares the region's cache
      EXPECT_TRUE(first.impl() == amp::lower(w).impl());
    }
    EXPECT_TRUE(first.impl() == amp::lower(w).impl());
    {
      NoGradGuard ng;  // a cast made without grad has no graph: cached apart
      const Tensor c = amp::lower(w);
      EXPECT_FALSE(c.requires_grad());
      EXPECT_FALSE(c.impl() == first.impl());
    }
    EXPECT_TRUE(amp::lower(w).requires_grad());
    {
      NoGradGuard ng;
      w.mul_(2.0);  // an optimiser step: the cached copy is stale
    }
    const Tensor after = amp::lower(w);
    EXPECT_FALSE(after.impl() == first.impl());
    EXPECT_TENSOR_NEAR(after, Shape({3, 3}), values(w.to(kBFloat16)), 0, 0);
    // A parameter used twice in the region: one cast, its gradient the sum of both uses, in float32.
    const Tensor x = rnd({2, 3}, 3);
    sum(matmul(x, w) + matmul(x * 2, w)).backward();
  }
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  const Tensor x3 = rnd({2, 3}, 3) * 3;  // d/dw sum(x w + 2x w) = (3x)^T 1
  EXPECT_LT(max_rel_err(w.grad(), matmul(x3.transpose(0, 1), ones({2, 3}))), 1e-2);
  amp::AutocastGuard again(kBFloat16);
  EXPECT_FALSE(amp::lower(w).impl() == first.impl());  // the cache ended with the outermost guard
}

// Gradient accumulation inside one region (PyTorch's pattern: one autocast block around the micro-batch loop, a
// backward per micro-batch): every backward goes through the region's one cast of the parameter, which the first
// backward must not free (the cast keeps nothing to free), and the gradients add up.
TEST(Autocast, OneCastOfAParameterServesABackwardPerMicroBatch) {
  Tensor w = param({3, 3}, 1);
  const Tensor x1 = rnd({2, 3}, 2), x2 = rnd({2, 3}, 3);
  {
    amp::AutocastGuard g(kBFloat16);
    sum(matmul(x1, w)).backward();
    sum(matmul(x2, w)).backward();
  }
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_LT(max_rel_err(w.grad(), matmul((x1 + x2).transpose(0, 1), ones({2, 3}))), 1e-2);
}

TEST(Autocast, BackwardInsideTheRegionKeepsForwardDtypes) {
  Tensor w = param({4, 4}, 1);
  amp::AutocastGuard g(kFloat16);
  const Tensor y = softmax(matmul(rnd({2, 4}, 2), w), 1);
  EXPECT_EQ(y.dtype(), kFloat32);
  sum(y * rnd({2, 4}, 3)).backward();  // the engine runs without autocast
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_TRUE(amp::is_autocast_enabled());  // and restores it
}

TEST(Autocast, CheckpointRecomputesUnderTheSameAutocast) {
  const Tensor x = rnd({4, 8}, 1);
  Tensor w = param({8, 8}, 2);
  auto block = [&](const std::vector<Tensor>& in) { return gelu(linear(in[0], w)); };
  Tensor gw_plain, gw_ckpt;
  for (bool ckpt : {false, true}) {
    w.set_grad({});
    Tensor xin = x.detach().requires_grad_(true);
    Tensor loss;
    {
      amp::AutocastGuard g(kBFloat16);
      const Tensor h = ckpt ? autograd::checkpoint(block, {xin}) : block({xin});
      EXPECT_EQ(h.dtype(), kBFloat16);
      loss = sum(h);
    }
    loss.backward();  // outside the region: the rerun must still run in bfloat16
    (ckpt ? gw_ckpt : gw_plain) = w.grad();
  }
  EXPECT_EQ(gw_ckpt.dtype(), kFloat32);
  EXPECT_TENSOR_NEAR(gw_ckpt, gw_plain.shape(), values(gw_plain), 0, 0);  // the same roundings: bit for bit
}

TEST(Autocast, ModulesRunUnderAutocast) {
  manual_seed(5);
  nn::Chain model{nn::Dense(8, 16, nn::relu), nn::LayerNorm(16), nn::Dense(16, 4)};
  nn::MultiheadAttention mha(16, 2);
  const Tensor x = rnd({3, 8}, 1);
  amp::AutocastGuard g(kBFloat16);
  EXPECT_EQ(model(x).dtype(), kBFloat16);  // the last Dense
  EXPECT_EQ(mha(rnd({2, 5, 16}, 2)).dtype(), kBFloat16);
  for (const Tensor& p : model.parameters()) EXPECT_EQ(p.dtype(), kFloat32);
}
