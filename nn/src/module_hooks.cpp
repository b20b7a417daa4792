// defines: Module::operator() (every form: one to four inputs, call() of a list) and the module hooks. Forward
// hooks run around forward(); a full backward hook is armed per call by two identity nodes in the autograd graph —
// one on the outputs (it sees grad_output first, the tape runs it before anything inside the module) and one on the
// inputs (it sees grad_input last and calls the hooks) — so the engine needs no knowledge of modules.
#include <algorithm>
#include <optional>

#include "ember/autograd/checkpoint.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/node.h"
#include "ember/core/memory_context.h"
#include "ember/core/raw_ops.h"
#include "ember/nn/module.h"
#include "module_state.h"

namespace ember::nn {

void HookHandle::remove() {
  auto hooks = hooks_.lock();
  if (!hooks) return;
  auto drop = [this](auto& list) { std::erase_if(list, [this](const auto& h) { return h.first == id_; }); };
  drop(hooks->pre);
  drop(hooks->post);
  drop(hooks->backward);
  hooks_.reset();
}

namespace {
// Appends fn to one of the lists (created on first use) and returns its id.
template <class Fn>
uint64_t add(std::shared_ptr<internal::ModuleHooks>& hooks,
             std::vector<std::pair<uint64_t, Fn>> internal::ModuleHooks::*list, Fn fn, const char* what) {
  EMBER_CHECK_VALUE(static_cast<bool>(fn), what, ": the hook is empty");
  if (!hooks) hooks = std::make_shared<internal::ModuleHooks>();
  const uint64_t id = hooks->next_id++;
  ((*hooks).*list).emplace_back(id, std::move(fn));
  return id;
}
}  // namespace

namespace {
// The one-tensor hook forms, as the list forms: they see (and may replace) the first input and the first output.
ForwardArgsPreHook as_args_hook(ForwardPreHook fn) {
  return [fn = std::move(fn)](Module& m, const std::vector<Tensor>& in) -> std::optional<std::vector<Tensor>> {
    std::optional<Tensor> r = fn(m, in.empty() ? Tensor() : in[0]);
    if (!r || !r->defined() || in.empty()) return std::nullopt;
    std::vector<Tensor> replaced = in;
    replaced[0] = *r;
    return replaced;
  };
}
ForwardArgsHook as_args_hook(ForwardHook fn) {
  return [fn = std::move(fn)](Module& m, const std::vector<Tensor>& in,
                              const std::vector<Tensor>& out) -> std::optional<std::vector<Tensor>> {
    std::optional<Tensor> r = fn(m, in.empty() ? Tensor() : in[0], out.empty() ? Tensor() : out[0]);
    if (!r || !r->defined() || out.empty()) return std::nullopt;
    std::vector<Tensor> replaced = out;
    replaced[0] = *r;
    return replaced;
  };
}
}  // namespace

HookHandle Module::add_forward_pre_hook(ForwardPreHook fn) {
  EMBER_CHECK_VALUE(static_cast<bool>(fn), "register_forward_pre_hook: the hook is empty");
  return add_forward_pre_hook(as_args_hook(std::move(fn)));
}
HookHandle Module::add_forward_pre_hook(ForwardArgsPreHook fn) {
  const uint64_t id = add(state_->hooks, &internal::ModuleHooks::pre, std::move(fn), "register_forward_pre_hook");
  return {state_->hooks, id};
}
HookHandle Module::add_forward_hook(ForwardHook fn) {
  EMBER_CHECK_VALUE(static_cast<bool>(fn), "register_forward_hook: the hook is empty");
  return add_forward_hook(as_args_hook(std::move(fn)));
}
HookHandle Module::add_forward_hook(ForwardArgsHook fn) {
  const uint64_t id = add(state_->hooks, &internal::ModuleHooks::post, std::move(fn), "register_forward_hook");
  return {state_->hooks, id};
}
HookHandle Module::add_backward_hook(BackwardHook fn) {
  const uint64_t id =
      add(state_->hooks, &internal::ModuleHooks::backward, std::move(fn), "register_full_backward_hook");
  return {state_->hooks, id};
}

bool Module::has_hooks() const { return state_->hooks && !state_->hooks->empty(); }

namespace {
// An OutOfMemoryError and memory::plan name the module's path; a root's own ops, its type.
const std::string* root_type_name(const Module& m) {
  auto& st = ModuleAccess::mutable_state(m);
  if (!st.name.empty()) return nullptr;
  std::call_once(st.type_once, [&] { st.type_name = internal::type_name(m); });
  return &st.type_name;
}
}  // namespace

// With no hook registered (the common case) each form is one test and a virtual call.
Tensor Module::operator()(const Tensor& x) const {
  memory::ModuleScope where(&state_->name, root_type_name(*this));
  if (state_->checkpointing && GradMode::is_enabled()) return call_checkpointed({x});
  if (!has_hooks()) [[likely]]
    return const_cast<Module*>(this)->forward(x);
  return call_with_hooks({x}, false)[0];
}
Tensor Module::operator()(const Tensor& a, const Tensor& b) const {
  memory::ModuleScope where(&state_->name, root_type_name(*this));
  if (state_->checkpointing && GradMode::is_enabled()) return call_checkpointed({a, b});
  if (!has_hooks()) return const_cast<Module*>(this)->forward(a, b);
  return call_with_hooks({a, b}, false)[0];
}
Tensor Module::operator()(const Tensor& a, const Tensor& b, const Tensor& c) const {
  memory::ModuleScope where(&state_->name, root_type_name(*this));
  if (state_->checkpointing && GradMode::is_enabled()) return call_checkpointed({a, b, c});
  if (!has_hooks()) return const_cast<Module*>(this)->forward(a, b, c);
  return call_with_hooks({a, b, c}, false)[0];
}
Tensor Module::operator()(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) const {
  memory::ModuleScope where(&state_->name, root_type_name(*this));
  if (state_->checkpointing && GradMode::is_enabled()) return call_checkpointed({a, b, c, d});
  if (!has_hooks()) return const_cast<Module*>(this)->forward(a, b, c, d);
  return call_with_hooks({a, b, c, d}, false)[0];
}

Module& Module::set_checkpointing(bool enable) {
  state_->checkpointing = enable;
  return *this;
}
bool Module::checkpointing() const { return state_->checkpointing; }

// The forward (and its hooks) inside autograd::checkpoint. The segment holds a handle on this module; its recompute
// in backward names the module again (an OOM or a plan attributes the bytes to it: by its own name, the parents'
// scopes being gone by then), while in the forward operator()'s scope already does.
Tensor Module::call_checkpointed(const std::vector<Tensor>& inputs) const {
  // kept alive by the graph when a shared_ptr owns it; a module on the stack must outlive its backward (as it must
  // for its parameters' gradients anyway)
  std::shared_ptr<const Module> owner = weak_from_this().lock();
  Module* self = const_cast<Module*>(this);
  return autograd::checkpoint(
      [owner, self](const std::vector<Tensor>& in) {
        std::optional<memory::ModuleScope> where;
        if (memory::current_context().checkpoint_recompute)
          where.emplace(&ModuleAccess::state(*self).name, root_type_name(*self));
        Module& m = *self;
        if (m.has_hooks()) return m.call_with_hooks(in, false)[0];
        switch (in.size()) {
          case 1: return m.forward(in[0]);
          case 2: return m.forward(in[0], in[1]);
          case 3: return m.forward(in[0], in[1], in[2]);
          default: return m.forward(in[0], in[1], in[2], in[3]);
        }
      },
      inputs);
}
std::vector<Tensor> Module::call(const std::vector<Tensor>& inputs) const {
  memory::ModuleScope where(&state_->name, root_type_name(*this));
  if (!has_hooks()) return const_cast<Module*>(this)->forward_many(inputs);
  return call_with_hooks(inputs, true);
}

namespace {
// The forward form a call names: forward_many for call(), else forward() of as many tensors as were given.
std::vector<Tensor> run_forward(Module& m, const std::vector<Tensor>& in, bool many) {
  if (many) return m.forward_many(in);
  return {internal::forward_of_arity(m, in)};
}

// What a hook's replacement gradient must match.
struct InputLayout {
  Shape shape;
  DType dtype = kFloat32;
  Device device = Device::cpu();
};

// One call of a module with backward hooks: what its two identity nodes share.
struct BackwardCall {
  std::shared_ptr<internal::ModuleHooks> hooks;
  // The module, alive until backward: the object itself when a shared_ptr owns it (a container's element), else a
  // Module handle on the same state (the caller's object, on the stack, may be gone by the time backward runs).
  std::shared_ptr<Module> module;
  std::string who;                  // its type name, for messages
  std::vector<InputLayout> inputs;  // each input's shape, dtype, device
  std::vector<bool> tracked;        // which inputs require grad (they pass through the input node)
  size_t num_outputs = 0;
  std::vector<Tensor> grad_output;  // set by the output node, consumed by the hooks
  bool any_tracked() const { return std::find(tracked.begin(), tracked.end(), true) != tracked.end(); }
};

// A hook's replacement for grad_input[i]: none for an input that does not require grad, else its input's layout.
void check_replaced_grad(const BackwardCall& c, size_t i, const Tensor& g) {
  const std::string& who = c.who;
  if (!c.tracked[i]) {
    EMBER_CHECK_VALUE(!g.defined(), "register_full_backward_hook: the hook of ", who, " returned a gradient for input ",
                      i, ", which does not require grad (return std::nullopt or an undefined tensor)");
    return;
  }
  if (!g.defined()) return;
  const InputLayout& in = c.inputs[i];
  EMBER_CHECK_SHAPE(g.shape() == in.shape, "register_full_backward_hook: the hook of ", who, " returned a gradient of ",
                    "shape ", g.shape(), " for input ", i, " of shape ", in.shape);
  EMBER_CHECK_DTYPE(g.dtype() == in.dtype, "register_full_backward_hook: the hook of ", who, " returned a ", g.dtype(),
                    " gradient for input ", i, ", a ", in.dtype, " tensor");
  EMBER_CHECK_DEVICE(g.device() == in.device, "register_full_backward_hook: the hook of ", who, " returned a gradient ",
                     "on ", g.device(), " for input ", i, ", on ", in.device);
}

// Runs the backward hooks in order, each on the grad_input the previous one left.
void run_backward_hooks(BackwardCall& c, std::vector<Tensor>& grad_input) {
  const auto hooks = c.hooks->backward;  // a copy: a hook may remove itself
  std::vector<Tensor> grad_output = std::move(c.grad_output);
  grad_output.resize(c.num_outputs);
  c.grad_output.clear();
  for (const auto& [_, fn] : hooks) {
    std::optional<std::vector<Tensor>> r = fn(*c.module, grad_input, grad_output);
    if (!r) continue;
    EMBER_CHECK_VALUE(r->size() == grad_input.size(), "register_full_backward_hook: the hook of ", c.who, " returned ",
                      r->size(), " gradients for ", grad_input.size(), " inputs");
    for (size_t i = 0; i < r->size(); ++i) check_replaced_grad(c, i, (*r)[i]);
    grad_input = std::move(*r);
  }
}

// The indices of the tensors in `ts` that require grad.
std::vector<size_t> requiring_grad(const std::vector<Tensor>& ts) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < ts.size(); ++i)
    if (ts[i].defined() && ts[i].requires_grad()) idx.push_back(i);
  return idx;
}

