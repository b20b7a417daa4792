// defines (internal to nn/): nn::Module's shared state, its hook lists, and the helpers the module and
// container sources share (a module's printable type name, indentation of a nested repr).
#pragma once
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ember/nn/module.h"

namespace ember::nn {

namespace internal {
// Each list in registration order; key: the HookHandle's id.
struct ModuleHooks {
  uint64_t next_id = 1;
  std::vector<std::pair<uint64_t, ForwardArgsPreHook>> pre;  // the one-tensor forms, wrapped
  std::vector<std::pair<uint64_t, ForwardArgsHook>> post;
  std::vector<std::pair<uint64_t, BackwardHook>> backward;
  bool empty() const { return pre.empty() && post.empty() && backward.empty(); }
};

// 101770 -> "101_770" (Flux's way, in repr) or with another separator ("101,770" in nn::summary's table).
std::string group_digits(int64_t n, char sep = '_');
// The dynamic type of m without namespaces: "Net", "Dense", "Block<Dense>".
std::string type_name(const Module& m);
// s with every line after the first indented by two spaces (a child's repr inside its parent's).
std::string indent(std::string s);
// m.forward() of in.size() tensors (one to four): what a call of that many tensors runs.
Tensor forward_of_arity(Module& m, const std::vector<Tensor>& in);
}  // namespace internal

struct Module::State {
  NamedTensors params, buffers;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children;
  bool training = true;
  bool checkpointing = false;  // set_checkpointing: operator() runs forward through autograd::checkpoint
  std::string name;  // its name in the parent it was last registered in ("" for a root); memory::ModuleScope
  std::shared_ptr<internal::ModuleHooks> hooks;  // null until the first hook is registered
  std::once_flag type_once;  // type_name is set once, at the first call of an unnamed (root) module
  std::string type_name;
};

struct ModuleAccess {
  static const Module::State& state(const Module& m) { return *m.state_; }
  static Module::State& mutable_state(const Module& m) { return *m.state_; }
};

}  // namespace ember::nn
