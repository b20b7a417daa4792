// defines: Module::operator() and the module hooks. Forward hooks run around forward(); a full backward hook is
// armed per call by two identity nodes in the autograd graph — one on the output (it sees grad_output first,
// the tape runs it before anything inside the module) and one on the input (it sees grad_input last and calls
// the hooks) — so the engine needs no knowledge of modules.
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

HookHandle Module::add_forward_pre_hook(ForwardPreHook fn) {
  const uint64_t id = add(state_->hooks, &internal::ModuleHooks::pre, std::move(fn), "register_forward_pre_hook");
  return {state_->hooks, id};
}
HookHandle Module::add_forward_hook(ForwardHook fn) {
  const uint64_t id = add(state_->hooks, &internal::ModuleHooks::post, std::move(fn), "register_forward_hook");
  return {state_->hooks, id};
}
HookHandle Module::add_backward_hook(BackwardHook fn) {
  const uint64_t id =
      add(state_->hooks, &internal::ModuleHooks::backward, std::move(fn), "register_full_backward_hook");
  return {state_->hooks, id};
}

// With no hook registered (the common case) this is one test and a virtual call.
Tensor Module::operator()(const Tensor& x) const {
  // An OutOfMemoryError and memory::plan name the module path; a root's own ops, its type.
  const std::string* type = nullptr;
  if (state_->name.empty()) {
    std::call_once(state_->type_once, [this] { state_->type_name = internal::type_name(*this); });
    type = &state_->type_name;
  }
  memory::ModuleScope where(&state_->name, type);
  const auto& hooks = state_->hooks;
  if (!hooks || hooks->empty()) [[likely]]
    return const_cast<Module*>(this)->forward(x);
  return call_with_hooks(x);
}

namespace {
// One call of a module with backward hooks: what its two identity nodes share.
struct BackwardCall {
  std::shared_ptr<internal::ModuleHooks> hooks;
  // The module, alive until backward: the object itself when a shared_ptr owns it (a container's element), else a
  // Module handle on the same state (the caller's object, on the stack, may be gone by the time backward runs).
  std::shared_ptr<Module> module;
  std::string who;             // its type name, for messages
  bool input_tracked = false;  // the input requires grad: the input node calls the hooks
  Shape in_shape;
  DType in_dtype = kFloat32;
  Device in_device = Device::cpu();
  std::vector<Tensor> grad_output;  // set by the output node, consumed by the input node
};

// Runs the backward hooks in order, each on the grad_input the previous one left.
void run_backward_hooks(BackwardCall& c, std::vector<Tensor>& grad_input) {
  const auto hooks = c.hooks->backward;  // a copy: a hook may remove itself
  const std::vector<Tensor> grad_output = c.grad_output.empty() ? std::vector<Tensor>(1) : std::move(c.grad_output);
  c.grad_output.clear();
  for (const auto& [_, fn] : hooks) {
    std::optional<std::vector<Tensor>> r = fn(*c.module, grad_input, grad_output);
    if (!r) continue;
    const std::string& who = c.who;
    EMBER_CHECK_VALUE(r->size() == grad_input.size(), "register_full_backward_hook: the hook of ", who, " returned ",
                      r->size(), " gradients for ", grad_input.size(), " input");
    const Tensor& g = (*r)[0];
    if (!c.input_tracked) {
      EMBER_CHECK_VALUE(!g.defined(), "register_full_backward_hook: the hook of ", who,
                        " returned a gradient for an input that does not require grad (return std::nullopt or an "
                        "undefined tensor)");
      continue;
    }
    if (g.defined()) {
      EMBER_CHECK_SHAPE(g.shape() == c.in_shape, "register_full_backward_hook: the hook of ", who,
                        " returned a gradient of shape ", g.shape(), " for an input of shape ", c.in_shape);
      EMBER_CHECK_DTYPE(g.dtype() == c.in_dtype, "register_full_backward_hook: the hook of ", who, " returned a ",
                        g.dtype(), " gradient for a ", c.in_dtype, " input");
      EMBER_CHECK_DEVICE(g.device() == c.in_device, "register_full_backward_hook: the hook of ", who,
                         " returned a gradient on ", g.device(), " for an input on ", c.in_device);
    }
    grad_input = std::move(*r);
  }
}
}  // namespace

Tensor Module::call_with_hooks(const Tensor& input) const {
  Module& self = const_cast<Module&>(*this);
  const std::shared_ptr<internal::ModuleHooks> hooks = state_->hooks;  // alive even if a hook removes the rest
  Tensor x = input;
  for (const auto& [_, fn] : std::vector(hooks->pre))
    if (std::optional<Tensor> r = fn(self, x); r && r->defined()) x = *r;

  std::shared_ptr<BackwardCall> call;
  if (!hooks->backward.empty() && GradMode::is_enabled()) {
    call = std::make_shared<BackwardCall>();
    call->hooks = hooks;
    call->module = std::const_pointer_cast<Module>(weak_from_this().lock());
    if (!call->module) call->module = std::make_shared<Module>(static_cast<const Module&>(self));
    call->who = internal::type_name(self);
    call->input_tracked = x.defined() && x.requires_grad();
    if (call->input_tracked) {
      call->in_shape = x.shape();
      call->in_dtype = x.dtype();
      call->in_device = x.device();
      // The module computes from an alias of its input whose node hands grad_input to the hooks. Marked a view:
      // an in-place change of it inside forward would rewrite the caller's tensor behind the caller's graph, so
      // it is refused (as PyTorch does).
      Tensor alias = raw::alias(x);
      autograd::record("ModuleBackwardHook", {x}, {alias}, /*outputs_are_views=*/true)
          .backward([call](const autograd::Grads& g) -> autograd::Grads {
            std::vector<Tensor> grad_input = {g[0]};
            run_backward_hooks(*call, grad_input);
            return grad_input;
          });
      x = alias;
    }
  }

  Tensor y = self.forward(x);
  for (const auto& [_, fn] : std::vector(hooks->post))
    if (std::optional<Tensor> r = fn(self, x, y); r && r->defined()) y = *r;

  if (call && y.defined() && y.requires_grad()) {
    Tensor alias = raw::alias(y);
    autograd::record("ModuleBackwardHook", {y}, {alias}).backward([call](const autograd::Grads& g) -> autograd::Grads {
      call->grad_output = {g[0]};
      if (!call->input_tracked) {  // no input node will come: the hooks run now, with an undefined grad_input
        std::vector<Tensor> grad_input(1);
        run_backward_hooks(*call, grad_input);
      }
      return {g[0]};
    });
    y = alias;
  }
  return y;
}

}  // namespace ember::nn
