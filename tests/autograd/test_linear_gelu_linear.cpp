// tests: linear_gelu_linear, the fused MLP (cuBLASLt's epilogues on CUDA; the CPU runs the composed steps): its
// values and five gradients equal the three ops' (float32 and float64, both GELUs, 3-D and bias-free inputs,
// frozen parts), bfloat16 autocast, the refusals of bad inputs, linear's fused weight-and-bias gradient, and the
// models' MLPs: GPT-2's and ViT's run it, and fall back to their layers' calls when a layer has a hook.
// (Gradcheck, gradgradcheck and CUDA-vs-CPU: the op table's linear_gelu_linear_* rows.)
#include <gtest/gtest.h>

#include <ember/ember.h>
#include <ember/models/gpt2.h>

#include "test_util.h"

namespace ember {
namespace {

using test::values;
using TV = std::vector<Tensor>;

Tensor rnd(const Shape& s, uint64_t seed, DType dt) {
  manual_seed(seed);
  return (randn(s, {.dtype = kFloat64}) * 0.5).to(dt).requires_grad_(true);
}
Tensor composite(const TV& in, const GeluOptions& o) {
  return linear(gelu(linear(in[0], in[1], in[2]), o), in[3], in[4]);
}
// The value and the gradients of sum(y * g) with respect to every input that requires grad.
TV value_and_grads(const TV& in, const Tensor& y, const Tensor& g) {
  TV want;
  for (const Tensor& t : in)
    if (t.defined() && t.requires_grad()) want.push_back(t);
  TV out = autograd::grad({sum(y * g)}, want);
  out.insert(out.begin(), y);
  return out;
}
void expect_all_near(const TV& got, const TV& ref, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].shape(), ref[i].shape()) << what << " #" << i;
    ASSERT_EQ(got[i].dtype(), ref[i].dtype()) << what << " #" << i;
    EXPECT_TENSOR_NEAR(got[i], ref[i].shape(), values(ref[i]), tol, tol) << what << " #" << i;
  }
}

TEST(LinearGeluLinear, EqualsTheThreeOpsValuesAndGradients) {
  for (DType dt : {kFloat32, kFloat64})
    for (GeluApproximate form : {GeluApproximate::None, GeluApproximate::Tanh})
      for (bool bias : {true, false}) {
        const TV in{rnd({2, 5, 12}, 1, dt), rnd({16, 12}, 2, dt), bias ? rnd({16}, 3, dt) : Tensor(),
                    rnd({7, 16}, 4, dt), bias ? rnd({7}, 5, dt) : Tensor()};
        const Tensor g = rnd({2, 5, 7}, 6, dt).detach();
        const std::string what = std::string(name(dt)) + (form == GeluApproximate::Tanh ? " tanh" : " exact") +
                                 (bias ? " bias" : " no bias");
        const TV fused =
            value_and_grads(in, linear_gelu_linear(in[0], in[1], in[2], in[3], in[4], {.approximate = form}), g);
        const TV ref = value_and_grads(in, composite(in, {.approximate = form}), g);
        expect_all_near(fused, ref, dt == kFloat32 ? 1e-5 : 1e-12, what);
      }
}

// Only the second layer trains (x and the first layer frozen), or only the first: the gradients asked for come
// back, nothing else is computed.
TEST(LinearGeluLinear, FrozenPartsGetNoGradient) {
  TV in{rnd({6, 8}, 11, kFloat64).detach(), rnd({8, 8}, 12, kFloat64).detach(), rnd({8}, 13, kFloat64).detach(),
        rnd({3, 8}, 14, kFloat64), rnd({3}, 15, kFloat64)};
  const Tensor g = rnd({6, 3}, 16, kFloat64).detach();
  expect_all_near(value_and_grads(in, linear_gelu_linear(in[0], in[1], in[2], in[3], in[4]), g),
                  value_and_grads(in, composite(in, {}), g), 1e-12, "second layer only");
  in = {rnd({6, 8}, 11, kFloat64).detach(), rnd({8, 8}, 12, kFloat64), rnd({8}, 13, kFloat64),
        rnd({3, 8}, 14, kFloat64).detach(), rnd({3}, 15, kFloat64).detach()};
  expect_all_near(value_and_grads(in, linear_gelu_linear(in[0], in[1], in[2], in[3], in[4]), g),
                  value_and_grads(in, composite(in, {}), g), 1e-12, "first layer only");
}

// Under bfloat16 autocast the op runs in bfloat16 (as linear) and matches the three ops under the same autocast
// to bfloat16's precision; the float32 parameters get float32 gradients.
TEST(LinearGeluLinear, RunsInBFloat16UnderAutocast) {
  const TV in{rnd({9, 16}, 21, kFloat32), rnd({24, 16}, 22, kFloat32), rnd({24}, 23, kFloat32),
              rnd({8, 24}, 24, kFloat32), rnd({8}, 25, kFloat32)};
  const Tensor g = rnd({9, 8}, 26, kFloat32).detach();
  TV fused, ref;
  {  // (one autocast region each: a region's casts of the parameters are shared by its ops)
    amp::AutocastGuard ac(kBFloat16);
    const Tensor y = linear_gelu_linear(in[0], in[1], in[2], in[3], in[4], {.approximate = GeluApproximate::Tanh});
    EXPECT_EQ(y.dtype(), kBFloat16);
    fused = value_and_grads(in, y.to(kFloat32), g);
  }
  {
    amp::AutocastGuard ac(kBFloat16);
    ref = value_and_grads(in, composite(in, {.approximate = GeluApproximate::Tanh}).to(kFloat32), g);
  }
  for (size_t i = 1; i < fused.size(); ++i) EXPECT_EQ(fused[i].dtype(), kFloat32);
  expect_all_near(fused, ref, 2e-2, "bf16 autocast");
}

