// defines: optim::Optimizer, the base of SGD, Adam and AdamW — the parameter list, the learning rate (and the
// momentum, for the schedulers that cycle it), the per-parameter state (a step count and named buffers),
// zero_grad, and state_dict / load_state_dict in a tensors-only format (StateDict) that serialization writes to a
// safetensors file.
//
//   optim::Adam opt(model.parameters(), {.lr = 1e-3});
//   for (...) { opt.zero_grad(); loss(model(x), y).backward(); opt.step(); }
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::optim {

// Tensors only, so that a checkpoint is one safetensors file. Entries, in this order:
//   "param_groups.lr"         0-dim float64
//   "param_groups.initial_lr" 0-dim float64, only once a scheduler has attached (PyTorch's initial_lr)
//   "param_groups.momentum"   0-dim float64, only once set_momentum was called (OneCycleLR cycles it)
//   "state.<i>.step"          0-dim float64, the step count of parameter i (its index in the params vector)
//   "state.<i>.<buffer>"      the parameter's shape and dtype: exp_avg, exp_avg_sq (Adam), momentum_buffer (SGD)
// A parameter that has no state yet (never stepped) has no "state.<i>.*" entries, as in PyTorch.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

class LRScheduler;

class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;  // a copy would share the state buffers and update them twice
  Optimizer& operator=(const Optimizer&) = delete;
  // Schedulers attached to `o` follow it to this object. Assigning over an optimiser detaches the schedulers
  // attached to it: their optimiser is gone, as if destroyed.
  Optimizer(Optimizer&& o) noexcept;
  Optimizer& operator=(Optimizer&& o) noexcept;

  // Updates every parameter that requires grad and has a defined grad(); the others are skipped.
  virtual void step() = 0;
  // Sets every parameter's grad to undefined (PyTorch's set_to_none), so the next backward() starts afresh.
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr);  // schedulers call this; lr >= 0
  // The lr the first scheduler attached to this optimiser started from; schedulers attached later (say after
  // load_state_dict) take their base lr from it, not from the current, already scheduled lr(). Unset until then.
  std::optional<double> initial_lr() const { return initial_lr_; }

  // SGD's momentum (SGD built with momentum != 0 only) or Adam's and AdamW's beta1; OneCycleLR cycles it.
  // momentum() and set_momentum() throw ValueError when has_momentum() is false, set_momentum() also for a
  // value the optimiser rejects; once set, the momentum is part of state_dict().
  virtual bool has_momentum() const { return false; }
  virtual double momentum() const;
  void set_momentum(double momentum);
  const std::vector<Tensor>& parameters() const { return params_; }
  const char* name() const { return name_; }  // "SGD", "Adam", "AdamW"

  // A snapshot (the buffers are copies): later steps do not change a state_dict already taken.
  StateDict state_dict() const;
  // Replaces the learning rate and all state with `sd`'s after checking every entry's name, shape and dtype
  // against this optimiser's parameters (throws ember::Error naming the entry; nothing changes on a throw).
  // Buffers are copied onto their parameter's device.
  void load_state_dict(const StateDict& sd);

 protected:
  // What a parameter's state holds: whether it counts steps, and its buffers' names, in order.
  struct StateLayout {
    bool has_step = false;
    std::vector<std::string> buffers;
  };
  struct ParamState {
    bool initialized = false;  // false until the parameter's first step (or a load)
    int64_t step = 0;
    std::vector<Tensor> buffers;  // contiguous, the parameter's shape, dtype and device
  };
  Optimizer(const char* name, std::vector<Tensor> params, double lr, StateLayout layout);

  // For set_momentum and load_state_dict, called only when has_momentum(): check_momentum throws ValueError
  // (naming the optimiser and the option) for a value the optimiser rejects; write_momentum stores a checked one.
  virtual void check_momentum(double) const {}
  virtual void write_momentum(double) {}

  // For each parameter to update: calls update(param, grad, state) with param and grad contiguous, under
  // NoGradGuard; copies the result back into a strided parameter and bumps the parameter's version.
  void update_each(const std::function<void(const Tensor& param, const Tensor& grad, ParamState& state)>& update);
  // A zero-filled buffer shaped like `param`, on its device, with its dtype.
  static Tensor zeros_like_param(const Tensor& param);

  // The move constructor and assignment list every member: a new one must be added there too.
  const char* name_;
  std::vector<Tensor> params_;
  std::vector<ParamState> state_;  // state_[i] belongs to params_[i]
  double lr_;
  StateLayout layout_;
  std::optional<double> initial_lr_;
  bool momentum_set_ = false;  // saves the momentum in state_dict

 private:
  // Schedulers reach their optimiser through this shared anchor rather than a raw pointer: a move repoints it at
  // the new object and the destructor nulls it, so a scheduler follows a moved optimiser and detects a destroyed
  // one instead of dangling.
  struct Anchor {
    Optimizer* opt;
  };
  friend class LRScheduler;
  const std::shared_ptr<Anchor>& anchor();  // made on first use (and again for a moved-from optimiser)
  std::shared_ptr<Anchor> anchor_;
};

}  // namespace ember::optim
