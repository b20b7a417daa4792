// defines: helpers shared by the optimiser tests — parameters from values, a fixed gradient sequence fed
// through set_grad, and the XOR problem (a 2-8-1 tanh network trained with any optimiser).
#pragma once
#include <cmath>
#include <functional>
#include <vector>

#include "test_util.h"

namespace ember::test {

inline Tensor make_param(const std::vector<double>& v, const Shape& shape, DType dt = kFloat64) {
  Tensor p = tensor(v, shape, {.dtype = dt});
  p.requires_grad_();
  return p;
}

// The gradient fed to parameter `which` at step k: fixed, varied in sign and size, not parameter-dependent.
inline std::vector<double> fixed_grad(int which, int k, size_t n) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i)
    g[i] =
        std::sin(0.37 * static_cast<double>(i + 1) + 1.3 * k + 2.1 * which) * (1.0 + 0.5 * static_cast<double>(i % 3));
  return g;
}

inline void feed_grad(Tensor& p, const std::vector<double>& g) {
  p.set_grad(tensor(g, p.shape(), {.dtype = p.dtype()}));
}

// Trains sigmoid(W2 tanh(W1 x + b1) + b2) on XOR with mse, stopping once the loss is below `target` or
// after max_steps; make_opt builds the optimiser over the four parameters.
struct XorResult {
  double loss;  // the last loss computed
  int steps;
};
template <class MakeOpt>
XorResult train_xor(MakeOpt make_opt, int max_steps, double target) {
  manual_seed(7);
  Tensor x = tensor<float>({0, 0, 0, 1, 1, 0, 1, 1}, {4, 2});
  Tensor y = tensor<float>({0, 1, 1, 0}, {4, 1});
  Tensor w1 = randn({8, 2}), b1 = zeros({8}), w2 = randn({1, 8}) * 0.5, b2 = zeros({1});
  for (Tensor* t : {&w1, &b1, &w2, &b2}) t->requires_grad_();
  auto opt = make_opt(std::vector<Tensor>{w1, b1, w2, b2});
  double loss_value = 1e9;
  int step = 0;
  for (; step < max_steps && loss_value >= target; ++step) {
    opt.zero_grad();
    Tensor out = sigmoid(linear(tanh(linear(x, w1, b1)), w2, b2));
    Tensor diff = out - y;
    Tensor loss = mean(diff * diff);
    loss.backward();
    opt.step();
    loss_value = loss.item<float>();
  }
  return {loss_value, step};
}

}  // namespace ember::test