// The module computes from aliases of its inputs whose node hands grad_input to the hooks. Marked views: an
// in-place change of one inside forward would rewrite the caller's tensor behind the caller's graph, so it is
// refused (as PyTorch does).
void arm_input_node(const std::shared_ptr<BackwardCall>& call, std::vector<Tensor>& x) {
  const std::vector<size_t> idx = requiring_grad(x);
  call->tracked.assign(x.size(), false);
  for (const Tensor& t : x)
    call->inputs.push_back(t.defined() ? InputLayout{t.shape(), t.dtype(), t.device()} : InputLayout{});
  if (idx.empty()) return;
  std::vector<Tensor> in, alias;
  for (size_t i : idx) {
    call->tracked[i] = true;
    in.push_back(x[i]);
    alias.push_back(raw::alias(x[i]));
    x[i] = alias.back();
  }
  autograd::record("ModuleBackwardHook", in, alias, /*outputs_are_views=*/true)
      .backward([call, idx](const autograd::Grads& g) -> autograd::Grads {
        std::vector<Tensor> grad_input(call->inputs.size());
        for (size_t k = 0; k < idx.size(); ++k) grad_input[idx[k]] = g[k];
        run_backward_hooks(*call, grad_input);
        autograd::Grads out;
        for (size_t i : idx) out.push_back(grad_input[i]);
        return out;
      });
}

