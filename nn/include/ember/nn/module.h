// defines: nn::Module — the base of every layer and of user-defined models. A Module is a handle: copies
// share one set of parameters, buffers, children and train/eval flag. Parameters get stable dotted names
// ("0.weight", "encoder.fc1.bias") from the order they were registered.
//
//   struct Net : nn::Module {
//     nn::Dense fc1{784, 128, nn::relu}, fc2{128, 10};
//     Net() { register_module("fc1", fc1); register_module("fc2", fc2); }
//     Tensor forward(const Tensor& x) override { return fc2(fc1(x.flatten(1))); }
//   };
#pragma once
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module : public std::enable_shared_from_this<Module> {
 public:
  Module();
  virtual ~Module() = default;
  Module(const Module&) = default;
  Module& operator=(const Module&) = default;

  // The layer's computation. Call it as m(x).
  virtual Tensor forward(const Tensor& x);
  // Calls forward; const because a module is a handle (its state is shared, not owned by this object).
  Tensor operator()(const Tensor& x) const { return const_cast<Module*>(this)->forward(x); }
  // How the module prints, e.g. "Dense(784 => 128, relu)".
  virtual std::string repr() const;

  // Each tensor once, under its first name (a weight shared by two layers is stepped once), as PyTorch.
  std::vector<Tensor> parameters() const;
  NamedTensors named_parameters() const;
  std::vector<Tensor> buffers() const;
  NamedTensors named_buffers() const;
  // Parameters then buffers, as a PyTorch state_dict (what save() writes); shared tensors under every name.
  NamedTensors state_dict() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;

  // Moves (or converts) every parameter and buffer in place: tensors held elsewhere (an optimiser's list)
  // follow. Gradients are dropped. Returns *this.
  Module& to(Device device);
  Module& to(DType dtype);
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const;
  void zero_grad();                        // sets every parameter's grad to undefined
  Module& requires_grad_(bool on = true);  // freeze or unfreeze all parameters

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
  struct State;
  std::shared_ptr<State> state_;
  friend struct ModuleAccess;
};

std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace ember::nn
