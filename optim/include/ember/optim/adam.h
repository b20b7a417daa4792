// defines: optim::Adam and optim::AdamW with their options, exactly as torch.optim.Adam / AdamW. Per
// parameter, with t its step count (from 1):
//   Adam:  g = grad + weight_decay * p                    (L2 penalty in the gradient)
//   AdamW: p = p * (1 - lr * weight_decay)                (decoupled decay), g = grad
//   m = beta1 * m + (1 - beta1) * g,  v = beta2 * v + (1 - beta2) * g^2
//   p = p - lr * m_hat / (sqrt(v_hat) + eps),  m_hat = m / (1 - beta1^t),  v_hat = v / (1 - beta2^t)
// Each step is one fused backend call per parameter (Backend::adam_step).
//
//   optim::AdamW opt(model.parameters(), {.lr = 3e-4, .weight_decay = 0.1});
#pragma once
#include "ember/optim/optimizer.h"

namespace ember::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
};
// AdamW's options differ from Adam's only in the default weight decay (PyTorch's 1e-2).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

class Adam : public Optimizer {
 public:
  using Options = AdamOptions;
  // Throws ValueError for an invalid option (naming "Adam" and the option).
  Adam(std::vector<Tensor> params, const AdamOptions& options = {});
  void step() override;
  // lr lives in lr(), which schedulers change; beta1 is the current one (OneCycleLR cycles it as the momentum)
  const AdamOptions& options() const { return opts_; }
  bool has_momentum() const override { return true; }
  double momentum() const override { return opts_.beta1; }  // beta1

 protected:
  Adam(const char* name, std::vector<Tensor> params, const AdamOptions& options, bool decoupled);

 private:
  void check_momentum(double beta1) const override;
  void write_momentum(double beta1) override { opts_.beta1 = beta1; }
  AdamOptions opts_;
  bool decoupled_;  // AdamW
};

class AdamW : public Adam {
 public:
  using Options = AdamWOptions;
  AdamW(std::vector<Tensor> params, const AdamWOptions& options = {});
};

}  // namespace ember::optim