// The outputs pass through a node that keeps grad_output (and, when no input requires grad, runs the hooks).
void arm_output_node(const std::shared_ptr<BackwardCall>& call, std::vector<Tensor>& y) {
  call->num_outputs = y.size();
  const std::vector<size_t> idx = requiring_grad(y);
  if (idx.empty()) return;
  std::vector<Tensor> out, alias;
  for (size_t i : idx) {
    out.push_back(y[i]);
    alias.push_back(raw::alias(y[i]));
    y[i] = alias.back();
  }
  autograd::record("ModuleBackwardHook", out, alias).backward([call, idx](const autograd::Grads& g) -> autograd::Grads {
    call->grad_output.assign(call->num_outputs, Tensor());
    for (size_t k = 0; k < idx.size(); ++k) call->grad_output[idx[k]] = g[k];
    if (!call->any_tracked()) {  // no input node will come: the hooks run now, with undefined grad_inputs
      std::vector<Tensor> grad_input(call->inputs.size());
      run_backward_hooks(*call, grad_input);
    }
    return g;
  });
}

// A hook's replacement list must keep the call's arity.
void check_replaced_list(const std::vector<Tensor>& r, size_t n, const char* hook, const std::string& who,
                         const char* what) {
  EMBER_CHECK_VALUE(r.size() == n, hook, ": the hook of ", who, " returned ", r.size(), " ", what, " for a call with ",
                    n);
}
}  // namespace