TEST(LinearGeluLinear, RefusesBadInputsNamingTheOp) {
  const Tensor x = randn({4, 6}), w1 = randn({8, 6}), b1 = randn({8}), w2 = randn({3, 8}), b2 = randn({3});
  EXPECT_THROW_MSG(linear_gelu_linear(x, w1, b1, randn({3, 5}), b2), ShapeError, "linear_gelu_linear",
                   "second weight [3, 5]", "8 features");
  EXPECT_THROW_MSG(linear_gelu_linear(randn({4, 5}), w1, b1, w2, b2), ShapeError, "linear_gelu_linear", "[4, 5]",
                   "[8, 6]");
  EXPECT_THROW_MSG(linear_gelu_linear(x, w1, randn({7}), w2, b2), ShapeError, "linear_gelu_linear", "bias [7]");
  EXPECT_THROW_MSG(linear_gelu_linear(x, w1, b1, w2, randn({8})), ShapeError, "linear_gelu_linear", "bias [8]");
  EXPECT_THROW_MSG(linear_gelu_linear(x, w1.to(kFloat64), b1, w2, b2), DTypeError, "linear_gelu_linear", "float64");
  EXPECT_THROW_MSG(linear_gelu_linear(x.to(kInt64), w1.to(kInt64), Tensor(), w2.to(kInt64), Tensor()), DTypeError,
                   "linear_gelu_linear", "int64");
  EXPECT_THROW_MSG(linear_gelu_linear(Tensor(), w1, b1, w2, b2), Error, "linear_gelu_linear");
}

// linear's backward takes the weight and bias gradients from one GEMM (BGradA) unless a create_graph pass needs
// them differentiable: both equal the plain products, and the double-backward still works.
TEST(LinearGeluLinear, LinearWeightAndBiasGradientsFromOneGemm) {
  const Tensor x = rnd({2, 7, 5}, 31, kFloat64), w = rnd({4, 5}, 32, kFloat64), b = rnd({4}, 33, kFloat64);
  const Tensor g = rnd({2, 7, 4}, 34, kFloat64).detach();
  const TV gr = autograd::grad({sum(linear(x, w, b) * g)}, {w, b});
  const Tensor g2 = g.reshape({14, 4}), x2 = x.detach().reshape({14, 5});
  EXPECT_TENSOR_NEAR(gr[0], w.shape(), values(matmul(g2.t(), x2)), 1e-12, 1e-12);
  EXPECT_TENSOR_NEAR(gr[1], b.shape(), values(sum(g2, {0})), 1e-12, 1e-12);
  const TV gg = autograd::grad({sum(linear(x, w, b) * g)}, {w}, {.create_graph = true});
  const TV second = autograd::grad({sum(gg[0] * gg[0])}, {x});  // d/dx |g^T x|^2
  const Tensor gw = matmul(g2.t(), x2);
  EXPECT_TENSOR_NEAR(second[0], x.shape(), values((matmul(g2, gw) * 2).reshape(x.shape())), 1e-10, 1e-10);
}

// Empty widths: no input features (y is the bias) or no outputs; the backward counts its rows itself (a reshape to
// -1 cannot infer them when the width is 0).
TEST(LinearGeluLinear, LinearBackwardWithEmptyWidths) {
  const Tensor x = rnd({3, 0}, 51, kFloat64), w = rnd({4, 0}, 52, kFloat64), b = rnd({4}, 53, kFloat64);
  const TV gr = autograd::grad({sum(linear(x, w, b) * 2.0)}, {x, w, b});
  EXPECT_EQ(gr[0].shape(), Shape({3, 0}));
  EXPECT_EQ(gr[1].shape(), Shape({4, 0}));
  EXPECT_TENSOR_NEAR(gr[2], Shape({4}), (std::vector<double>(4, 6.0)), 0, 0);
  const Tensor x2 = rnd({3, 5}, 54, kFloat64), w2 = rnd({0, 5}, 55, kFloat64), b2 = rnd({0}, 56, kFloat64);
  const TV g2 = autograd::grad({sum(linear(x2, w2, b2))}, {x2, w2, b2});
  EXPECT_TENSOR_NEAR(g2[0], Shape({3, 5}), (std::vector<double>(15, 0.0)), 0, 0);
  EXPECT_EQ(g2[1].shape(), Shape({0, 5}));
  EXPECT_EQ(g2[2].shape(), Shape({0}));
}

// GPT-2's MLP runs the fused op; with a forward hook on c_fc it calls its layers (the hook sees the call) and
// gives the same values.
TEST(LinearGeluLinear, ModelMlpFallsBackToItsLayersWhenTheyHaveHooks) {
  models::GPT2Config c{.vocab_size = 50, .n_positions = 16, .n_embd = 16, .n_layer = 1, .n_head = 2, .dropout = 0};
  models::GPT2MLP mlp(c);
  mlp.to(kFloat64);
  const Tensor x = rnd({2, 3, 16}, 41, kFloat64).detach();
  const Tensor fused = mlp(x);
  nn::Module* fc = nullptr;
  for (auto& [path, m] : mlp.named_modules())
    if (path == "c_fc") fc = m;
  ASSERT_NE(fc, nullptr);
  int calls = 0;
  nn::HookHandle h = fc->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) -> std::optional<Tensor> {
    ++calls;
    return std::nullopt;
  });
  const Tensor layered = mlp(x);
  EXPECT_EQ(calls, 1);
  EXPECT_TENSOR_NEAR(layered, fused.shape(), values(fused), 1e-12, 1e-12);
  h.remove();
  mlp(x);
  EXPECT_EQ(calls, 1);  // the hook is gone: the fused op again
}

}  // namespace
}  // namespace ember
