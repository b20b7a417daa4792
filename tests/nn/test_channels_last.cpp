// tests: channels-last tensors (API.md: contiguous(MemoryFormat), is_contiguous(MemoryFormat), module.to(device,
// MemoryFormat)): the strides, the refusals, every op of a ResNet keeping a channels-last input's layout with the
// values of the NCHW run, gradients and optimiser state in the parameter's layout, ResNet-18 trained channels-last
// equal to NCHW, and a plan that still equals the measured peak. (Gradients in float64, broadcasting and
// non-contiguous inputs: the op table's *_channels_last rows, tests/support/op_cases.h.)
#include <cmath>
#include <functional>

#include "test_util.h"

using namespace ember;

namespace {

constexpr MemoryFormat kCL = MemoryFormat::ChannelsLast;

Tensor nchw_arange(const Shape& s) { return arange(s.numel()).to(kFloat32).reshape(s); }

// Every element of a within atol + rtol * |b| of b (same shape).
::testing::AssertionResult close(const Tensor& a, const Tensor& b, double atol = 1e-5, double rtol = 1e-4) {
  return test::tensor_near(a, b.shape(), b.to_vector<double>(), atol, rtol);
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::fabs(v));
  return m;
}

// Two ResNet-18s with the same weights (10 classes, in dtype), the second laid out channels-last.
std::pair<models::ResNet, models::ResNet> resnet18_pair(uint64_t seed, DType dtype) {
  manual_seed(seed);
  models::ResNet nchw = models::resnet18({.num_classes = 10});
  manual_seed(seed);
  models::ResNet cl = models::resnet18({.num_classes = 10});
  nchw.to(dtype);
  cl.to(dtype);
  cl.to(Device::cpu(), kCL);
  return {std::move(nchw), std::move(cl)};
}

}  // namespace

TEST(ChannelsLast, StridesAndChecksAsPyTorch) {
  const Tensor x = nchw_arange({2, 3, 4, 5});
  const Tensor y = x.contiguous(kCL);
  EXPECT_EQ(y.strides(), Shape({60, 1, 15, 3}));
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_TRUE(y.is_contiguous(kCL));
  EXPECT_FALSE(y.is_contiguous());
  EXPECT_FALSE(x.is_contiguous(kCL));
  EXPECT_EQ(y.suggest_memory_format(), kCL);
  EXPECT_EQ(x.suggest_memory_format(), MemoryFormat::Contiguous);
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());  // the same values, in another order in memory
  EXPECT_TRUE(y.contiguous(kCL).is_same(y));                 // already channels-last: itself
  const Tensor back = y.contiguous();
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_EQ(back.to_vector<float>(), x.to_vector<float>());
  // the permute that makes NHWC memory readable as [N, H, W, C] is contiguous
  EXPECT_TRUE(y.permute({0, 2, 3, 1}).is_contiguous());
  // dims of size 1 take any stride: one channel, or 1x1 maps, are both layouts at once (PyTorch's rule)
  EXPECT_TRUE(nchw_arange({2, 1, 4, 5}).is_contiguous(kCL));
  EXPECT_TRUE(nchw_arange({2, 3, 1, 1}).is_contiguous(kCL));
  EXPECT_EQ(nchw_arange({2, 3, 1, 1}).contiguous(kCL).suggest_memory_format(), MemoryFormat::Contiguous);
  // empty(..., ChannelsLast) and a transposed NHWC buffer are channels-last too
  EXPECT_TRUE(empty({2, 3, 4, 5}, {}, kCL).is_contiguous(kCL));
  EXPECT_TRUE(nchw_arange({2, 4, 5, 3}).permute({0, 3, 1, 2}).is_contiguous(kCL));
  std::ostringstream os;
  os << kCL;
  EXPECT_EQ(os.str(), "channels_last");
}

