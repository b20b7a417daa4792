// Module hooks: forward pre-hooks and forward hooks (observe or replace the input / output; run through
// operator(), inside Chains too; removable), and full backward hooks checked against hand-computed gradients.
#include "test_util.h"

using namespace ember;

namespace {

// W = [[1, 2, 3], [4, 5, 6]], b = [0.5, -0.5]: y = x W^T + b.
nn::Dense fixed_dense() {
  nn::Dense d(3, 2);
  NoGradGuard g;
  d.weight().copy_(tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  d.bias().copy_(tensor<float>({0.5f, -0.5f}, {2}));
  return d;
}

// Uses its input twice: y = x * x, so d(loss)/dx = 2 x g.
struct Square : nn::Module {
  Tensor forward(const Tensor& x) override { return x * x; }
};

}  // namespace

TEST(ForwardHooks, PreHookObservesAndReplacesTheInput) {
  nn::Dense d = fixed_dense();
  Tensor x = tensor<float>({1, -1, 2}, {1, 3});
  int calls = 0;
  nn::HookHandle seen = d.register_forward_pre_hook([&](nn::Module& m, const Tensor& in) {
    ++calls;
    EXPECT_NE(dynamic_cast<nn::Dense*>(&m), nullptr);  // the module itself, with its type
    EXPECT_TRUE(in.is_same(x));
  });
  EXPECT_TENSOR_NEAR(d(x), Shape({1, 2}), std::vector<double>({5.5, 10.5}));
  EXPECT_EQ(calls, 1);
  // A returned tensor replaces the input: forward sees 2x.
  nn::HookHandle twice =
      d.register_forward_pre_hook([](nn::Module&, const Tensor& in) -> std::optional<Tensor> { return in * 2.0; });
  EXPECT_TENSOR_NEAR(d(x), Shape({1, 2}), std::vector<double>({10.5, 21.5}));
  EXPECT_EQ(calls, 2);
  twice.remove();
  twice.remove();  // idempotent
  EXPECT_TENSOR_NEAR(d(x), Shape({1, 2}), std::vector<double>({5.5, 10.5}));
  seen.remove();
  d(x);
  EXPECT_EQ(calls, 3);
  // forward() called directly bypasses hooks: they belong to the call, m(x).
  d.register_forward_pre_hook([&](nn::Module&, const Tensor&) { ++calls; });
  d.forward(x);
  EXPECT_EQ(calls, 3);
}

TEST(ForwardHooks, ForwardHookObservesAndReplacesTheOutput) {
  nn::Dense d = fixed_dense();
  Tensor x = tensor<float>({1, -1, 2}, {1, 3});
  std::vector<std::string> order;
  d.register_forward_hook([&](nn::Module&, const Tensor& in, const Tensor& out) {
    order.push_back("first");
    EXPECT_TRUE(in.is_same(x));
    EXPECT_TENSOR_NEAR(out, Shape({1, 2}), std::vector<double>({5.5, 10.5}));
  });
  auto h = d.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) -> std::optional<Tensor> {
    order.push_back("second");
    return out + 1.0;
  });
  std::vector<double> third_saw;
  d.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) -> std::optional<Tensor> {
    order.push_back("third");
    third_saw = test::values(out);
    return std::nullopt;
  });
  EXPECT_TENSOR_NEAR(d(x), Shape({1, 2}), std::vector<double>({6.5, 11.5}));
  EXPECT_EQ(order, (std::vector<std::string>{"first", "second", "third"}));
  EXPECT_EQ(third_saw, (std::vector<double>{6.5, 11.5}));  // a later hook sees the replacement
  h.remove();
  EXPECT_TENSOR_NEAR(d(x), Shape({1, 2}), std::vector<double>({5.5, 10.5}));
}

TEST(ForwardHooks, SharedByHandlesAndRunInsideChains) {
  nn::Chain c{fixed_dense(), nn::relu};
  int calls = 0;
  // Registered through c[0] (a Module&) and through a copy: both are the same module.
  c[0].register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) { ++calls; });
  nn::Module copy = c[1];
  copy.register_forward_pre_hook([&](nn::Module&, const Tensor&) { calls += 10; });
  Tensor y = c(tensor<float>({1, -1, 2}, {1, 3}));
  EXPECT_EQ(calls, 11);
  EXPECT_TENSOR_NEAR(y, Shape({1, 2}), std::vector<double>({5.5, 10.5}));
  // A hook on the Chain itself sees the whole call.
  c.register_forward_hook([](nn::Module&, const Tensor&, const Tensor& out) -> std::optional<Tensor> { return -out; });
  EXPECT_TENSOR_NEAR(c(tensor<float>({1, -1, 2}, {1, 3})), Shape({1, 2}), std::vector<double>({-5.5, -10.5}));
}

