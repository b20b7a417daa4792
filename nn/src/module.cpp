// defines: nn::Module's registration and the recursive walks over parameters, buffers and children (hooks are in
// module_hooks.cpp, printing in module_print.cpp).
#include "ember/nn/module.h"

#include <set>
#include <unordered_set>

#include "ember/autograd/grad_mode.h"
#include "ember/core/memory_plan.h"
#include "ember/core/raw_ops.h"
#include "module_state.h"

namespace ember::nn {

Module::Module() : state_(std::make_shared<State>()) {}

namespace {
// The module whose default forward_many is running on this thread: its default forward() forms must not call
// forward_many back (neither was overridden).
thread_local const Module* t_default_many = nullptr;

const char* const kForwardSignature[] = {"", "Tensor forward(const Tensor&)",
                                         "Tensor forward(const Tensor&, const Tensor&)",
                                         "Tensor forward(const Tensor&, const Tensor&, const Tensor&)",
                                         "Tensor forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&)"};

// A forward() form the module did not override: its forward_many when that was overridden and gives one output.
Tensor forward_through_many(Module& m, std::vector<Tensor> inputs) {
  const size_t n = inputs.size();
  if (t_default_many == &m)
    throw Error(detail::str("nn::Module: ", internal::type_name(m), " has no forward() of ", n, " tensor",
                            n == 1 ? "" : "s", "; override ", kForwardSignature[n]));
  std::vector<Tensor> out = m.forward_many(inputs);
  EMBER_CHECK_VALUE(out.size() == 1, "nn::Module: ", internal::type_name(m), "'s forward_many returned ", out.size(),
                    " outputs; call it as m.call({...}) to get them all");
  return out[0];
}
}  // namespace

Tensor Module::forward(const Tensor& x) { return forward_through_many(*this, {x}); }
Tensor Module::forward(const Tensor& a, const Tensor& b) { return forward_through_many(*this, {a, b}); }
Tensor Module::forward(const Tensor& a, const Tensor& b, const Tensor& c) {
  return forward_through_many(*this, {a, b, c});
}
Tensor Module::forward(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) {
  return forward_through_many(*this, {a, b, c, d});
}

std::vector<Tensor> Module::forward_many(const std::vector<Tensor>& in) {
  EMBER_CHECK_VALUE(!in.empty() && in.size() <= 4, "nn::Module: ", internal::type_name(*this), " called with ",
                    in.size(),
                    " inputs; override std::vector<Tensor> forward_many(const std::vector<Tensor>&) to "
                    "take them");
  const Module* prev = t_default_many;
  t_default_many = this;
  struct Restore {
    const Module* prev;
    ~Restore() { t_default_many = prev; }
  } restore{prev};
  return {internal::forward_of_arity(*this, in)};
}

namespace internal {
Tensor forward_of_arity(Module& m, const std::vector<Tensor>& in) {
  switch (in.size()) {
    case 1:
      return m.forward(in[0]);
    case 2:
      return m.forward(in[0], in[1]);
    case 3:
      return m.forward(in[0], in[1], in[2]);
    default:
      return m.forward(in[0], in[1], in[2], in[3]);
  }
}
}  // namespace internal

namespace {
void check_name(const std::string& name, const char* what) {
  EMBER_CHECK_VALUE(!name.empty() && name.find('.') == std::string::npos, what, ": name \"", name,
                    "\" must be non-empty and contain no '.'");
}
}  // namespace

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
  memory::tag(t, memory::Category::kParameters);
  return t;
}
Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name(*state_, name, "register_buffer");
  state_->buffers.emplace_back(name, t);
  memory::tag(t, memory::Category::kParameters);
  return t;
}
void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name(*state_, name, "register_module");
  m->state_->name = name;
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
int64_t Module::num_parameters(bool trainable_only) const {
  int64_t n = 0;
  for (const Tensor& p : parameters())
    if (!trainable_only || p.requires_grad()) n += p.numel();
  return n;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return state_->children; }
std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [_, c] : state_->children) out.push_back(c);
  return out;
}

// A module's identity is its shared state: two handles of one layer (a Chain holding the same Dense twice) are
// one module.
namespace {
using Seen = std::unordered_set<const void*>;
const void* identity(const Module& m) { return &ModuleAccess::state(m); }
void walk_pre(Module& m, const std::string& path, Seen& seen, NamedModules& out) {
  if (!seen.insert(identity(m)).second) return;
  out.emplace_back(path, &m);
  for (const auto& [n, c] : ModuleAccess::state(m).children) walk_pre(*c, path.empty() ? n : path + "." + n, seen, out);
}
void walk_post(Module& m, Seen& seen, const std::function<void(Module&)>& fn) {
  if (!seen.insert(identity(m)).second) return;
  // a copy: fn may register children
  auto children = ModuleAccess::state(m).children;
  for (const auto& [_, c] : children) walk_post(*c, seen, fn);
  fn(m);
}
}  // namespace

NamedModules Module::named_modules() const {
  NamedModules out;
  Seen seen;
  walk_pre(const_cast<Module&>(*this), "", seen, out);
  return out;
}
std::vector<Module*> Module::modules() const {
  std::vector<Module*> out;
  for (const auto& [_, m] : named_modules()) out.push_back(m);
  return out;
}
Module& Module::apply(const std::function<void(Module&)>& fn) {
  EMBER_CHECK_VALUE(static_cast<bool>(fn), "Module::apply: the function is empty");
  Seen seen;
  walk_post(*this, seen, fn);
  return *this;
}

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
    memory::tag(t, memory::Category::kParameters);
  }
  return *this;
}
Module& Module::to(Device device, MemoryFormat format) {
  to(device);
  return to(format);
}
Module& Module::to(MemoryFormat format) {
  EMBER_CHECK_VALUE(format != MemoryFormat::Preserve,
                    "Module::to: preserve_format is not a layout to convert to; use Contiguous or ChannelsLast");
  NoGradGuard g;
  for (auto& [_, t] : named_tensors_once(*this)) {
    if (t.dim() != 4 || t.is_contiguous(format)) continue;
    Tensor laid_out = raw::contiguous(t, format);
    if (t.requires_grad()) t.set_grad({});
    t.set_data(laid_out);
    memory::tag(t, memory::Category::kParameters);
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
    memory::tag(t, memory::Category::kParameters);
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

}  // namespace ember::nn
