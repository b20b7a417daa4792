// defines: nn::Module — the base of every layer and of user-defined models — and its forward/backward hooks. A
// Module is a handle: copies share one set of parameters, buffers, children, hooks and train/eval flag.
// Parameters get stable dotted names ("0.weight", "encoder.fc1.bias") from the order they were registered.
//
//   struct Net : nn::Module {
//     nn::Dense fc1{784, 128, nn::relu}, fc2{128, 10};
//     Net() { register_module("fc1", fc1); register_module("fc2", fc2); }
//     Tensor forward(const Tensor& x) override { return fc2(fc1(x.flatten(1))); }
//   };
//
// A module with several inputs overrides forward(a, b) (up to four tensors) and is called as m(a, b); one with
// several outputs (or a variable number of inputs) overrides forward_many and is called as m.call({a, b}). Hooks,
// nn::summary and memory plans see every form. (Building with GCC's -Woverloaded-virtual? Add
// `using Module::forward;` to a module that overrides one form only.)
//
// THE REGISTRATION RULE: a module only knows what was registered with register_parameter, register_buffer or
// register_module. A member tensor or layer that was not registered is invisible to parameters() (so the
// optimiser never steps it), to(), train()/eval(), zero_grad(), save()/load(), named_modules(), apply() and
// printing. Printing a model (std::cout << net) shows exactly what is registered, so it is how to check.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::nn {

class Module;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using NamedModules = std::vector<std::pair<std::string, Module*>>;

// A hook on a module call (see Module::register_forward_hook). A returned tensor (or gradient list) replaces
// the value the hook was given; std::nullopt keeps it. The one-tensor forms see a call's first input and first
// output; the Args forms see all of them, as lists (a returned list replaces them all and has their length).
using ForwardPreHook = std::function<std::optional<Tensor>(Module& m, const Tensor& input)>;
using ForwardHook = std::function<std::optional<Tensor>(Module& m, const Tensor& input, const Tensor& output)>;
using ForwardArgsPreHook =
    std::function<std::optional<std::vector<Tensor>>(Module& m, const std::vector<Tensor>& inputs)>;
using ForwardArgsHook = std::function<std::optional<std::vector<Tensor>>(Module& m, const std::vector<Tensor>& inputs,
                                                                         const std::vector<Tensor>& outputs)>;
using BackwardHook = std::function<std::optional<std::vector<Tensor>>(Module& m, const std::vector<Tensor>& grad_input,
                                                                      const std::vector<Tensor>& grad_output)>;

namespace internal {
struct ModuleHooks;
}

// Removes the hook it was returned for (idempotent; a no-op once the module is gone).
class HookHandle {
 public:
  HookHandle() = default;
  void remove();

 private:
  friend class Module;
  HookHandle(std::weak_ptr<internal::ModuleHooks> hooks, uint64_t id) : hooks_(std::move(hooks)), id_(id) {}
  std::weak_ptr<internal::ModuleHooks> hooks_;
  uint64_t id_ = 0;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  Module();
  virtual ~Module() = default;
  Module(const Module&) = default;
  Module& operator=(const Module&) = default;

  // The layer's computation. Call it as m(x). A module overrides the forms it takes; the others throw
  // (those of one output fall back on forward_many when a module overrides only that).
  virtual Tensor forward(const Tensor& x);
  virtual Tensor forward(const Tensor& a, const Tensor& b);
  virtual Tensor forward(const Tensor& a, const Tensor& b, const Tensor& c);
  virtual Tensor forward(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d);
  // The general form: any number of inputs, any number of outputs. By default, forward() of inputs.size()
  // tensors, as a list of one.
  virtual std::vector<Tensor> forward_many(const std::vector<Tensor>& inputs);