TEST(ForwardHooks, AHookMayRemoveItself) {
  nn::Dense d(2, 2);
  int calls = 0;
  auto h = std::make_shared<nn::HookHandle>();
  *h = d.register_forward_hook([&calls, h](nn::Module&, const Tensor&, const Tensor&) {
    ++calls;
    h->remove();
  });
  d(zeros({1, 2}));
  d(zeros({1, 2}));
  EXPECT_EQ(calls, 1);
  EXPECT_THROW_MSG(d.register_forward_hook(nn::ForwardHook()), ValueError, "register_forward_hook", "empty");
  EXPECT_THROW_MSG(d.register_forward_pre_hook(nn::ForwardPreHook()), ValueError, "register_forward_pre_hook");
  EXPECT_THROW_MSG(d.register_full_backward_hook(nn::BackwardHook()), ValueError, "register_full_backward_hook");
  nn::HookHandle none;
  none.remove();  // a default handle removes nothing
}

// d(loss)/dx by hand for loss = sum(y * c), y = x W^T + b, c = [[1, -2]]: grad_output = c, grad_input = c W.
TEST(BackwardHooks, SeesGradInputAndGradOutput) {
  nn::Dense d = fixed_dense();
  int calls = 0;
  std::vector<Tensor> got_in, got_out;
  d.register_full_backward_hook([&](nn::Module& m, const std::vector<Tensor>& gi, const std::vector<Tensor>& go) {
    ++calls;
    // a handle on d's state (d lives on the stack, so the hook gets a Module handle sharing it, not d itself)
    EXPECT_EQ(m.parameters()[0].impl(), d.parameters()[0].impl());
    got_in = gi;
    got_out = go;
  });
  Tensor x = tensor<float>({1, -1, 2}, {1, 3});
  x.requires_grad_();
  Tensor c = tensor<float>({1, -2}, {1, 2});
  Tensor y = d(x);
  EXPECT_TENSOR_NEAR(y, Shape({1, 2}), std::vector<double>({5.5, 10.5}));
  EXPECT_EQ(calls, 0);
  sum(y * c).backward();
  EXPECT_EQ(calls, 1);
  ASSERT_EQ(got_in.size(), 1u);
  ASSERT_EQ(got_out.size(), 1u);
  EXPECT_TENSOR_NEAR(got_out[0], Shape({1, 2}), std::vector<double>({1, -2}));
  EXPECT_TENSOR_NEAR(got_in[0], Shape({1, 3}), std::vector<double>({-7, -8, -9}));
  EXPECT_TENSOR_NEAR(x.grad(), Shape({1, 3}), std::vector<double>({-7, -8, -9}));
  EXPECT_TENSOR_NEAR(d.weight().grad(), Shape({2, 3}), std::vector<double>({1, -1, 2, -2, 2, -4}));
  EXPECT_TENSOR_NEAR(d.bias().grad(), Shape({2}), std::vector<double>({1, -2}));
}

TEST(BackwardHooks, ReturnedGradientReplacesGradInput) {
  nn::Dense d = fixed_dense();
  d.register_full_backward_hook(
      [](nn::Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>&) -> std::optional<std::vector<Tensor>> {
        return std::vector<Tensor>{gi[0] * 3.0};
      });
  Tensor x = tensor<float>({1, -1, 2}, {1, 3});
  x.requires_grad_();
  sum(d(x) * tensor<float>({1, -2}, {1, 2})).backward();
  EXPECT_TENSOR_NEAR(x.grad(), Shape({1, 3}), std::vector<double>({-21, -24, -27}));
  // The parameters' gradients are not the hook's business.
  EXPECT_TENSOR_NEAR(d.weight().grad(), Shape({2, 3}), std::vector<double>({1, -1, 2, -2, 2, -4}));
}