TEST(ChannelsLast, RefusesWhatPyTorchRefuses) {
  const Tensor x3 = nchw_arange({3, 4, 5});
  EXPECT_FALSE(x3.is_contiguous(kCL));
  EXPECT_THROW_MSG(x3.contiguous(kCL), ShapeError, "contiguous", "channels_last", "4-D", "[3, 4, 5]");
  EXPECT_THROW_MSG(x3.clone(kCL), ShapeError, "clone", "channels_last", "[3, 4, 5]");
  EXPECT_THROW_MSG(x3.contiguous(MemoryFormat::Preserve), ValueError, "contiguous", "preserve_format");
  EXPECT_THROW_MSG(x3.is_contiguous(MemoryFormat::Preserve), ValueError, "is_contiguous", "preserve_format");
  EXPECT_THROW_MSG(empty({3, 4, 5}, {}, kCL), ShapeError, "empty", "channels_last", "[3, 4, 5]");
  nn::Dense d(3, 2);
  EXPECT_THROW_MSG(d.to(MemoryFormat::Preserve), ValueError, "Module::to", "preserve_format");
}

// Each op of a ResNet step, given a channels-last input, gives a channels-last output with the NCHW run's values.
TEST(ChannelsLast, OpsKeepTheLayout) {
  manual_seed(3);
  const Tensor x = randn({2, 6, 7, 5}), y = x.contiguous(kCL);
  const Tensor w3 = randn({4, 6, 3, 3}), w1 = randn({8, 6, 1, 1}), b = randn({4}), b8 = randn({8});
  const Tensor bias = randn({1, 6, 1, 1}), other = randn({2, 6, 7, 5});
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> op;
  };
  const Case cases[] = {
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"sigmoid", [](const Tensor& t) { return t.sigmoid(); }},
      {"add", [&](const Tensor& t) { return t + other; }},
      {"add_self", [](const Tensor& t) { return t + t; }},
      {"mul_bias", [&](const Tensor& t) { return t * bias; }},
      {"scalar", [](const Tensor& t) { return t * 2.5 - 1; }},
      {"clamp", [](const Tensor& t) { return t.clamp(-0.5, 0.5); }},
      {"where", [](const Tensor& t) { return where(gt(t, 0), t, t * 0.1); }},
      {"to_float64", [](const Tensor& t) { return t.to(kFloat64); }},
      {"clone", [](const Tensor& t) { return t.clone(); }},
      {"conv3x3", [&](const Tensor& t) { return conv2d(t, w3, b, {1}, {1}); }},
      {"conv3x3_s2", [&](const Tensor& t) { return conv2d(t, w3, Tensor(), {2}, {1}); }},
      {"conv1x1", [&](const Tensor& t) { return conv2d(t, w1, b8); }},
      {"conv1x1_s2", [&](const Tensor& t) { return conv2d(t, w1, b8, {2}); }},
      {"max_pool", [](const Tensor& t) { return max_pool2d(t, {3}, {2}, {1}); }},
      {"avg_pool", [](const Tensor& t) { return avg_pool2d(t, {2}); }},
      {"batch_norm", [](const Tensor& t) { return batch_norm(t, {}, {}, {}, {}, true, 0.1, 1e-5); }},
      {"batch_norm_relu", [](const Tensor& t) { return batch_norm_relu(t, {}, {}, {}, {}, true, 0.1, 1e-5); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor want = c.op(x), got = c.op(y);
    EXPECT_TRUE(got.is_contiguous(kCL)) << got.strides();
    EXPECT_FALSE(got.is_contiguous()) << got.strides();
    EXPECT_TRUE(close(got, want));
  }
  // the first operand of the output's shape decides (PyTorch's order): NCHW + channels-last is NCHW
  EXPECT_TRUE((x + y).is_contiguous());
  EXPECT_TRUE((bias + y).is_contiguous(kCL));
  // in place on a channels-last tensor
  Tensor z = y.clone();
  z.add_(other).relu_();
  EXPECT_TRUE(z.is_contiguous(kCL));
  EXPECT_TRUE(close(z, relu(x + other)));
  // a reduction over H, W (global pooling) and a flatten lead back to the NCHW rows a Dense layer reads
  EXPECT_TRUE(close(y.mean({2, 3}), x.mean({2, 3})));
  EXPECT_TRUE(close(y.flatten(1), x.flatten(1)));
}

