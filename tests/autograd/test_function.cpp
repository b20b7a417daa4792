// Custom autograd Functions (forward + backward written by the user) and Tensor::register_hook.
#include <gtest/gtest.h>

#include <ember/autograd/function.h>
#include <ember/core/raw_ops.h>

#include "test_util.h"

namespace ember {
namespace {

using autograd::FunctionCtx;

// y = x^3 with its hand-written gradient, differentiable itself.
struct Cube : autograd::Function<Cube> {
  static Tensor forward(FunctionCtx& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x * x;
  }
  static std::vector<Tensor> backward(FunctionCtx& ctx, const std::vector<Tensor>& g) {
    Tensor x = ctx.saved()[0];
    return {g[0] * 3.0 * x * x};
  }
};

// Two inputs, a non-tensor argument kept in ctx.data, two outputs; saves an output.
struct ScaledExpAndProduct : autograd::Function<ScaledExpAndProduct> {
  static std::vector<Tensor> forward(FunctionCtx& ctx, const Tensor& a, double scale, const Tensor& b) {
    Tensor e = exp(a * scale);
    ctx.save_for_backward({e, a, b});
    ctx.data["scale"] = scale;
    return {e, a * b};
  }
  static std::vector<Tensor> backward(FunctionCtx& ctx, const std::vector<Tensor>& g) {
    std::vector<Tensor> s = ctx.saved();
    const double scale = std::any_cast<double>(ctx.data["scale"]);
    Tensor ga, gb;
    if (g[0].defined()) ga = g[0] * s[0] * scale;
    if (g[1].defined()) {
      ga = ga.defined() ? ga + g[1] * s[2] : g[1] * s[2];
      if (ctx.needs_input_grad(1)) gb = g[1] * s[1];
    }
    return {ga, gb};
  }
};

// Straight-through estimator: forward thresholds at 1, backward passes the gradient unchanged.
struct RoundSTE : autograd::Function<RoundSTE> {
  static Tensor forward(FunctionCtx&, const Tensor& x) { return ge(x, 1.0).to(x.dtype()); }
  static std::vector<Tensor> backward(FunctionCtx&, const std::vector<Tensor>& g) { return {g[0]}; }
};

struct WrongShape : autograd::Function<WrongShape> {
  static Tensor forward(FunctionCtx&, const Tensor& x) { return x * 2.0; }
  static std::vector<Tensor> backward(FunctionCtx&, const std::vector<Tensor>& g) { return {sum(g[0])}; }
};
struct WrongCount : autograd::Function<WrongCount> {
  static Tensor forward(FunctionCtx&, const Tensor& x) { return x * 2.0; }
  static std::vector<Tensor> backward(FunctionCtx&, const std::vector<Tensor>& g) { return {g[0], g[0]}; }
};
struct Identity : autograd::Function<Identity> {
  static Tensor forward(FunctionCtx&, const Tensor& x) { return x; }
  static std::vector<Tensor> backward(FunctionCtx&, const std::vector<Tensor>& g) { return {g[0] * 2.0}; }
};

TEST(Function, GradcheckOfCustomFunctions) {
  manual_seed(1);
  Tensor x = randn({3, 4}, {.dtype = kFloat64});
  EXPECT_TRUE(autograd::gradcheck([](const std::vector<Tensor>& in) { return Cube::apply(in[0]); }, {x}));
  // non-contiguous input
  EXPECT_TRUE(autograd::gradcheck([](const std::vector<Tensor>& in) { return Cube::apply(in[0]); }, {x.t()}));
  Tensor a = randn({2, 3}, {.dtype = kFloat64}), b = randn({2, 3}, {.dtype = kFloat64});
  auto f = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> o = ScaledExpAndProduct::apply(in[0], 0.7, in[1]);
    return o[0] * 2.0 + o[1];
  };
  EXPECT_TRUE(autograd::gradcheck(f, {a, b}));
  auto only_first = [](const std::vector<Tensor>& in) { return ScaledExpAndProduct::apply(in[0], 0.7, in[1])[0]; };
  EXPECT_TRUE(autograd::gradcheck(only_first, {a, b}));  // an output no gradient reaches
}

TEST(Function, NodeIsNamedAfterTheClassAndSecondDerivativeWorks) {
  Tensor x = tensor<double>({1.0, -2.0}).requires_grad_(true);
  Tensor y = Cube::apply(x);
  EXPECT_NE(std::string(y.grad_fn_name()).find("Cube"), std::string::npos) << y.grad_fn_name();
  Tensor g = autograd::grad({sum(y)}, {x}, {.create_graph = true})[0];  // 3x^2
  Tensor h = autograd::grad({sum(g)}, {x})[0];                          // 6x
  EXPECT_EQ(test::values(h), (std::vector<double>{6.0, -12.0}));
}

TEST(Function, StraightThroughEstimatorAndInputReturnedAsIs) {
  Tensor x = tensor<float>({0.4f, 1.6f}).requires_grad_(true);
  Tensor y = RoundSTE::apply(x);
  EXPECT_EQ(test::values(y), (std::vector<double>{0.0, 1.0}));
  sum(y * 3.0).backward();
  EXPECT_EQ(test::values(x.grad()), (std::vector<double>{3.0, 3.0}));
  // forward returning its input: the output is a new handle, the input stays a leaf
  Tensor z = tensor<float>({1.0f}).requires_grad_(true);
  Tensor w = Identity::apply(z);
  EXPECT_TRUE(z.is_leaf());
  EXPECT_FALSE(w.is_leaf());
  w.backward();
  EXPECT_EQ(test::values(z.grad()), (std::vector<double>{2.0}));
}

TEST(Function, NoGradientNeededRecordsNothing) {
  Tensor x = tensor<float>({1.0f, 2.0f});
  Tensor y = Cube::apply(x);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(test::values(y), (std::vector<double>{1.0, 8.0}));
}

TEST(Function, BadBackwardResultsAreErrors) {
  Tensor x = tensor<float>({1.0f, 2.0f}).requires_grad_(true);
  EXPECT_THROW_MSG(sum(WrongShape::apply(x)).backward(), ShapeError, "WrongShape", "input 0", "[2]");
  EXPECT_THROW_MSG(sum(WrongCount::apply(x)).backward(), ValueError, "WrongCount", "2 gradients for 1");
}

TEST(Function, SavedTensorModifiedInPlaceIsCaught) {
  Tensor x = tensor<float>({1.0f, 2.0f}).requires_grad_(true);
  Tensor h = x * 1.0;
  Tensor y = Cube::apply(h);
  h.add_(tensor<float>({1.0f, 1.0f}));
  EXPECT_THROW_MSG(sum(y).backward(), Error, "modified by an in-place operation");
}

// --- Tensor::register_hook
TEST(TensorHook, SeesAndReplacesTheGradientOfALeafAndOfAnIntermediate) {
  Tensor x = tensor<float>({1.0f, 2.0f}).requires_grad_(true);
  Tensor h = x * 3.0;
  std::vector<double> seen_h;
  auto hh = h.register_hook([&](const Tensor& g) {
    seen_h = test::values(g);
    return g * 10.0;  // scaled before it flows on to x
  });
  auto hx = x.register_hook([](const Tensor& g) { return g + 1.0; });
  sum(h * h).backward();  // d/dh = 2h = [6, 12]
  EXPECT_EQ(seen_h, (std::vector<double>{6.0, 12.0}));
  EXPECT_EQ(test::values(x.grad()), (std::vector<double>{181.0, 361.0}));  // 10 * 2h * 3 + 1
  // removed hooks no longer run; a hook returning an undefined tensor leaves the gradient as is
  hx.remove();
  hx.remove();  // idempotent
  x.set_grad({});
  int calls = 0;
  auto observe = x.register_hook([&](const Tensor&) {
    ++calls;
    return Tensor();
  });
  sum(x * 2.0).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(test::values(x.grad()), (std::vector<double>{2.0, 2.0}));
}

TEST(TensorHook, AppliesToAutogradGradToo) {
  Tensor x = tensor<float>({1.0f, 2.0f}).requires_grad_(true);
  auto h = x.register_hook([](const Tensor& g) { return g * 0.5; });
  EXPECT_EQ(test::values(autograd::grad({sum(x * 4.0)}, {x})[0]), (std::vector<double>{2.0, 2.0}));
  EXPECT_FALSE(x.grad().defined());  // grad() never touches .grad
}

TEST(TensorHook, BadUse) {
  Tensor c = tensor<float>({1.0f});
  EXPECT_THROW_MSG(c.register_hook([](const Tensor& g) { return g; }), ValueError, "register_hook",
                   "requires_grad is false");
  Tensor x = tensor<float>({1.0f, 2.0f}).requires_grad_(true);
  auto h = x.register_hook([](const Tensor& g) { return sum(g); });  // wrong shape
  EXPECT_THROW_MSG(sum(x * 1.0).backward(), ShapeError, "register_hook", "[2]");
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {
// Saved tensors keep an input's own handle (for double backward) but never an op's own output: that would make
// the output own its node and the node own the output, a cycle no handle could free.
struct SaveOutput : autograd::Function<SaveOutput> {
  static Tensor forward(FunctionCtx& ctx, const Tensor& x) {
    Tensor y = x * 2.0;
    ctx.save_for_backward({x, y});
    return y;
  }
  static std::vector<Tensor> backward(FunctionCtx&, const std::vector<Tensor>& g) { return {g[0] * 2.0}; }
};

TEST(SavedTensors, OwnOutputsAndInPlaceSelvesMakeNoCycles) {
  const int64_t before = autograd::Node::live.load();
  for (bool run_backward : {false, true}) {
    Tensor x = randn({4}).requires_grad_(true);
    Tensor h = x * 2.0;
    h.relu_();                      // saves its own output (self, which required grad when saved)
    Tensor y = exp(h) / (h + 3.0);  // exp and div save their outputs
    Tensor z = SaveOutput::apply(Cube::apply(y));
    if (run_backward) sum(z).backward();
  }
  EXPECT_EQ(autograd::Node::live.load(), before);
  {
    Tensor x = randn({4}).requires_grad_(true);
    Tensor g = autograd::grad({sum(exp(x) * x)}, {x}, {.create_graph = true})[0];
    autograd::grad({sum(g)}, {x});
  }
  EXPECT_EQ(autograd::Node::live.load(), before);
}
}  // namespace
}  // namespace ember

namespace ember {
namespace {
// A backward built of raw kernels: fine once; under create_graph it is caught (or refused when it says so).
struct RawCube : autograd::Function<RawCube> {
  static Tensor forward(FunctionCtx& ctx, const Tensor& x) { return Cube::forward(ctx, x); }
  static std::vector<Tensor> backward(FunctionCtx& ctx, const std::vector<Tensor>& g) {
    Tensor x = ctx.saved()[0];
    return {raw::binary(BinaryOp::Mul, g[0], raw::binary(BinaryOp::Mul, x, x)) * 3.0};
  }
};
struct OnceCubeFn : autograd::Function<OnceCubeFn> {
  static constexpr bool once_differentiable = true;
  static Tensor forward(FunctionCtx& ctx, const Tensor& x) { return RawCube::forward(ctx, x); }
  static std::vector<Tensor> backward(FunctionCtx& ctx, const std::vector<Tensor>& g) {
    return RawCube::backward(ctx, g);
  }
};

TEST(Function, RawBackwardIsCaughtUnderCreateGraph) {
  Tensor x = tensor<double>({1.0, 2.0}).requires_grad_(true);
  EXPECT_EQ(test::values(autograd::grad({sum(RawCube::apply(x))}, {x})[0]), (std::vector<double>{3.0, 12.0}));
  EXPECT_THROW_MSG(autograd::grad({sum(RawCube::apply(x))}, {x}, {.create_graph = true}), Error, "RawCube",
                   "once_differentiable");
  EXPECT_THROW_MSG(autograd::grad({sum(OnceCubeFn::apply(x))}, {x}, {.create_graph = true}), Error, "OnceCubeFn",
                   "not differentiable");
  EXPECT_EQ(test::values(autograd::grad({sum(OnceCubeFn::apply(x))}, {x})[0]), (std::vector<double>{3.0, 12.0}));
}

// An in-place change of a saved input whose new graph reaches back to the saving node must not leak the graph.
TEST(SavedTensors, InPlaceOnASavedInputMakesNoCycle) {
  const int64_t before = autograd::Node::live.load();
  {
    Tensor w = randn({4, 4}).requires_grad_(true);
    Tensor x = randn({2, 4}).requires_grad_(true) * 1.0;
    Tensor y = linear(x, w);  // saves x
    x.add_(y);                // x's new grad_fn reaches linear's node
  }
  EXPECT_EQ(autograd::Node::live.load(), before);
}
}  // namespace
}  // namespace ember