TEST(BackwardHooks, InputWithoutGradRunsWhenGradOutputArrives) {
  nn::Dense d = fixed_dense();
  int calls = 0;
  d.register_full_backward_hook([&](nn::Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>& go) {
    ++calls;
    ASSERT_EQ(gi.size(), 1u);
    EXPECT_FALSE(gi[0].defined());
    EXPECT_TENSOR_NEAR(go[0], Shape({1, 2}), std::vector<double>({1, -2}));
  });
  Tensor x = tensor<float>({1, -1, 2}, {1, 3});  // no grad
  sum(d(x) * tensor<float>({1, -2}, {1, 2})).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_TENSOR_NEAR(d.weight().grad(), Shape({2, 3}), std::vector<double>({1, -1, 2, -2, 2, -4}));

  // There is no grad_input to replace: returning one is an error.
  nn::Dense e = fixed_dense();
  e.register_full_backward_hook(
      [](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>& go) -> std::optional<std::vector<Tensor>> {
        return std::vector<Tensor>{go[0]};
      });
  EXPECT_THROW_MSG(sum(e(x)).backward(), ValueError, "register_full_backward_hook", "Dense", "does not require grad");
}

TEST(BackwardHooks, OncePerPassWithSummedGradient) {
  Square sq;
  int calls = 0;
  std::vector<double> gin;
  sq.register_full_backward_hook([&](nn::Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>& go) {
    ++calls;
    gin = test::values(gi[0]);
    EXPECT_EQ(test::values(go[0]), (std::vector<double>{1, 1, 1}));
  });
  Tensor x = tensor<double>({1, -2, 3}, {3});
  x.requires_grad_();
  Tensor loss = sum(sq(x));
  loss.backward({}, /*retain_graph=*/true);
  EXPECT_EQ(calls, 1);  // x is used twice inside: one call, the gradients summed
  EXPECT_EQ(gin, (std::vector<double>{2, -4, 6}));
  loss.backward();
  EXPECT_EQ(calls, 2);  // a second pass through the same call
  EXPECT_TENSOR_NEAR(x.grad(), Shape({3}), std::vector<double>({4, -8, 12}));
}

TEST(BackwardHooks, InsideAChainOnTheInnerModule) {
  // c = [A, B], both fixed_dense-like; the hook on B sees d(loss)/d(A's output) = g W_B.
  nn::Dense a(2, 3);
  {
    NoGradGuard g;
    a.weight().copy_(tensor<float>({1, 0, 0, 1, 1, 1}, {3, 2}));
    a.bias().zero_();
  }
  nn::Chain c{a, fixed_dense()};
  std::vector<double> gin, gout;
  c[1].register_full_backward_hook([&](nn::Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>& go) {
    gin = test::values(gi[0]);
    gout = test::values(go[0]);
  });
  Tensor x = tensor<float>({2, 3}, {1, 2});  // A's input needs no grad; A's output does (A's parameters)
  sum(c(x) * tensor<float>({1, -2}, {1, 2})).backward();
  EXPECT_EQ(gout, (std::vector<double>{1, -2}));
  EXPECT_EQ(gin, (std::vector<double>{-7, -8, -9}));
  // dL/dW_A = (g W_B)^T x
  EXPECT_TENSOR_NEAR(a.weight().grad(), Shape({3, 2}), std::vector<double>({-14, -21, -16, -24, -18, -27}));
}

TEST(BackwardHooks, RemovedOrNoGradMeansNoCallAndNoExtraNode) {
  nn::Dense d = fixed_dense();
  Tensor x = tensor<float>({1, -1, 2}, {1, 3});
  x.requires_grad_();
  EXPECT_NE(d(x).grad_fn_name(), "ModuleBackwardHook");  // no hook: no node of ours
  int calls = 0;
  auto h = d.register_full_backward_hook(
      [&](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) { ++calls; });
  Tensor y = d(x);
  EXPECT_EQ(y.grad_fn_name(), "ModuleBackwardHook");
  {
    NoGradGuard g;
    EXPECT_FALSE(d(x).requires_grad());
  }
  h.remove();
  sum(y).backward();  // armed before the removal: removed hooks do not run
  EXPECT_EQ(calls, 0);
  EXPECT_TENSOR_NEAR(x.grad(), Shape({1, 3}), std::vector<double>({5, 7, 9}));
}