  // Runs the forward pre-hooks, forward, the forward hooks, and arms the backward hooks; with no hook
  // registered it is forward(x). Const because a module is a handle (its state is shared, not owned by this).
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& a, const Tensor& b) const;
  Tensor operator()(const Tensor& a, const Tensor& b, const Tensor& c) const;
  Tensor operator()(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) const;
  // The same for forward_many: m.call({ids, mask}) returns every output.
  std::vector<Tensor> call(const std::vector<Tensor>& inputs) const;
  // Activation checkpointing of this module (memory::apply turns it on for the modules memory::fit chose): while
  // on, a call that records a graph (grad mode on) runs forward through autograd::checkpoint — nothing inside is
  // kept for backward but the inputs, and backward runs the forward again. For modules of one output (operator()).
  Module& set_checkpointing(bool enable = true);
  bool checkpointing() const;
  // How the module prints, e.g. "Dense(784 => 128, relu)". Not overridden (a user module, ModuleList,
  // ModuleDict): the type name with the registered parameters, buffers and children, one per line, as
  // "Net(\n  (fc1): Dense(784 => 128, relu)\n  (fc2): Dense(128 => 10)\n)".
  virtual std::string repr() const;
  // repr() followed, when there are parameters, by their count: "Dense(2 => 3)  # 9 parameters". What
  // `os << module` prints.
  std::string to_string() const;

  // Each tensor once, under its first name (a weight shared by two layers is stepped once), as PyTorch.
  std::vector<Tensor> parameters() const;
  NamedTensors named_parameters() const;
  std::vector<Tensor> buffers() const;
  NamedTensors named_buffers() const;
  // Parameters then buffers, as a PyTorch state_dict (what save() writes); shared tensors under every name.
  NamedTensors state_dict() const;
  // Elements counted once per tensor, as parameters(); only those that require grad when trainable_only.
  int64_t num_parameters(bool trainable_only = false) const;

  // The direct children, in registration order.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  // This module (named "") then every descendant, depth first in registration order, under its dotted path
  // ("encoder.0"); a module reached twice (shared by two parents) is listed once, under its first path. The
  // pointers are valid while this module lives.
  NamedModules named_modules() const;
  std::vector<Module*> modules() const;
  // Calls fn on every module of the tree, each once, children before their parent (as PyTorch), e.g. to
  // initialise every Dense. Returns *this.
  Module& apply(const std::function<void(Module&)>& fn);

  // Moves (or converts) every parameter and buffer in place: tensors held elsewhere (an optimiser's list)
  // follow. Gradients are dropped. Returns *this.
  Module& to(Device device);
  Module& to(DType dtype);
  // As PyTorch's module.to(device, memory_format=...): moves, and lays every 4-D parameter and buffer (convolution
  // weights) out in `format` (ChannelsLast: NHWC order; Contiguous: back to NCHW). Other tensors keep theirs.
  Module& to(Device device, MemoryFormat format);
  Module& to(MemoryFormat format);  // the layout only, on the device the tensors are on
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const;
  void zero_grad();                        // sets every parameter's grad to undefined
  Module& requires_grad_(bool on = true);  // freeze or unfreeze all parameters

  // --- hooks (run by operator(), not by a direct call of forward), in registration order. A hook may return
  // void instead of an optional. Hooks are shared by every handle of the module.
  // fn(module, input) before forward; a returned tensor replaces the input. fn(module, inputs) sees every input.
  template <class F>
  HookHandle register_forward_pre_hook(F&& fn) {
    if constexpr (std::is_invocable_v<F&, Module&, const Tensor&>) {
      return add_forward_pre_hook(as_hook<ForwardPreHook, Tensor, F, Module&, const Tensor&>(std::forward<F>(fn)));
    } else {
      static_assert(std::is_invocable_v<F&, Module&, const std::vector<Tensor>&>,
                    "register_forward_pre_hook: fn(Module&, const Tensor&) or fn(Module&, const std::vector<Tensor>&)");
      return add_forward_pre_hook(
          as_hook<ForwardArgsPreHook, std::vector<Tensor>, F, Module&, const std::vector<Tensor>&>(
              std::forward<F>(fn)));
    }
  }
  // fn(module, input, output) after forward; a returned tensor replaces the output. fn(module, inputs, outputs)
  // sees every input and output.
  template <class F>
  HookHandle register_forward_hook(F&& fn) {
    if constexpr (std::is_invocable_v<F&, Module&, const Tensor&, const Tensor&>) {
      return add_forward_hook(
          as_hook<ForwardHook, Tensor, F, Module&, const Tensor&, const Tensor&>(std::forward<F>(fn)));
    } else {
      using List = const std::vector<Tensor>&;
      static_assert(std::is_invocable_v<F&, Module&, List, List>,
                    "register_forward_hook: fn(Module&, const Tensor&, const Tensor&) or fn(Module&, const "
                    "std::vector<Tensor>&, const std::vector<Tensor>&)");
      return add_forward_hook(
          as_hook<ForwardArgsHook, std::vector<Tensor>, F, Module&, List, List>(std::forward<F>(fn)));
    }
  }
  // fn(module, grad_input, grad_output), once per backward pass through each call of the module made with grad
  // mode on: grad_output holds d(loss)/d(output) (one entry per output), grad_input d(loss)/d(input) (one entry
  // per input; undefined for an input that does not require grad or gets no gradient; when no input requires grad,
  // the hook runs as soon as grad_output is known). Gradients w.r.t. the module's parameters are not part of it. A
  // returned vector (one entry per input, each of its input's shape) replaces grad_input. The Module& given stays
  // valid whenever backward runs: the object itself when a shared_ptr owns it (container elements), else a Module
  // handle on the same state (not of the derived type).
  template <class F>
  HookHandle register_full_backward_hook(F&& fn) {
    using List = const std::vector<Tensor>&;
    return add_backward_hook(as_hook<BackwardHook, std::vector<Tensor>, F, Module&, List, List>(std::forward<F>(fn)));
  }
  // True when a hook of any kind is registered on this module (not its children).
  bool has_hooks() const;

 protected:
  // Parameters, buffers and children share one namespace: a name taken by any of them throws ValueError.
  // Registers a parameter (requires grad unless told otherwise) and returns the same handle.
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor t);
  // Registers a child module; the child keeps its own type (M is copied as a handle).
  template <class M>
  M register_module(const std::string& name, const M& m) {
    static_assert(std::is_base_of_v<Module, M>, "register_module: M must derive from nn::Module");
    add_child(name, share_handle(m));
    return m;
  }
  void add_child(const std::string& name, std::shared_ptr<Module> m);

 public:
  // A shared, polymorphic handle for m. A module reached through a base reference (chain[i]) is already owned
  // by a shared_ptr of its real type: reuse that one, so that it is not sliced down to a bare Module.
  template <class M>
  static std::shared_ptr<Module> share_handle(const M& m) {
    if constexpr (std::is_same_v<M, Module>) {
      if (auto owner = std::const_pointer_cast<Module>(m.weak_from_this().lock())) return owner;
    }
    return std::make_shared<M>(m);
  }

 private:
  // fn as the hook type H; one with a void result wrapped to return std::nullopt (a hook may return nothing).
  template <class H, class R, class F, class... Args>
  static H as_hook(F&& fn) {
    if constexpr (std::is_void_v<std::invoke_result_t<F&, Args...>>) {
      return [f = std::forward<F>(fn)](Args... args) mutable -> std::optional<R> {
        f(args...);
        return std::nullopt;
      };
    } else {
      return H(std::forward<F>(fn));  // an empty std::function stays empty: registering it is refused
    }
  }
  HookHandle add_forward_pre_hook(ForwardPreHook fn);
  HookHandle add_forward_pre_hook(ForwardArgsPreHook fn);
  HookHandle add_forward_hook(ForwardHook fn);
  HookHandle add_forward_hook(ForwardArgsHook fn);
  HookHandle add_backward_hook(BackwardHook fn);
  // The forward form for `inputs` (forward_many when `many`) between the hooks.
  std::vector<Tensor> call_with_hooks(const std::vector<Tensor>& inputs, bool many) const;
  Tensor call_checkpointed(const std::vector<Tensor>& inputs) const;

  struct State;
  std::shared_ptr<State> state_;
  friend struct ModuleAccess;
};

// Prints m.to_string(): the module tree and its parameter count.
std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace ember::nn
