// defines: GradMode, anomaly mode's flag, Node bookkeeping, SavedTensor, AccumulateGrad, record() and the
// autograd parts of Tensor (requires_grad_, grad, set_grad, is_leaf).
#include "ember/autograd/node.h"
#include "ember/autograd/op_def.h"

#include <sstream>
#include <utility>

#include "ember/autograd/anomaly.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/hooks.h"
#include "ember/core/memory_context.h"
#include "ember/core/memory_plan.h"
#include "ember/core/raw_ops.h"

namespace ember {

namespace {
thread_local bool t_grad_enabled = true;
thread_local bool t_anomaly = false;
thread_local bool t_create_graph = false;
std::atomic<uint64_t> g_next_seq{0};
}  // namespace

bool GradMode::is_enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool on) { t_grad_enabled = on; }

namespace autograd {

DetectAnomalyGuard::DetectAnomalyGuard() : prev_(t_anomaly) { t_anomaly = true; }
DetectAnomalyGuard::~DetectAnomalyGuard() { t_anomaly = prev_; }
bool anomaly_enabled() { return t_anomaly; }
bool create_graph_enabled() { return t_create_graph; }
CreateGraphScope::CreateGraphScope(bool on) : prev_(t_create_graph) { t_create_graph = on; }
CreateGraphScope::~CreateGraphScope() { t_create_graph = prev_; }

std::atomic<int64_t> Node::live{0};
Node::Node(const char* n, std::vector<Edge> nx)
    : name(n), seq(g_next_seq.fetch_add(1, std::memory_order_relaxed)), next(std::move(nx)) {
  live.fetch_add(1, std::memory_order_relaxed);
}
// Releasing a long chain would recurse once per node (each node's last reference lives in the next one's
// edges) and overflow the stack. Instead the edges whose node would die with us are moved to a local stack
// and released one at a time, each with its own edges already taken away.
Node::~Node() {
  live.fetch_sub(1, std::memory_order_relaxed);
  std::vector<std::shared_ptr<Node>> dying;
  auto take = [&dying](std::vector<Edge>& edges) {
    for (Edge& e : edges)
      if (e.fn && e.fn.use_count() == 1) dying.push_back(std::move(e.fn));
    edges.clear();
  };
  take(next);
  while (!dying.empty()) {
    std::shared_ptr<Node> n = std::move(dying.back());
    dying.pop_back();
    take(n->next);
  }  // n is destroyed here with no edges left
}

Grads LambdaNode::apply(Grads&& grad_outputs) {
  EMBER_CHECK(fn_ != nullptr, Error, name,
              ": trying to backward through the graph a second time (or after its saved tensors were freed); "
              "pass retain_graph=true to the first backward() if you need to go through it again");
  return fn_(grad_outputs);
}

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> l) : Node("AccumulateGrad", {}), leaf(std::move(l)) {}

Grads AccumulateGrad::apply(Grads&& grad_outputs) {
  Tensor& g = grad_outputs[0];
  if (!g.defined()) return {};
  auto* m = static_cast<AutogradMeta*>(leaf->autograd_meta.get());
  if (!m->grad.defined()) {
    // Steal the incoming buffer when nothing else holds it; otherwise keep a private copy, because .grad is
    // later updated in place (accumulation, zero_grad) and must not alias another tensor.
    // .grad takes its parameter's layout (contiguous, or channels-last for a channels-last parameter), as in PyTorch.
    const MemoryFormat f = Tensor(leaf).suggest_memory_format();
    m->grad = g.impl_ptr().use_count() == 1 && g.is_contiguous(f) ? raw::alias(g) : raw::clone(g, f);
    memory::tag(m->grad, memory::Category::kGradients);
  } else {
    raw::binary_(BinaryOp::Add, m->grad, g);
  }
  if (!m->post_accumulate_hooks.empty()) {
    const Tensor param(leaf);
    auto hooks = m->post_accumulate_hooks;  // a hook may remove itself
    for (auto& [id, hook] : hooks) hook(param);
  }
  return {};
}

const char* AutogradMeta::grad_fn_name() const { return grad_fn ? grad_fn->name : nullptr; }

AutogradMeta* meta(const Tensor& t) { return static_cast<AutogradMeta*>(t.impl()->autograd_meta.get()); }
AutogradMeta& ensure_meta(const Tensor& t) {
  if (!t.impl()->autograd_meta) t.impl()->autograd_meta = std::make_unique<AutogradMeta>();
  return *meta(t);
}