TEST(BackwardHooks, TheGraphIsFreedAfterwards) {
  nn::Chain c{fixed_dense(), nn::relu, nn::Dense(2, 2)};
  for (nn::Module* m : c.modules())
    m->register_full_backward_hook([](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) {});
  const int64_t before = autograd::Node::live.load();
  {
    Tensor x = tensor<float>({1, -1, 2}, {1, 3});
    x.requires_grad_();
    sum(c(x)).backward();
  }
  EXPECT_EQ(autograd::Node::live.load(), before);  // the hook nodes hold no cycle
}

TEST(BackwardHooks, BadReplacementsThrow) {
  Tensor x = tensor<float>({1, -1, 2}, {1, 3});
  x.requires_grad_();
  nn::Dense two = fixed_dense();
  two.register_full_backward_hook(
      [](nn::Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>&) -> std::optional<std::vector<Tensor>> {
        return std::vector<Tensor>{gi[0], gi[0]};
      });
  EXPECT_THROW_MSG(sum(two(x)).backward(), ValueError, "Dense", "2 gradients for 1 input");
  nn::Dense shape = fixed_dense();
  shape.register_full_backward_hook(
      [](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) -> std::optional<std::vector<Tensor>> {
        return std::vector<Tensor>{zeros({3})};
      });
  EXPECT_THROW_MSG(sum(shape(x)).backward(), ShapeError, "Dense", "[3]", "[1, 3]");
  nn::Dense dtype = fixed_dense();
  dtype.register_full_backward_hook(
      [](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) -> std::optional<std::vector<Tensor>> {
        return std::vector<Tensor>{zeros({1, 3}, {.dtype = kFloat64})};
      });
  EXPECT_THROW_MSG(sum(dtype(x)).backward(), DTypeError, "Dense", "float64");
}

TEST(BackwardHooks, InPlaceChangeOfTheInputInsideForwardIsRefused) {
  struct ReluInPlace : nn::Module {
    Tensor forward(const Tensor& x) override {
      Tensor h = x;
      return h.relu_();
    }
  } m;
  Tensor leaf = tensor<float>({-1, 2}, {2});
  leaf.requires_grad_();
  Tensor y = leaf * 1.0f;  // not a leaf: in place is fine without a hook
  EXPECT_NO_THROW(m(y));
  m.register_full_backward_hook([](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) {});
  Tensor z = leaf * 1.0f;
  EXPECT_THROW_MSG(m(z), Error, "relu_", "view");
  EXPECT_EQ(test::values(z), (std::vector<double>{-1, 2}));  // the caller's tensor is untouched
}

TEST(BackwardHooks, WithForwardHookReplacingTheOutput) {
  // The backward hook is armed on the final output: grad_output is w.r.t. what the caller got.
  nn::Dense d = fixed_dense();
  d.register_forward_hook(
      [](nn::Module&, const Tensor&, const Tensor& out) -> std::optional<Tensor> { return out * 2.0; });
  std::vector<double> gin, gout;
  d.register_full_backward_hook([&](nn::Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>& go) {
    gin = test::values(gi[0]);
    gout = test::values(go[0]);
  });
  Tensor x = tensor<float>({1, -1, 2}, {1, 3});
  x.requires_grad_();
  sum(d(x) * tensor<float>({1, -2}, {1, 2})).backward();
  EXPECT_EQ(gout, (std::vector<double>{1, -2}));
  EXPECT_EQ(gin, (std::vector<double>{-14, -16, -18}));
}

// A module on the stack called, then gone before backward: the hook still gets a valid handle on its state.
TEST(BackwardHooks, ModuleGoneBeforeBackwardStillGetsAValidHandle) {
  Tensor x = tensor<float>({1, -1, 2}, {1, 3}).requires_grad_(true);
  Tensor y;
  int64_t seen_params = -1;
  {
    nn::Dense d = fixed_dense();
    d.register_full_backward_hook(
        [&](nn::Module& m, const std::vector<Tensor>&, const std::vector<Tensor>&) { seen_params = m.num_parameters(); });
    y = d(x);
  }
  sum(y).backward();
  EXPECT_EQ(seen_params, 8);  // 2x3 weight + 2 bias, read through the surviving handle
}