std::vector<Tensor> Module::call_with_hooks(const std::vector<Tensor>& inputs, bool many) const {
  Module& self = const_cast<Module&>(*this);
  const std::shared_ptr<internal::ModuleHooks> hooks = state_->hooks;  // alive even if a hook removes the rest
  std::vector<Tensor> x = inputs;
  for (const auto& [_, fn] : std::vector(hooks->pre))
    if (std::optional<std::vector<Tensor>> r = fn(self, x)) {
      check_replaced_list(*r, x.size(), "register_forward_pre_hook", internal::type_name(self), "inputs");
      x = std::move(*r);
    }

  std::shared_ptr<BackwardCall> call;
  if (!hooks->backward.empty() && GradMode::is_enabled()) {
    call = std::make_shared<BackwardCall>();
    call->hooks = hooks;
    call->module = std::const_pointer_cast<Module>(weak_from_this().lock());
    if (!call->module) call->module = std::make_shared<Module>(static_cast<const Module&>(self));
    call->who = internal::type_name(self);
    arm_input_node(call, x);
  }

  std::vector<Tensor> y = run_forward(self, x, many);
  for (const auto& [_, fn] : std::vector(hooks->post))
    if (std::optional<std::vector<Tensor>> r = fn(self, x, y)) {
      check_replaced_list(*r, y.size(), "register_forward_hook", internal::type_name(self), "outputs");
      y = std::move(*r);
    }
  if (call) arm_output_node(call, y);
  return y;
}

}  // namespace ember::nn