struct SavedTensor::Slot {
  Tensor data;  // an alias without autograd state
  uint32_t version = 0;
  // Where the saved tensor sat in the graph when saved (an input that requires grad): its grad_fn, or a leaf's
  // accumulator. An edge, not the tensor handle: the handle would follow later in-place changes of the tensor, and
  // an in-place op whose graph reaches back to this node would then make a cycle.
  Edge input;
  std::weak_ptr<TensorImpl> source;  // what was saved, for record() to recognise the op's outputs
  std::weak_ptr<Node> output_of;     // set by record(): the tensor is output `output_nr` of that node
  uint32_t output_nr = 0;
};

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  slot_ = std::make_shared<Slot>();
  slot_->data = raw::alias(t);
  memory::tag(t, memory::Category::kActivations);  // held until backward (memory::plan's categories)
  slot_->version = t.version();
  slot_->source = t.impl_ptr();
  if (!t.requires_grad()) return;
  // One of the outputs of the op being recorded (its grad_fn is that node, still recording): remember the place,
  // not the handle, which would own the node. Any other tensor: its edge (no cycle: the node's edges hold the
  // same node already).
  const AutogradMeta* m = meta(t);
  if (m && m->grad_fn && m->grad_fn->recording) {
    slot_->output_of = m->grad_fn;
    slot_->output_nr = m->output_nr;
  } else {
    slot_->input = gradient_edge(t);
  }
}

SavedTensor::SavedTensor(const Tensor& value, Edge where) : SavedTensor(value) {
  if (slot_) slot_->input = std::move(where);
}

void SavedTensor::adopt_output(const std::shared_ptr<Node>& node, const std::vector<Tensor>& outputs) {
  if (!slot_) return;
  const std::shared_ptr<TensorImpl> src = slot_->source.lock();
  for (size_t i = 0; src && i < outputs.size(); ++i)
    if (outputs[i].defined() && outputs[i].impl() == src.get()) {
      slot_->input = Edge{};
      slot_->output_of = node;
      slot_->output_nr = static_cast<uint32_t>(i);
      return;
    }
}

Tensor SavedTensor::get() const {
  if (!slot_) return {};
  const Tensor& t = slot_->data;
  if (t.version() != slot_->version) {  // named by the backward running now (the engine's memory scope)
    const char* op = memory::current_context().op;
    throw Error(detail::str(op ? op : "backward", ": one of the tensors saved for backward (", t.dtype(), t.shape(),
                            ") was modified by an in-place operation after it was saved (its version is ", t.version(),
                            ", expected ", slot_->version, "); use an out-of-place op or clone() it first"));
  }
  if (!t_create_graph) return t;
  // The value re-attached where it sat in the graph: gradients flowing into it reach that node (for a leaf, its
  // accumulator, which autograd::grad captures and backward() accumulates from).
  Edge e = slot_->input;
  if (!e.fn) e = {slot_->output_of.lock(), slot_->output_nr};
  if (!e.fn) return t;
  Tensor r = raw::alias(t);
  AutogradMeta& m = ensure_meta(r);
  m.grad_fn = std::move(e.fn);
  m.output_nr = e.input_nr;
  return r;
}

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}
bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  AutogradMeta* m = meta(t);
  if (m && m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!t.impl()->requires_grad) return {};
  AutogradMeta& leaf = ensure_meta(t);
  std::shared_ptr<Node> acc = leaf.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    leaf.grad_accumulator = acc;
  }
  return {acc, 0};
}

Recording record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                 bool outputs_are_views) {
  std::vector<Edge> next;
  next.reserve(inputs.size());
  for (const Tensor& t : inputs) next.push_back(gradient_edge(t));
  auto node = std::make_shared<LambdaNode>(name, std::move(next), nullptr);
  node->recording = true;
  node->num_outputs = static_cast<uint32_t>(outputs.size());
  if (t_anomaly) {
    std::ostringstream os;
    os << name << " -> " << outputs[0].dtype() << outputs[0].shape();
    node->created = os.str();
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    AutogradMeta& m = ensure_meta(outputs[i]);
    m.grad_fn = node;
    m.output_nr = static_cast<uint32_t>(i);
    m.is_view = outputs_are_views;
  }
  return Recording(std::move(node));
}

Recording record(const OpDef& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                 bool outputs_are_views) {
  Recording r = record(op.name, inputs, outputs, outputs_are_views);
  r.node()->double_differentiable = op.derivative == Derivative::kTwice;
  return r;
}

