// defines: optim::Optimizer, the base of SGD, Adam and AdamW — the parameters in one or more groups (PyTorch's
// param_groups), each group's learning rate (and the momentum, for the schedulers that cycle it), the
// per-parameter state (a step count and named buffers), zero_grad, and state_dict / load_state_dict in a
// tensors-only format (StateDict) that serialization writes to a safetensors file; optim::ParamGroup.
//
//   optim::Adam opt(model.parameters(), {.lr = 1e-3});
//   for (...) { opt.zero_grad(); loss(model(x), y).backward(); opt.step(); }
//
// Parameter groups give parts of the model their own lr and hyperparameters; a field a group leaves unset
// (std::nullopt) takes the constructor's default, as in PyTorch:
//
//   optim::AdamW opt({{decay_params, {.weight_decay = 0.1}}, {no_decay_params, {.weight_decay = 0}}}, {.lr = 3e-4});
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
//   "param_groups.lr"         the lr of each group
//   "param_groups.initial_lr" each group's lr when the first scheduler attached (PyTorch's initial_lr); only once
//                             a scheduler has attached
//   "param_groups.momentum"   each group's momentum; only once set_momentum was called (OneCycleLR cycles it)
//   "state.<i>.step"          0-dim float64, the step count of parameter i
//   "state.<i>.<buffer>"      the parameter's shape and dtype: exp_avg, exp_avg_sq (Adam), momentum_buffer (SGD)
// The param_groups entries are float64: 0-dim with one group (the format from before groups, still loadable),
// 1-D [num_param_groups()] with several. i numbers the parameters of all groups in order (group 0's first), as
// PyTorch's state_dict does. A parameter that has no state yet (never stepped) has no "state.<i>.*" entries, as
// in PyTorch. The groups' other hyperparameters are not saved: they come from the constructor.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

// The dtype of an optimiser's state for a parameter of dtype p: float32 for float16 / bfloat16 parameters (a pure
// low-precision model keeps its moments in float32, as PyTorch's fused optimisers), else p's.
inline DType state_dtype(DType p) { return is_reduced_float(p) ? kFloat32 : p; }

