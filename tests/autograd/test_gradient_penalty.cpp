// tests: gradient penalties against PyTorch's numbers — a WGAN-GP critic step with a convolutional critic (conv2d,
// leaky_relu, avg_pool2d, layer_norm, max_pool2d, linear) and a penalty through a transformer block (layer_norm,
// causal attention, gelu, linear), in float64. The penalty differentiates the critic's gradient, so every one of
// these ops runs its double backward. Parameters and inputs come from a formula both sides evaluate; the reference
// is tests/tools/gradient_penalty_reference.py (PyTorch 1.13, Debian's python3-torch): the loss, and per parameter
// the gradient's sum and sum of squares, to 1e-4 relative (absolute 1e-12 for those that are 0).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "test_util.h"

namespace ember {
namespace {

Tensor fill(const Shape& shape, double seed, double scale) {
  std::vector<double> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    const double k = static_cast<double>(i);
    v[i] = scale * std::sin(1.3 * k + seed) * std::cos(0.7 * k + 2.0 * seed);
  }
  return tensor(v, shape, {.dtype = kFloat64});
}
Tensor param(const Shape& shape, double seed, double scale) { return fill(shape, seed, scale).requires_grad_(true); }

// ((|grad of sum(d) w.r.t. x| per sample) - 1)^2, averaged: WGAN-GP's penalty.
Tensor penalty(const Tensor& d, const Tensor& x) {
  const Tensor g = autograd::grad({sum(d)}, {x}, {.create_graph = true})[0];
  return mean(square(norm(g.flatten(1), 2, {1}) - 1.0));
}

struct Reference {
  double loss;
  std::map<std::string, std::pair<double, double>> grads;  // name -> (sum, sum of squares)
};

void expect_matches(const std::string& what, const Tensor& loss, const std::map<std::string, Tensor>& params,
                    const Reference& ref) {
  auto near = [](double got, double want) { return std::fabs(got - want) <= 1e-4 * std::fabs(want) + 1e-12; };
  EXPECT_TRUE(near(test::values(loss)[0], ref.loss)) << what << " loss " << test::values(loss)[0] << " vs " << ref.loss;
  for (const auto& [name, want] : ref.grads) {
    const Tensor& g = params.at(name).grad();
    ASSERT_TRUE(g.defined()) << what << " " << name << " got no gradient";
    const double s = test::values(sum(g))[0], sq = test::values(sum(square(g)))[0];
    EXPECT_TRUE(near(s, want.first)) << what << " " << name << " sum " << s << " vs " << want.first;
    EXPECT_TRUE(near(sq, want.second)) << what << " " << name << " sum of squares " << sq << " vs " << want.second;
  }
}

TEST(GradientPenalty, WganGpStepWithAConvCriticMatchesPyTorch) {
  std::map<std::string, Tensor> p = {{"w1", param({6, 2, 3, 3}, 1.0, 0.3)}, {"b1", param({6}, 2.0, 0.1)},
                                     {"w2", param({8, 6, 3, 3}, 3.0, 0.2)}, {"b2", param({8}, 4.0, 0.1)},
                                     {"ln_w", param({8, 4, 4}, 5.0, 0.5)},  {"ln_b", param({8, 4, 4}, 6.0, 0.1)},
                                     {"wo", param({1, 32}, 7.0, 0.3)},      {"bo", param({1}, 8.0, 0.1)}};
  auto critic = [&p](const Tensor& x) {
    Tensor h = avg_pool2d(leaky_relu(conv2d(x, p["w1"], p["b1"], {1}, {1}), 0.2), {2});
    h = conv2d(h, p["w2"], p["b2"], {1}, {1});
    h = leaky_relu(layer_norm(h, {8, 4, 4}, p["ln_w"], p["ln_b"]), 0.2);
    h = max_pool2d(h, {2});
    return linear(h.flatten(1), p["wo"], p["bo"]);
  };
  const Tensor real = fill({4, 2, 8, 8}, 11.0, 1.0), fake = fill({4, 2, 8, 8}, 12.0, 1.0);
  const Tensor eps = fill({4, 1, 1, 1}, 13.0, 0.5) + 0.5;
  const Tensor x_hat = (eps * real + (1 - eps) * fake).requires_grad_(true);
  const Tensor loss = mean(critic(fake)) - mean(critic(real)) + 10.0 * penalty(critic(x_hat), x_hat);
  loss.backward();
  // tests/tools/gradient_penalty_reference.py, PyTorch 1.13
  const Reference ref{5.141184347189288,
                      {{"w1", {-7.5646446064249995, 71.875877776383632}},
                       {"b1", {5.8911624546909742, 92.167581801241028}},
                       {"w2", {-1.4444841490228377, 194.95843565400992}},
                       {"b2", {0, 314.53192314578473}},
                       {"ln_w", {3.6315484664091375, 15.692935911059568}},
                       {"ln_b", {0.022312178300178315, 0.016138134156965675}},
                       {"wo", {0.94860184427632444, 58.976330114552638}},
                       {"bo", {0, 0}}}};
  expect_matches("conv critic", loss, p, ref);
}

TEST(GradientPenalty, PenaltyThroughATransformerBlockMatchesPyTorch) {
  const int64_t d = 8, heads = 2, hidden = 16;
  std::map<std::string, Tensor> p = {
      {"ln1_w", param({d}, 1.5, 0.5)},    {"ln1_b", param({d}, 2.5, 0.1)},       {"wq", param({d, d}, 3.5, 0.4)},
      {"wk", param({d, d}, 4.5, 0.4)},    {"wv", param({d, d}, 5.5, 0.4)},       {"wo", param({d, d}, 6.5, 0.4)},
      {"ln2_w", param({d}, 7.5, 0.5)},    {"ln2_b", param({d}, 8.5, 0.1)},       {"w1", param({hidden, d}, 9.5, 0.4)},
      {"c1", param({hidden}, 10.5, 0.1)}, {"w2", param({d, hidden}, 11.5, 0.3)}, {"c2", param({d}, 12.5, 0.1)},
      {"wout", param({1, d}, 13.5, 0.5)}};
  auto block = [&](const Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1);
    const Tensor h = layer_norm(x, {d}, p["ln1_w"], p["ln1_b"]);
    auto split = [&](const Tensor& m) { return m.reshape({b, t, heads, d / heads}).transpose(1, 2); };
    const Tensor q = split(matmul(h, p["wq"].t())), k = split(matmul(h, p["wk"].t())),
                 v = split(matmul(h, p["wv"].t()));
    const Tensor a =
        matmul(scaled_dot_product_attention(q, k, v, {.causal = true}).transpose(1, 2).reshape({b, t, d}), p["wo"].t());
    const Tensor x2 = x + a;
    const Tensor m =
        linear(gelu(linear(layer_norm(x2, {d}, p["ln2_w"], p["ln2_b"]), p["w1"], p["c1"])), p["w2"], p["c2"]);
    return matmul(mean(x2 + m, {1}), p["wout"].t());
  };
  const Tensor x = fill({2, 5, d}, 21.0, 1.0).requires_grad_(true);
  const Tensor loss = mean(block(x)) + 10.0 * penalty(block(x), x);
  loss.backward();
  // tests/tools/gradient_penalty_reference.py, PyTorch 1.13 (attention written out there: 1.13 has no SDPA)
  const Reference ref{4.5689586444248071,
                      {{"ln1_w", {-0.19159056046479042, 0.030434248267030034}},
                       {"ln1_b", {-0.033537695289858435, 0.00125024900192117}},
                       {"wq", {0.00025929082761438134, 8.4536185354889492e-07}},
                       {"wk", {0.00024986918902705443, 2.8544329405898227e-07}},
                       {"wv", {0.80024631640686361, 0.26513607764834152}},
                       {"wo", {-0.035181270920773666, 0.262192927650435}},
                       {"ln2_w", {0.3271174153341746, 0.02891325838452628}},
                       {"ln2_b", {0.0039207244606405903, 0.0017511999602016015}},
                       {"w1", {-0.023990424088668166, 0.28285292284533309}},
                       {"c1", {0.0113834800197486, 0.036570034458069806}},
                       {"w2", {0.023641949313317354, 0.073501745864140683}},
                       {"c2", {0.4173569038582548, 0.51073946272259962}},
                       {"wout", {-3.5237314521912353, 38.115194100680029}}}};
  expect_matches("transformer", loss, p, ref);
}

}  // namespace
}  // namespace ember
