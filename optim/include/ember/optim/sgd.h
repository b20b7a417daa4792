// defines: optim::SGD and SGDOptions — stochastic gradient descent with optional momentum, dampening,
// Nesterov momentum and L2 weight decay, exactly as torch.optim.SGD:
//   g = grad + weight_decay * p
//   b = momentum * b + (1 - dampening) * g      (b = g on the first step)
//   g = nesterov ? g + momentum * b : b         (when momentum != 0)
//   p = p - lr * g
//
//   optim::SGD opt(params, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
#pragma once
#include "ember/optim/optimizer.h"

namespace ember::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0
  double weight_decay = 0;
  double dampening = 0;
};

class SGD : public Optimizer {
 public:
  using Options = SGDOptions;
  // Throws ValueError for an invalid option (naming "SGD" and the option).
  SGD(std::vector<Tensor> params, const SGDOptions& options = {});
  void step() override;
  // lr lives in lr(), which schedulers change; momentum is the current one (OneCycleLR cycles it)
  const SGDOptions& options() const { return opts_; }
  // Only with momentum != 0 at construction (the momentum buffer); set_momentum then takes values > 0.
  bool has_momentum() const override { return !layout_.buffers.empty(); }
  double momentum() const override;

 private:
  void check_momentum(double momentum) const override;
  void write_momentum(double momentum) override { opts_.momentum = momentum; }
  SGDOptions opts_;
};

}  // namespace ember::optim
