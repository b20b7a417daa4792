// nn::Module: handle semantics (copies share parameters), dotted names for Chains and nested user modules,
// registration rules, train/eval propagation, zero_grad, freezing, in-place dtype/device conversion,
// Flux-like printing and the errors users see.
#include <sstream>

#include "module_test_util.h"

using namespace ember;

namespace {

using test::names;
using test::Net;

// A module holding a Chain and a BatchNorm, to check nested names ("block.0.weight") and propagation.
struct Outer : nn::Module {
  nn::Dense fc1{4, 6};
  nn::Chain block{nn::Dense(6, 5, nn::tanh), nn::relu, nn::Dropout(0.5), nn::Dense(5, 2)};
  nn::BatchNorm1d bn{2};
  Outer() {
    register_module("fc1", fc1);
    register_module("block", block);
    register_module("bn", bn);
  }
  Tensor forward(const Tensor& x) override { return bn(block(fc1(x))); }
};

// Exposes the protected registration calls so tests can misuse them.
struct Raw : nn::Module {
  using nn::Module::register_buffer;
  using nn::Module::register_module;
  using nn::Module::register_parameter;
};

}  // namespace

TEST(Module, CopiesShareParameters) {
  manual_seed(1);
  nn::Dense d(3, 2);
  nn::Dense copy = d;
  {
    NoGradGuard g;
    copy.weight().fill_(0.5);
    copy.bias().zero_();
  }
  EXPECT_TENSOR_NEAR(d.weight(), Shape({2, 3}), std::vector<double>(6, 0.5), 0);
  EXPECT_TENSOR_NEAR(d.bias(), Shape({2}), std::vector<double>(2, 0.0), 0);
  ASSERT_EQ(d.parameters().size(), 2u);
  EXPECT_TRUE(d.parameters()[0].is_same(copy.parameters()[0]));
  // A base-class copy is a handle too.
  nn::Module base = d;
  EXPECT_TRUE(base.parameters()[1].is_same(d.bias()));
  copy.eval();
  EXPECT_FALSE(d.is_training());
}