// One group of parameters and the options that differ from the optimiser's defaults (SGDGroupOptions,
// AdamGroupOptions): see SGD::ParamGroup, Adam::ParamGroup.
template <class GroupOptions>
struct ParamGroup {
  std::vector<Tensor> params;
  GroupOptions options = {};
};

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

  // Updates every parameter that requires grad and has a defined grad(), with its group's lr and
  // hyperparameters; the others are skipped.
  virtual void step() = 0;
  // Sets every parameter's grad to undefined (PyTorch's set_to_none), so the next backward() starts afresh.
  void zero_grad();

  // One group for an optimiser built from a parameter list. g < num_param_groups(), else IndexError.
  size_t num_param_groups() const { return lrs_.size(); }
  double group_lr(size_t g) const;
  void set_group_lr(size_t g, double lr);  // lr >= 0
  double lr() const { return group_lr(0); }  // group 0's (IndexError on a moved-from optimiser)
  void set_lr(double lr);                  // every group's; lr >= 0
  // The parameters of group g, in order; parameters() is all groups' in order (the state_dict's numbering).
  std::vector<Tensor> group_parameters(size_t g) const;
  // The lr each group had when the first scheduler attached to this optimiser; schedulers attached later (say
  // after load_state_dict) take their base lrs from it, not from the current, already scheduled lrs. Unset until
  // then. initial_lr() is group 0's.
  std::optional<double> initial_lr() const;
  std::optional<double> group_initial_lr(size_t g) const;

  // SGD's momentum or Adam's and AdamW's beta1; OneCycleLR cycles it. An SGD has one only when every group has
  // momentum != 0 (its momentum buffers are fixed at construction). momentum() (group 0's), group_momentum() and
  // set_momentum() (every group's) throw ValueError when has_momentum() is false, set_momentum() also for a value
  // the optimiser rejects; once set, the momentum is part of state_dict().
  virtual bool has_momentum() const { return false; }
  double momentum() const { return group_momentum(0); }
  virtual double group_momentum(size_t g) const;
  void set_momentum(double momentum);
  const std::vector<Tensor>& parameters() const { return params_; }
  const char* name() const { return name_; }  // "SGD", "Adam", "AdamW"

  // A snapshot (the buffers are copies): later steps do not change a state_dict already taken.
  StateDict state_dict() const;
  // Replaces the learning rates and all state with `sd`'s after checking every entry's name, shape and dtype
  // against this optimiser's groups and parameters (throws ember::Error naming the entry, and both group counts
  // when they differ; nothing changes on a throw). Buffers are copied onto their parameter's device.
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
    std::vector<Tensor> buffers;  // the parameter's shape, dtype, device and layout (contiguous or channels-last)
  };
  // A group as the derived constructor resolved it: its parameters, lr and state layout (SGD's differs between
  // groups with and without momentum).
  struct GroupInit {
    std::vector<Tensor> params;
    double lr;
    StateLayout layout;
  };
  // `from_list`: built from one parameter list, which must not be empty; groups may be (PyTorch allows an empty
  // group), but there must be at least one. A parameter in two groups, or twice in one, is a ValueError.
  Optimizer(const char* name, std::vector<GroupInit> groups, bool from_list);

  // For set_momentum and load_state_dict, called only when has_momentum(): check_momentum throws ValueError
  // (naming the optimiser and the option) for a value the optimiser rejects; write_momentum stores a checked one.
  virtual void check_momentum(double) const {}
  virtual void write_momentum(size_t /*group*/, double) {}
  void check_group(size_t g) const;  // IndexError unless g < num_param_groups()

  // A parameter to update in this step, prepared: param and grad contiguous (in the parameter's memory format, as
  // its NHWC view when channels-last), the state's buffers on the parameter's device and in the same layout.
  struct Update {
    size_t group;
    Tensor param, grad;
    ParamState* state;
  };
  // Prepares every parameter that has a gradient, calls update(updates) once under NoGradGuard (so that a step can
  // hand all its parameters to the backend in one call: Backend::adam_step takes a list), then copies results back
  // into strided parameters, returns the state to the parameters' shape and bumps the parameters' versions.
  void update_all(const std::function<void(const std::vector<Update>& updates)>& update);
  // A zero-filled buffer shaped like `param`, on its device, with its dtype.
  static Tensor zeros_like_param(const Tensor& param);

  // The move constructor and assignment list every member: a new one must be added there too.
  const char* name_;
  std::vector<Tensor> params_;        // all groups' in order
  std::vector<size_t> group_begin_;   // group g holds params_[group_begin_[g], group_begin_[g + 1])
  std::vector<ParamState> state_;     // state_[i] belongs to params_[i]
  std::vector<double> lrs_;           // per group
  std::vector<StateLayout> layouts_;  // per group
  std::vector<double> initial_lrs_;   // per group; empty until a scheduler attaches
  bool momentum_set_ = false;         // saves the momentum in state_dict

 private:
  // Schedulers reach their optimiser through this shared anchor rather than a raw pointer: a move repoints it at
  // the new object and the destructor nulls it, so a scheduler follows a moved optimiser and detects a destroyed
  // one instead of dangling.
  struct Anchor {
    Optimizer* opt;
  };
  friend class LRScheduler;
  struct StateDictLoad;  // load_state_dict's steps (optimizer.cpp)
  const std::shared_ptr<Anchor>& anchor();  // made on first use (and again for a moved-from optimiser)
  // Sets every group's lr at once (schedulers): all checked before any changes.
  void set_lrs(const std::vector<double>& lrs);
  // The param_groups entries' format (the schedulers' base_lr and last_lr too): float64, 0-dim for one group,
  // 1-D [num_groups] for several. read_per_group throws ember::Error (starting with `op`, naming the entry, and
  // `owner`, e.g. "this SGD", with both group counts when they differ) for a tensor of another form.
  static Tensor per_group_tensor(const std::vector<double>& values);
  static std::vector<double> read_per_group(const std::string& op, const std::string& name, const Tensor& t,
                                            size_t num_groups, const std::string& owner);
  std::shared_ptr<Anchor> anchor_;
};

}  // namespace ember::optim
