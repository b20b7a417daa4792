// defines: optim::SGD and SGDOptions — stochastic gradient descent with optional momentum, dampening,
// Nesterov momentum and L2 weight decay, exactly as torch.optim.SGD:
//   g = grad + weight_decay * p
//   b = momentum * b + (1 - dampening) * g      (b = g on the first step)
//   g = nesterov ? g + momentum * b : b         (when momentum != 0)
//   p = p - lr * g
//
//   optim::SGD opt(params, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
//   optim::SGD opt({{body, {}}, {head, {.lr = 0.01, .nesterov = false}}},
//                  {.lr = 0.1, .momentum = 0.9, .nesterov = true});
//
// Each parameter gets the hyperparameters of its group. Only the parameters of groups with momentum != 0 keep a
// momentum buffer (state.<i>.momentum_buffer); those of momentum-0 groups keep no state at all.
#pragma once
#include <concepts>
#include <optional>

#include "ember/optim/optimizer.h"

namespace ember::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0
  double weight_decay = 0;
  double dampening = 0;
};
// A param group's options: a field left unset takes the constructor's default (its SGDOptions), as in PyTorch.
struct SGDGroupOptions {
  std::optional<double> lr = std::nullopt;
  std::optional<double> momentum = std::nullopt;
  std::optional<bool> nesterov = std::nullopt;
  std::optional<double> weight_decay = std::nullopt;
  std::optional<double> dampening = std::nullopt;
};

class SGD : public Optimizer {
 public:
  using Options = SGDOptions;
  using GroupOptions = SGDGroupOptions;
  using ParamGroup = optim::ParamGroup<SGDGroupOptions>;
  // One group. Throws ValueError for an invalid option (naming "SGD" and the option).
  SGD(std::vector<Tensor> params, const SGDOptions& options = {});
  // Several groups, each with `defaults` overridden by its own options. Throws ValueError for an invalid default
  // or group option (naming the group), a parameter in two groups, or no groups; an empty group is allowed, as in
  // PyTorch. nesterov is checked per group: a group that turns momentum off must turn nesterov off too. (A
  // template only so that SGD({}, ...) still means the constructor above.)
  template <class G = ParamGroup>
  requires std::same_as<G, ParamGroup> SGD(std::vector<G> groups, const SGDOptions& defaults = {})
      : SGD(resolve(std::move(groups), defaults, false)) {}
  void step() override;
  // Group 0's options / group g's, with the defaults filled in. lr lives in group_lr(), which schedulers change;
  // momentum is the current one (OneCycleLR cycles it).
  const SGDOptions& options() const { return groups_[0]; }
  const SGDOptions& group_options(size_t g) const;
  // Only when every group has momentum != 0 (the momentum buffers); set_momentum then takes values > 0.
  bool has_momentum() const override;
  double group_momentum(size_t g) const override;

 private:
  struct Resolved {
    std::vector<GroupInit> inits;
    std::vector<SGDOptions> groups;
    bool from_list;
  };
  static Resolved resolve(std::vector<ParamGroup> groups, const SGDOptions& defaults, bool from_list);
  explicit SGD(Resolved r);
  void check_momentum(double momentum) const override;
  void write_momentum(size_t g, double momentum) override { groups_[g].momentum = momentum; }
  std::vector<SGDOptions> groups_;  // per group, the defaults filled in
};

}  // namespace ember::optim