TEST(Module, ChainNamesCountActivations) {
  nn::Chain c{nn::Dense(4, 3, nn::relu), nn::relu, nn::Dense(3, 2), nn::Flatten(),
              nn::Dense(2, 1, nn::identity, {.bias = false})};
  EXPECT_EQ(names(c.named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight"}));
  EXPECT_EQ(c.parameters().size(), 5u);
  EXPECT_EQ(c.size(), 5u);
  EXPECT_EQ(names(c.named_children()), (std::vector<std::string>{"0", "1", "2", "3", "4"}));
  EXPECT_TRUE(c.named_buffers().empty());
  // Runs end to end.
  Tensor y = c(randn({7, 4}));
  EXPECT_EQ(y.shape(), Shape({7, 1}));
}

TEST(Module, NestedUserModuleNames) {
  Net net;
  EXPECT_EQ(names(net.named_parameters()),
            (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(names(net.named_buffers()), (std::vector<std::string>{"count"}));
  EXPECT_EQ(names(net.state_dict()),
            (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "count"}));
  EXPECT_TRUE(net.named_parameters()[1].second.is_same(net.fc1.weight()));
  EXPECT_TRUE(net.scale.requires_grad());
  EXPECT_FALSE(net.count.requires_grad());
  EXPECT_EQ(net(randn({5, 3, 4})).shape(), Shape({5, 3}));

  Outer o;
  EXPECT_EQ(names(o.named_parameters()),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "block.0.weight", "block.0.bias", "block.3.weight",
                                      "block.3.bias", "bn.weight", "bn.bias"}));
  EXPECT_EQ(names(o.named_buffers()),
            (std::vector<std::string>{"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}));

  // A user module inside a Chain keeps its type (its forward) and gets a prefix.
  nn::Chain c{Net(), nn::Dense(3, 2)};
  EXPECT_EQ(names(c.named_parameters())[1], "0.fc1.weight");
  EXPECT_EQ(c(randn({2, 12})).shape(), Shape({2, 2}));
}

TEST(Module, SharedSubmoduleIsListedOnce) {
  // Weight tying: the same Dense twice. parameters() lists each tensor once (an optimiser must not step
  // it twice), as PyTorch does; the state_dict keeps every name.
  nn::Dense d(3, 3);
  nn::Chain c{d, nn::tanh, d};
  EXPECT_EQ(c.parameters().size(), 2u);
  EXPECT_EQ(names(c.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
  EXPECT_EQ(c.state_dict().size(), 4u);
}

TEST(Module, TrainEvalPropagate) {
  Outer o;
  EXPECT_TRUE(o.is_training());
  EXPECT_TRUE(o.block[2].is_training());
  o.eval();
  EXPECT_FALSE(o.is_training());
  EXPECT_FALSE(o.fc1.is_training());
  EXPECT_FALSE(o.block.is_training());
  EXPECT_FALSE(o.block[2].is_training());  // the Dropout inside the nested Chain
  EXPECT_FALSE(o.bn.is_training());
  // In eval, Dropout is the identity and BatchNorm uses its running stats: two calls agree.
  Tensor x = randn({4, 4});
  EXPECT_EQ(test::values(o(x)), test::values(o(x)));
  EXPECT_EQ(o.bn.named_buffers()[2].second.item<int64_t>(), 0);
  o.train();
  EXPECT_TRUE(o.block[2].is_training());
  EXPECT_TRUE(o.bn.is_training());
  o(x);
  EXPECT_EQ(o.bn.named_buffers()[2].second.item<int64_t>(), 1);
  o.train(false);
  EXPECT_FALSE(o.bn.is_training());
}

TEST(Module, ZeroGrad) {
  manual_seed(2);
  Net net;
  sum(net(randn({2, 12}))).backward();
  for (const auto& [n, p] : net.named_parameters()) EXPECT_TRUE(p.grad().defined()) << n;
  net.zero_grad();
  for (const auto& [n, p] : net.named_parameters()) EXPECT_FALSE(p.grad().defined()) << n;
}

TEST(Module, RequiresGradFreezes) {
  Net net;
  net.requires_grad_(false);
  for (const Tensor& p : net.parameters()) EXPECT_FALSE(p.requires_grad());
  Tensor y = net(randn({2, 12}));
  EXPECT_FALSE(y.requires_grad());
  // Freezing one child only.
  net.requires_grad_(true);
  net.fc1.requires_grad_(false);
  Tensor x = randn({2, 12});
  sum(net(x)).backward();
  EXPECT_FALSE(net.fc1.weight().grad().defined());
  EXPECT_TRUE(net.fc2.weight().grad().defined());
  EXPECT_TRUE(net.scale.grad().defined());
}

TEST(Module, ToDTypeConvertsInPlace) {
  manual_seed(3);
  Outer o;
  std::vector<Tensor> params = o.parameters();  // e.g. an optimiser's list
  std::vector<std::vector<double>> before;
  for (const Tensor& p : params) before.push_back(test::values(p));
  sum(o(randn({4, 4}))).backward();
  nn::Module& r = o.to(kFloat64);
  EXPECT_EQ(&r, &o);
  std::vector<Tensor> now = o.parameters();
  ASSERT_EQ(now.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].dtype(), kFloat64);
    EXPECT_TRUE(params[i].is_same(now[i]));
    EXPECT_TRUE(params[i].requires_grad());
    EXPECT_FALSE(params[i].grad().defined());                        // gradients are dropped
    EXPECT_TENSOR_NEAR(params[i], now[i].shape(), before[i], 0, 0);  // float32 -> float64 is exact
  }
  auto bufs = o.named_buffers();
  EXPECT_EQ(bufs[0].second.dtype(), kFloat64);
  EXPECT_EQ(bufs[2].second.dtype(), kInt64);       // the counter keeps its integer type
  EXPECT_TRUE(o.fc1.weight().is_same(params[0]));  // the layer's own handle follows too
  Tensor y = o(randn({4, 4}, {.dtype = kFloat64}));
  EXPECT_EQ(y.dtype(), kFloat64);
  sum(y).backward();
  EXPECT_EQ(params[0].grad().dtype(), kFloat64);
  o.to(kFloat32);
  EXPECT_EQ(params[0].dtype(), kFloat32);
}

TEST(Module, ToCudaWithoutAGpuThrows) {
  if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is present";
  nn::Dense d(3, 2);
  EXPECT_THROW(d.to(Device::cuda()), DeviceError);
  // Nothing moved.
  for (const Tensor& p : d.parameters()) EXPECT_TRUE(p.device().is_cpu());
  d.to(Device::cpu());
  EXPECT_EQ(d(randn({1, 3})).shape(), Shape({1, 2}));
}

TEST(Module, ToCudaAndBack) {
  EMBER_SKIP_IF_NO_CUDA();
  manual_seed(4);
  nn::Chain c{nn::Dense(5, 4, nn::relu), nn::BatchNorm1d(4), nn::Dense(4, 2)};
  std::vector<Tensor> params = c.parameters();
  Tensor x = randn({6, 5});
  c.eval();
  std::vector<double> ref = test::values(c(x));
  c.to(Device::cuda());
  for (const Tensor& p : params) EXPECT_TRUE(p.device().is_cuda());
  for (const Tensor& b : c.buffers()) EXPECT_TRUE(b.device().is_cuda());
  EXPECT_TENSOR_NEAR(c(x.cuda()), Shape({6, 2}), ref, 1e-5, 1e-4);
  c.to(Device::cpu());
  EXPECT_TRUE(params[0].device().is_cpu());
}

TEST(Module, PrintsLikeFlux) {
  nn::Chain model{nn::Flatten(), nn::Dense(784, 128, nn::relu), nn::Dense(128, 10)};
  std::ostringstream os;
  os << model;
  // The top level carries the parameter count, as Flux's (784*128 + 128 + 128*10 + 10).
  EXPECT_EQ(os.str(), "Chain(\n  Flatten(),\n  Dense(784 => 128, relu),\n  Dense(128 => 10),\n)  # 101_770 parameters");

  nn::Chain nested{nn::Chain{nn::Dense(2, 3, nn::tanh), nn::relu}, nn::Dense(3, 1, nn::sigmoid, {.bias = false})};
  EXPECT_EQ(nested.repr(),
            "Chain(\n  Chain(\n    Dense(2 => 3, tanh),\n    relu,\n  ),\n  Dense(3 => 1, sigmoid; bias=false),\n)");
  EXPECT_EQ(nn::Chain().repr(), "Chain()");
  EXPECT_EQ(nn::Conv2d(1, 8, 3, {.stride = 2, .padding = 1}).repr(), "Conv2d(1 => 8, 3x3, stride=2, padding=1)");
  EXPECT_EQ(nn::MaxPool2d(2).repr(), "MaxPool2d(2)");
  EXPECT_EQ(nn::Dropout(0.25).repr(), "Dropout(0.25)");
  EXPECT_EQ(nn::BatchNorm2d(16).repr(), "BatchNorm2d(16)");
  EXPECT_EQ(nn::Embedding(10, 4).repr(), "Embedding(10 => 4)");
}

TEST(Module, BadAndDuplicateNamesThrow) {
  Raw m;
  EXPECT_THROW_MSG(m.register_parameter("", zeros({2})), ValueError, "register_parameter", "non-empty");
  EXPECT_THROW_MSG(m.register_parameter("a.b", zeros({2})), ValueError, "a.b");
  EXPECT_THROW_MSG(m.register_buffer("x.y", zeros({2})), ValueError, "x.y");
  EXPECT_THROW_MSG(m.register_module("", nn::Dense(1, 1)), ValueError, "register_module");
  EXPECT_THROW_MSG(m.register_module("fc.1", nn::Dense(1, 1)), ValueError, "fc.1");

  m.register_parameter("w", zeros({2}));
  EXPECT_THROW_MSG(m.register_parameter("w", zeros({2})), ValueError, "\"w\"", "already");
  m.register_buffer("stat", zeros({2}));
  EXPECT_THROW_MSG(m.register_buffer("stat", zeros({2})), ValueError, "\"stat\"", "already");
  m.register_module("fc", nn::Dense(2, 2));
  EXPECT_THROW_MSG(m.register_module("fc", nn::Dense(2, 2)), ValueError, "\"fc\"", "already");
  // One namespace for parameters, buffers and children, as state_dict names must be unique.
  EXPECT_THROW_MSG(m.register_buffer("w", zeros({2})), ValueError, "\"w\"", "already");
  EXPECT_THROW_MSG(m.register_parameter("fc", zeros({2})), ValueError, "\"fc\"", "already");
  EXPECT_THROW_MSG(m.register_module("stat", nn::Dense(2, 2)), ValueError, "\"stat\"", "already");
  EXPECT_EQ(names(m.state_dict()), (std::vector<std::string>{"w", "fc.weight", "fc.bias", "stat"}));
}

TEST(Module, ChainIndexAndPushBack) {
  nn::Chain c{nn::Dense(3, 4), nn::relu};
  EXPECT_EQ(c[0].repr(), "Dense(3 => 4)");
  EXPECT_EQ(c[1].repr(), "relu");
  EXPECT_THROW_MSG(c[2], IndexError, "Chain", "2");
  EXPECT_THROW(c[100], IndexError);

  // push_back through one handle is seen through every other handle (copies share their state).
  nn::Chain alias = c;
  alias.push_back(nn::Dense(4, 2));
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2].repr(), "Dense(4 => 2)");
  EXPECT_EQ(c(randn({5, 3})).shape(), Shape({5, 2}));
  c.push_back(nn::sigmoid);
  EXPECT_EQ(alias.size(), 4u);
  EXPECT_EQ(names(alias.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  Tensor y = alias(randn({5, 3}));
  for (double v : test::values(y)) EXPECT_TRUE(v > 0 && v < 1);  // the sigmoid pushed through `c` ran
}

TEST(Module, BareModuleForwardThrows) {
  nn::Module m;
  EXPECT_THROW_MSG(m(zeros({2})), Error, "forward");
  Raw r;
  EXPECT_THROW_MSG(r(zeros({2})), Error, "forward");
  EXPECT_EQ(m.repr(), "Module()");
}

TEST(Module, LambdaAndCustomActivationInChain) {
  nn::Chain c{nn::Lambda([](const Tensor& x) { return x * 2.0; }, "double"), nn::gelu};
  EXPECT_EQ(c.repr(), "Chain(\n  double,\n  gelu,\n)");
  Tensor x = tensor<float>({-1, 0, 1}, {3});
  std::vector<double> ref;
  for (double v : test::values(x)) ref.push_back(v * std::erfc(-v * 2 / std::sqrt(2.0)));  // gelu(2v) = 2v * Phi(2v)
  EXPECT_TENSOR_NEAR(c(x), Shape({3}), ref, 1e-6);
  EXPECT_TRUE(c.parameters().empty());
}

// relu followed by MaxPool2d in a Chain runs as the pool first, then relu (relu's output is what the chain returns),
// with the values and gradients of max_pool2d(relu(x)): inputs from {-1, -0.5, 0, 0.5, 1} give windows
// with tied positive maxima, zeros and only negative values, pooled in 2 x 2 windows and in overlapping 3 x 3 ones
// of stride 1 (a shared argmax gathers several gradients), in float64 and float32. With a hook on either member,
// the members run in their written order: the relu hook sees the unpooled input and the result comes from the
// pool (a swap that ignores hooks fails this part).
TEST(Module, ChainRunsReluThenMaxPoolAsPoolThenRelu) {
  for (DType dt : {kFloat64, kFloat32})
    for (int64_t k : {2, 3}) {
      manual_seed(3);
      const Tensor x0 = (randint(-2, 3, {2, 3, 7, 7}) / 2.0).to(dt);
      const int64_t s = k == 2 ? 2 : 1;
      nn::Chain c{nn::relu, nn::MaxPool2d(k, s)};
      Tensor x = x0.detach().requires_grad_(true), xr = x0.detach().requires_grad_(true);
      Tensor y = c(x);
      const Tensor ref = max_pool2d(relu(xr), {k}, {s});
      EXPECT_EQ(y.grad_fn_name(), "relu");
      ASSERT_EQ(y.shape(), ref.shape());
      EXPECT_EQ(test::values(y), test::values(ref)) << dt << " k " << k;
      const Tensor w = randn(y.shape(), {.dtype = dt});
      sum(y * w).backward();
      sum(ref * w).backward();
      EXPECT_EQ(test::values(x.grad()), test::values(xr.grad())) << dt << " k " << k;
    }
  const Tensor x = randn({1, 2, 4, 4}).requires_grad_(true);
  for (int hooked = 0; hooked < 3; ++hooked) {  // a forward hook on relu, a pre-hook or a backward hook on the pool
    nn::Chain c{nn::relu, nn::MaxPool2d(2)};
    Shape seen;
    if (hooked == 0)
      c[0].register_forward_hook([&](nn::Module&, const Tensor& in, const Tensor&) { seen = in.shape(); });
    if (hooked == 1) c[1].register_forward_pre_hook([&](nn::Module&, const Tensor& in) { seen = in.shape(); });
    if (hooked == 2)
      c[1].register_full_backward_hook([](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) {});
    const Tensor y = c(x);
    if (hooked < 2) EXPECT_EQ(seen, Shape({1, 2, 4, 4})) << hooked;
    EXPECT_NE(std::string(y.grad_fn_name()), "relu") << hooked;
    EXPECT_EQ(test::values(y), test::values(max_pool2d(relu(x), {2}, {2}))) << hooked;
  }
}

// A layer reached through chain[i] (a Module&) keeps its type when put into another Chain or registered as a
// child: the new container shares the same layer instead of a sliced-down bare Module.
TEST(Module, ReusingChainElementsKeepsTheirType) {
  manual_seed(5);
  nn::Chain a{nn::Dense(4, 3, nn::relu), nn::Dense(3, 2)};
  nn::Chain b{a[0], a[1]};
  Tensor x = randn({5, 4});
  EXPECT_TENSOR_NEAR(b(x), Shape({5, 2}), test::values(a(x)), 1e-6);
  ASSERT_EQ(b.parameters().size(), 4u);
  EXPECT_EQ(b.parameters()[0].data_ptr(), a.parameters()[0].data_ptr());  // shared, not copied
  EXPECT_EQ(b[0].repr(), "Dense(4 => 3, relu)");
}
