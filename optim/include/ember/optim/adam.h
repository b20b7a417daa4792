// defines: optim::Adam and optim::AdamW with their options, exactly as torch.optim.Adam / AdamW. Per
// parameter, with t its step count (from 1):
//   Adam:  g = grad + weight_decay * p                    (L2 penalty in the gradient)
//   AdamW: p = p * (1 - lr * weight_decay)                (decoupled decay), g = grad
//   m = beta1 * m + (1 - beta1) * g,  v = beta2 * v + (1 - beta2) * g^2
//   p = p - lr * m_hat / (sqrt(v_hat) + eps),  m_hat = m / (1 - beta1^t),  v_hat = v / (1 - beta2^t)
// Each step is one fused backend call for all parameters (Backend::adam_step; on CUDA, multi-tensor launches).
//
//   optim::AdamW opt(model.parameters(), {.lr = 3e-4, .weight_decay = 0.1});
//   optim::AdamW opt({{decay_params, {.weight_decay = 0.1}}, {no_decay_params, {.weight_decay = 0}}}, {.lr = 3e-4});
//
// Each parameter gets the lr and hyperparameters of its group.
#pragma once
#include <concepts>
#include <optional>

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
// A param group's options (Adam's and AdamW's): a field left unset takes the constructor's default, as in PyTorch.
struct AdamGroupOptions {
  std::optional<double> lr = std::nullopt;
  std::optional<double> beta1 = std::nullopt;
  std::optional<double> beta2 = std::nullopt;
  std::optional<double> eps = std::nullopt;
  std::optional<double> weight_decay = std::nullopt;
};

class Adam : public Optimizer {
 public:
  using Options = AdamOptions;
  using GroupOptions = AdamGroupOptions;
  using ParamGroup = optim::ParamGroup<AdamGroupOptions>;
  // One group. Throws ValueError for an invalid option (naming "Adam" and the option).
  Adam(std::vector<Tensor> params, const AdamOptions& options = {});
  // Several groups, each with `defaults` overridden by its own options. Throws ValueError for an invalid default
  // or group option (naming the group), a parameter in two groups, or no groups; an empty group is allowed, as in
  // PyTorch. (A template only so that Adam({}, ...) still means the constructor above.)
  template <class G = ParamGroup>
  requires std::same_as<G, ParamGroup> Adam(std::vector<G> groups, const AdamOptions& defaults = {})
      : Adam("Adam", resolve("Adam", std::move(groups), defaults, false), false) {}
  void step() override;
  // Group 0's options / group g's, with the defaults filled in. lr lives in group_lr(), which schedulers change;
  // beta1 is the current one (OneCycleLR cycles it as the momentum).
  const AdamOptions& options() const { return groups_[0]; }
  const AdamOptions& group_options(size_t g) const;
  bool has_momentum() const override { return true; }
  double group_momentum(size_t g) const override { return group_options(g).beta1; }  // beta1

 protected:
  struct Resolved {
    std::vector<GroupInit> inits;
    std::vector<AdamOptions> groups;
    bool from_list;
  };
  static Resolved resolve(const char* name, std::vector<ParamGroup> groups, const AdamOptions& defaults,
                          bool from_list);
  Adam(const char* name, Resolved r, bool decoupled);

 private:
  void check_momentum(double beta1) const override;
  void write_momentum(size_t g, double beta1) override { groups_[g].beta1 = beta1; }
  std::vector<AdamOptions> groups_;  // per group, the defaults filled in
  bool decoupled_;                   // AdamW
};

class AdamW : public Adam {
 public:
  using Options = AdamWOptions;
  AdamW(std::vector<Tensor> params, const AdamWOptions& options = {});
  template <class G = ParamGroup>
  requires std::same_as<G, ParamGroup> AdamW(std::vector<G> groups, const AdamWOptions& defaults = {})
      : Adam("AdamW", resolve("AdamW", std::move(groups), to_adam(defaults), false), true) {}

 private:
  static AdamOptions to_adam(const AdamWOptions& o) {
    return {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay};
  }
};

}  // namespace ember::optim
