// defines: nn::Module's shared state and the recursive walks over parameters, buffers and children.
#include "ember/nn/module.h"

#include <ostream>
#include <set>
#include <sstream>

#include "ember/autograd/grad_mode.h"
#include "ember/core/raw_ops.h"

namespace ember::nn {

struct Module::State {
  NamedTensors params, buffers;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children;
  bool training = true;
};

Module::Module() : state_(std::make_shared<State>()) {}

Tensor Module::forward(const Tensor&) {
  throw Error(detail::str("nn::Module: ", repr(), " has no forward(); override Tensor forward(const Tensor&)"));
}

std::string Module::repr() const { return "Module"; }

namespace {
void check_name(const std::string& name, const char* what) {
  EMBER_CHECK_VALUE(!name.empty() && name.find('.') == std::string::npos, what, ": name \"", name,
                    "\" must be non-empty and contain no '.'");
}
}  // namespace

struct ModuleAccess {
  static const Module::State& state(const Module& m) { return *m.state_; }
};

namespace {
// Parameters, buffers and children share one namespace (their names meet in the state_dict).
template <class State>
void check_new_name(const State& st, const std::string& name, const char* what) {
  check_name(name, what);
  auto taken = [&](const auto& list) {
    for (const auto& [n, _] : list)
      if (n == name) return true;
    return false;
  };
  EMBER_CHECK_VALUE(!taken(st.params) && !taken(st.buffers) && !taken(st.children), what,
                    ": a parameter, buffer or module named \"", name, "\" already exists");
}
// `seen` (when given) drops tensors already listed under another name: a tied weight is listed once.
void collect(const Module& m, const std::string& prefix, bool params, NamedTensors& out,
             std::set<const TensorImpl*>* seen) {
  const auto& st = ModuleAccess::state(m);
  for (const auto& [n, t] : params ? st.params : st.buffers)
    if (!seen || seen->insert(t.impl()).second) out.emplace_back(prefix + n, t);
  for (const auto& [n, c] : st.children) collect(*c, prefix + n + ".", params, out, seen);
}
}  // namespace

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(*state_, name, "register_parameter");
  if (requires_grad) t.requires_grad_(true);
  state_->params.emplace_back(name, t);
  return t;
}
Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name(*state_, name, "register_buffer");
  state_->buffers.emplace_back(name, t);
  return t;
}
void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name(*state_, name, "register_module");
  state_->children.emplace_back(name, std::move(m));
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  std::set<const TensorImpl*> seen;
  collect(*this, "", true, out, &seen);
  return out;
}
NamedTensors Module::named_buffers() const {
  NamedTensors out;
  std::set<const TensorImpl*> seen;
  collect(*this, "", false, out, &seen);
  return out;
}
std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters()) out.push_back(t);
  return out;
}
std::vector<Tensor> Module::buffers() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_buffers()) out.push_back(t);
  return out;
}
NamedTensors Module::state_dict() const {  // every name, tied tensors included (as PyTorch)
  NamedTensors out;
  collect(*this, "", true, out, nullptr);
  collect(*this, "", false, out, nullptr);
  return out;
}
std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return state_->children; }

namespace {
// Parameters then buffers, each tensor once (a tied weight must be converted once).
NamedTensors named_tensors_once(const Module& m) {
  NamedTensors out = m.named_parameters();
  for (auto& nt : m.named_buffers()) out.push_back(nt);
  return out;
}
}  // namespace

Module& Module::to(Device device) {
  NoGradGuard g;
  for (auto& [_, t] : named_tensors_once(*this)) {
    Tensor moved = raw::to_device(t, device);
    if (t.requires_grad()) t.set_grad({});
    t.set_data(moved);
  }
  return *this;
}
Module& Module::to(DType dtype) {
  NoGradGuard g;
  for (auto& [_, t] : named_tensors_once(*this)) {
    if (!is_floating(t.dtype())) continue;  // integer buffers (counters) keep their type
    Tensor conv = raw::cast(t, dtype);
    if (t.requires_grad()) t.set_grad({});
    t.set_data(conv);
  }
  return *this;
}
Module& Module::train(bool on) {
  state_->training = on;
  for (auto& [_, c] : state_->children) c->train(on);
  return *this;
}
bool Module::is_training() const { return state_->training; }
void Module::zero_grad() {
  for (Tensor& p : parameters()) p.set_grad({});
}
Module& Module::requires_grad_(bool on) {
  for (Tensor& p : parameters()) p.requires_grad_(on);
  return *this;
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr(); }

}  // namespace ember::nn