void Recording::backward(LambdaNode::Fn fn) && {
  node_->set_fn(std::move(fn));
  node_->recording = false;
}

}  // namespace autograd

// --- Tensor's autograd members
bool Tensor::requires_grad() const {
  const autograd::AutogradMeta* m = autograd::meta(*this);
  return impl()->requires_grad || (m && m->grad_fn);
}
Tensor Tensor::grad() const {
  const autograd::AutogradMeta* m = autograd::meta(*this);
  return m ? m->grad : Tensor();
}
void Tensor::set_grad(const Tensor& g) {
  if (g.defined())
    EMBER_CHECK_SHAPE(g.shape() == shape() && g.dtype() == dtype() && g.device() == device(), "set_grad: gradient ",
                      g.dtype(), g.shape(), " on ", g.device(), " does not match tensor ", dtype(), shape(), " on ",
                      device());
  autograd::ensure_meta(*this).grad = g;
}
bool Tensor::is_leaf() const {
  const autograd::AutogradMeta* m = autograd::meta(*this);
  return !(m && m->grad_fn);
}
std::string_view Tensor::grad_fn_name() const {
  const autograd::AutogradMeta* m = autograd::meta(*this);
  return m && m->grad_fn ? m->grad_fn->name : "";
}

}  // namespace ember

// --- hooks.h: post-accumulate hooks live in the leaf's AutogradMeta, so they go with the tensor.
namespace ember::autograd {
namespace {
std::atomic<uint64_t> next_hook_id{1};
}

HookHandle register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(const Tensor&)> hook) {
  EMBER_CHECK_VALUE(leaf.defined() && leaf.is_leaf() && leaf.requires_grad(),
                    "register_post_accumulate_grad_hook: expected a leaf tensor that requires grad, got ",
                    leaf.defined() ? detail::str(leaf.dtype(), leaf.shape(), leaf.is_leaf() ? "" : " (not a leaf)",
                                                 leaf.requires_grad() ? "" : " (requires_grad is false)")
                                   : std::string("an undefined tensor"));
  EMBER_CHECK_VALUE(static_cast<bool>(hook), "register_post_accumulate_grad_hook: the hook is empty");
  const uint64_t id = next_hook_id.fetch_add(1);
  ensure_meta(leaf).post_accumulate_hooks.emplace_back(id, std::move(hook));
  return HookHandle([t = std::weak_ptr<TensorImpl>(leaf.impl_ptr()), id] {
    auto impl = t.lock();
    if (!impl || !impl->autograd_meta) return;
    std::erase_if(static_cast<AutogradMeta*>(impl->autograd_meta.get())->post_accumulate_hooks,
                  [&](const auto& h) { return h.first == id; });
  });
}

void HookHandle::remove() {
  if (remover_) std::exchange(remover_, nullptr)();
}

}  // namespace ember::autograd

namespace ember {
// A leaf keeps its hooks in its AutogradMeta (they go with the tensor); a computed tensor's hooks sit on its
// grad_fn, keyed by its output number (they go with the graph, as the tensor's gradient does).
autograd::HookHandle Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  using namespace autograd;
  EMBER_CHECK_VALUE(
      defined() && requires_grad(), "register_hook: expected a tensor that requires grad, got ",
      defined() ? detail::str(dtype(), shape(), " (requires_grad is false)") : std::string("an undefined tensor"));
  EMBER_CHECK_VALUE(static_cast<bool>(hook), "register_hook: the hook is empty");
  const uint64_t id = next_hook_id.fetch_add(1);
  AutogradMeta* m = meta(*this);
  if (m && m->grad_fn) {
    m->grad_fn->tensor_hooks.push_back({id, m->output_nr, std::move(hook)});
    return HookHandle([n = std::weak_ptr<Node>(m->grad_fn), id] {
      if (auto node = n.lock()) std::erase_if(node->tensor_hooks, [&](const auto& h) { return h.id == id; });
    });
  }
  ensure_meta(*this).leaf_hooks.push_back({id, 0, std::move(hook)});
  return HookHandle([t = std::weak_ptr<TensorImpl>(impl_ptr()), id] {
    auto impl = t.lock();
    if (!impl || !impl->autograd_meta) return;
    std::erase_if(static_cast<AutogradMeta*>(impl->autograd_meta.get())->leaf_hooks,
                  [&](const auto& h) { return h.id == id; });
  });
}
}  // namespace ember