TEST(ChannelsLast, GradientsTakeTheInputsLayout) {
  manual_seed(4);
  const Tensor x0 = randn({2, 3, 6, 6}), w0 = randn({5, 3, 3, 3});
  auto run = [&](MemoryFormat f) {
    Tensor x = x0.clone(f).requires_grad_(), w = w0.clone(f).requires_grad_();  // fresh leaves in layout f
    Tensor y = batch_norm_relu(conv2d(x, w, Tensor(), {1}, {1}), {}, {}, {}, {}, true, 0.1, 1e-5);
    (max_pool2d(y, {2}) * 1.5).sum().backward();
    return std::pair{x, w};
  };
  auto [xn, wn] = run(MemoryFormat::Contiguous);
  auto [xc, wc] = run(kCL);
  EXPECT_TRUE(xc.grad().is_contiguous(kCL));
  EXPECT_TRUE(wc.grad().is_contiguous(kCL));
  EXPECT_FALSE(wc.grad().is_contiguous());
  EXPECT_TRUE(xn.grad().is_contiguous());
  EXPECT_TRUE(close(xc.grad(), xn.grad(), 1e-4));
  EXPECT_TRUE(close(wc.grad(), wn.grad(), 1e-4));
}

// model.to(MemoryFormat::ChannelsLast) lays out the 4-D parameters; the optimisers update them in place, their state
// in the same layout, and the steps equal the NCHW model's.
TEST(ChannelsLast, ModuleToAndOptimisersKeepTheLayout) {
  for (const char* opt_name : {"sgd", "adamw"}) {
    SCOPED_TRACE(opt_name);
    auto make = [] {
      manual_seed(5);
      // (no bias before the BatchNorm: its true gradient is 0, and Adam would amplify the rounding noise)
      return nn::Chain{nn::Conv2d(3, 8, 3, {.padding = 1, .bias = false}), nn::BatchNorm2d(8), nn::relu, nn::AdaptiveAvgPool2d({1, 1}),
                       nn::Flatten(), nn::Dense(8, 4)};
    };
    nn::Chain nchw = make(), cl = make();
    cl.to(Device::cpu(), kCL);
    const Tensor w = cl.parameters()[0];
    EXPECT_TRUE(w.is_contiguous(kCL));
    EXPECT_FALSE(w.is_contiguous());
    EXPECT_TRUE(cl.parameters().back().is_contiguous());  // 1-D and 2-D tensors keep theirs
    const Tensor weight_handle = w;
    auto make_opt = [&](nn::Module& m) -> std::unique_ptr<optim::Optimizer> {
      if (std::string(opt_name) == "sgd")
        return std::make_unique<optim::SGD>(m.parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
      return std::make_unique<optim::AdamW>(m.parameters(), optim::AdamWOptions{.lr = 0.01});
    };
    auto on = make_opt(nchw), oc = make_opt(cl);
    manual_seed(6);
    const Tensor x = randn({4, 3, 5, 5}), target = randint(0, 4, {4}, {.dtype = kInt64});
    for (int step = 0; step < 3; ++step) {
      for (auto [m, o, in] : {std::tuple{&nchw, on.get(), x}, std::tuple{&cl, oc.get(), x.contiguous(kCL)}}) {
        nn::cross_entropy((*m)(in), target).backward();
        o->step();
        o->zero_grad();
      }
    }
    EXPECT_TRUE(weight_handle.is_same(cl.parameters()[0]));
    EXPECT_TRUE(cl.parameters()[0].is_contiguous(kCL));  // updated in place, not turned back into NCHW
    for (size_t i = 0; i < nchw.parameters().size(); ++i)
      EXPECT_TRUE(close(cl.parameters()[i], nchw.parameters()[i], 1e-5, 1e-4)) << "parameter " << i;
    // the state dict is the same values whatever the layout (it saves logical order)
    const auto a = nchw.state_dict(), b = cl.state_dict();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(close(b[i].second, a[i].second, 1e-5, 1e-4)) << a[i].first;
  }
}

TEST(ChannelsLast, ModuleToBackToContiguous) {
  nn::Conv2d conv(3, 4, 3);
  conv.to(kCL);
  EXPECT_TRUE(conv.parameters()[0].is_contiguous(kCL));
  conv.to(Device::cpu(), MemoryFormat::Contiguous);
  EXPECT_TRUE(conv.parameters()[0].is_contiguous());
}

// ResNet-18, one training step channels-last and one NCHW from the same weights: the same logits and gradients (in
// float64: layer4's BatchNorms see few values per channel here, which would magnify float32 rounding).
TEST(ChannelsLast, ResNet18StepEqualsNchw) {
  auto [nchw, cl] = resnet18_pair(7, kFloat64);
  manual_seed(8);
  const Tensor x = randn({2, 3, 32, 32}, {.dtype = kFloat64}), target = randint(0, 10, {2}, {.dtype = kInt64});
  const Tensor ln = nchw(x), lc = cl(x.contiguous(kCL));
  EXPECT_TRUE(close(lc, ln, 1e-10, 1e-8));
  nn::cross_entropy(ln, target).backward();
  nn::cross_entropy(lc, target).backward();
  const auto pn = nchw.named_parameters(), pc = cl.named_parameters();
  ASSERT_EQ(pn.size(), pc.size());
  int channels_last_grads = 0;
  for (size_t i = 0; i < pn.size(); ++i) {
    SCOPED_TRACE(pn[i].first);
    const Tensor gn = pn[i].second.grad(), gc = pc[i].second.grad();
    ASSERT_TRUE(gc.defined());
    channels_last_grads += gc.suggest_memory_format() == kCL;
    // relative to the gradient's scale: the sums run in other orders
    EXPECT_TRUE(close(gc, gn, 1e-9 * std::max(max_abs(gn), 1e-3), 1e-7));
  }
  EXPECT_GE(channels_last_grads, 17);  // every convolution weight but the 1x1 shortcuts (both layouts at once)
}

// Under bf16 autocast (16-bit convolutions, BatchNorm in bf16 with float32 statistics, the CPU's bf16 GEMM for 1x1
// convolutions): the channels-last logits and gradients agree with NCHW's to bf16's precision.
TEST(ChannelsLast, ResNet18UnderBf16AutocastAgreesWithNchw) {
  auto [nchw, cl] = resnet18_pair(10, kFloat32);
  manual_seed(11);
  const Tensor x = randn({4, 3, 32, 32}), target = randint(0, 10, {4}, {.dtype = kInt64});
  Tensor ln, lc;
  {
    amp::AutocastGuard ac(kBFloat16);
    ln = nchw(x);
    lc = cl(x.contiguous(kCL));
  }
  EXPECT_EQ(lc.dtype(), kBFloat16);
  EXPECT_TRUE(close(lc, ln, 0.05 * max_abs(ln), 0.05));
  nn::cross_entropy(ln, target).backward();
  nn::cross_entropy(lc, target).backward();
  const Tensor gn = nchw.named_parameters()[0].second.grad(), gc = cl.named_parameters()[0].second.grad();  // conv1
  EXPECT_TRUE(gc.is_contiguous(kCL));
  EXPECT_TRUE(close(gc, gn, 0.05 * max_abs(gn), 0.05));
}

// memory::plan runs the same channels-last steps (the CPU's NCHW copies or GEMM view): still the measured peak.
TEST(ChannelsLast, PlanEqualsTheMeasuredPeak) {
  auto step = [] {
    manual_seed(9);
    auto m = std::make_shared<nn::Chain>(nn::Chain{nn::Conv2d(3, 16, 3, {.padding = 1}), nn::BatchNorm2d(16, {.relu = true}),
                                                   nn::Conv2d(16, 32, 1), nn::relu, nn::MaxPool2d(2),
                                                   nn::AdaptiveAvgPool2d({1, 1}), nn::Flatten(), nn::Dense(32, 10)});
    m->to(Device::cpu(), kCL);
    optim::Adam opt(m->parameters(), {.lr = 1e-3});
    const Tensor x = randn({8, 3, 16, 16}).contiguous(kCL), y = randint(0, 10, {8}, {.dtype = kInt64});
    for (int s = 0; s < 2; ++s) {
      nn::cross_entropy((*m)(x), y).backward();
      opt.step();
      opt.zero_grad();
    }
  };
  const memory::Plan plan = memory::plan(Device::cpu(), step);
  const size_t before = cpu_memory_stats().bytes_in_use;
  cpu_reset_peak_memory_stats();
  step();
  const size_t real = cpu_memory_stats().peak_bytes_in_use - before;
  EXPECT_EQ(plan.peak_bytes, real) << plan.peak_where;
  EXPECT_GT(real, size_t{8 * 16 * 16 * 16 * 4});  // at least one [8, 16, 16, 16] activation: the step did run
}
