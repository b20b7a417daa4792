// defines: the backward engine. It collects the nodes reachable from the roots, sorts them by decreasing
// sequence number (see Note [Tape order by sequence number]) and sweeps them once, summing the gradients
// that reach each node's outputs in a side buffer. No recursion: deep graphs cannot overflow the stack.
#include "ember/autograd/engine.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "ember/autograd/amp.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/hooks.h"
#include "ember/autograd/node.h"
#include "ember/autograd/ops.h"
#include "ember/core/factory.h"
#include "ember/core/memory_context.h"
#include "ember/core/raw_ops.h"
#include "grad_utils.h"

namespace ember::autograd {
namespace {

// The backward pass running on this thread (nesting: a hook may itself run backward) and its end callbacks.
thread_local int backward_depth = 0;
thread_local std::vector<std::function<void()>>* end_callbacks = nullptr;

bool all_finite(const Tensor& g) {
  for (double v : g.to_vector<double>())
    if (!std::isfinite(v)) return false;
  return true;
}

struct Capture {  // autograd::grad: where each requested input's gradient is read
  Node* node;
  uint32_t output_nr;
};

// Runs the gradient hooks of the tensors `n` computed (or of its leaf) on the gradients about to be used.
void run_tensor_hooks(Node& n, Grads& grads) {
  const std::vector<TensorHookEntry>* registered = &n.tensor_hooks;
  if (n.is_accumulator()) {
    auto& leaf = *static_cast<AccumulateGrad&>(n).leaf;
    if (!leaf.autograd_meta) return;
    registered = &static_cast<AutogradMeta*>(leaf.autograd_meta.get())->leaf_hooks;
  }
  if (registered->empty()) return;                         // the common case: nothing copied
  const std::vector<TensorHookEntry> hooks = *registered;  // a copy: a hook may remove itself
  for (const TensorHookEntry& h : hooks) {
    if (h.output_nr >= grads.size() || !grads[h.output_nr].defined()) continue;
    Tensor r = h.fn(grads[h.output_nr]);
    if (!r.defined()) continue;
    const Tensor& g = grads[h.output_nr];
    EMBER_CHECK_SHAPE(r.shape() == g.shape() && r.dtype() == g.dtype() && r.device() == g.device(),
                      "register_hook: the hook on a tensor of ", n.name, " returned ", r.dtype(), r.shape(), " on ",
                      r.device(), " for a gradient of ", g.dtype(), g.shape(), " on ", g.device());
    grads[h.output_nr] = std::move(r);
  }
}

// One backward pass, the engine proper, in four named steps: seed the roots' gradients, collect the nodes reachable
// from them in tape order, prune them to the nodes on a path to a requested input (grad() only), and run each node a
// gradient reached. With `captures`, gradients are returned instead of accumulated into leaves. With create_graph,
// the backward functions run with grad mode on, so the gradients carry a graph of their own.
class Sweep {
 public:
  Sweep(bool retain_graph, bool create_graph, const std::vector<Capture>* captures, std::vector<Tensor>* captured)
      : retain_graph_(retain_graph || create_graph),  // the new graph refers to this one's nodes and saved tensors
        create_graph_(create_graph),
        captures_(captures),
        captured_(captured) {
    if (captures_)
      for (size_t i = 0; i < captures_->size(); ++i) capture_at_[(*captures_)[i].node].push_back(i);
  }

  // The roots' gradients (ones for a one-element root given none), in each root's dtype.
  void seed(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads_in) {
    for (size_t i = 0; i < roots.size(); ++i) {
      const Tensor& r = roots[i];
      EMBER_CHECK(r.defined(), Error, "backward: output ", i, " is an undefined tensor");
      Edge e = gradient_edge(r);
      EMBER_CHECK(e.fn != nullptr, Error, "backward: output ", i, " (", r.dtype(), r.shape(),
                  ") does not require grad and has no grad_fn: nothing it depends on requires grad");
      Tensor g = grads_in.empty() ? Tensor() : grads_in[i];
      if (!g.defined()) {
        EMBER_CHECK_SHAPE(r.numel() == 1, "backward: grad can be implicitly created only for a one-element output, ",
                          "got ", r.shape(), "; pass a gradient of that shape");
        g = ones(r.shape(), {.dtype = r.dtype(), .device = r.device()});
      } else {
        EMBER_CHECK_SHAPE(g.shape() == r.shape(), "backward: gradient ", g.shape(), " does not match output ",
                          r.shape());
      }
      add_grad(e.fn.get(), e.input_nr, create_graph_ ? g.to(r.dtype()) : raw::cast(g, r.dtype()));
      order_.push_back(e.fn);  // the walk's starting points (collect() replaces them with the whole order)
    }
  }

  // Every node reachable from the roots, by decreasing sequence number: a node before the inputs it feeds (Note
  // [Tape order by sequence number]). An explicit stack: deep graphs cannot overflow the call stack.
  void collect() {
    std::vector<std::shared_ptr<Node>> stack = std::move(order_), order;
    std::unordered_set<Node*> seen;
    while (!stack.empty()) {
      std::shared_ptr<Node> n = std::move(stack.back());
      stack.pop_back();
      if (!seen.insert(n.get()).second) continue;
      for (const Edge& e : n->next)
        if (e.fn && !seen.count(e.fn.get())) stack.push_back(e.fn);
      order.push_back(std::move(n));
    }
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a->seq > b->seq; });
    order_ = std::move(order);
  }

  // grad(): only the nodes on a path to a requested input run (as in PyTorch). The others are neither applied nor
  // released, so a later backward() through them still works, and a create_graph pass never refuses an op it did
  // not need. Walked inputs first, so that a node's inputs are marked before it is asked about.
  void prune() {
    if (!captures_) return;
    for (auto it = order_.rbegin(); it != order_.rend(); ++it)
      if (capture_at_.count(it->get()) || feeds_needed(**it)) needed_.insert(it->get());
  }

  // Each node a gradient reached, in order: its hooks, the captures grad() asked for, its backward, and the
  // gradients it returns passed on to the nodes it feeds.
  void run() {
    for (const std::shared_ptr<Node>& n : order_) {
      auto it = buffer_.find(n.get());
      if (it == buffer_.end()) continue;  // no gradient reached it
      Grads grads = std::move(it->second);
      buffer_.erase(it);
      if (grads.size() < n->num_outputs) grads.resize(n->num_outputs);  // apply()'s convention: one per output
      run_tensor_hooks(*n, grads);
      if (captures_ && !capture(*n, grads)) continue;
      pass_on(*n, apply(*n, std::move(grads)));
    }
  }

 private:
  // Sums of gradients: recorded (differentiable) in a create_graph pass, a raw add otherwise.
  Tensor add(const Tensor& a, const Tensor& b) const {
    return create_graph_ ? a + b : raw::binary(BinaryOp::Add, a, b);
  }
  // A second gradient for the same output is added into the first in place when the pass owns that one
  // (owns_gradient: a residual connection's sum needs no new buffer), else into a new one.
  void add_grad(Node* n, uint32_t nr, Tensor g) {
    Grads& b = buffer_[n];
    if (b.size() <= nr) b.resize(nr + 1);
    if (!b[nr].defined()) b[nr] = std::move(g);
    else if (owns_gradient(b[nr], g)) raw::binary_(BinaryOp::Add, b[nr], g);  // never in a create_graph pass
    else b[nr] = add(b[nr], g);
  }
  bool feeds_needed(const Node& n) const {
    for (const Edge& e : n.next)
      if (e.fn && needed_.count(e.fn.get())) return true;
    return false;
  }
  // Reads the gradients grad() asked for at this node; whether the node must still run (it feeds a needed node).
  // A requested input's own node, or a leaf, does not: grad() never touches .grad.
  bool capture(Node& n, const Grads& grads) {
    auto c = capture_at_.find(&n);
    if (c != capture_at_.end())
      for (size_t i : c->second) {
        const uint32_t nr = (*captures_)[i].output_nr;
        Tensor& into = (*captured_)[i];
        if (nr < grads.size() && grads[nr].defined()) into = into.defined() ? add(into, grads[nr]) : grads[nr];
      }
    return feeds_needed(n);
  }
  Grads apply(Node& n, Grads&& grads) {
    EMBER_CHECK(!create_graph_ || n.double_differentiable, Error, "grad(create_graph=true): the backward of ", n.name,
                " is not differentiable (a checkpoint, or a custom Function marked once_differentiable), so a ",
                "second derivative through it would be wrong; every built-in op's backward is");
    Grads out;
    {
      memory::OpScope op(n.name);  // an OutOfMemoryError names the backward of this op
      out = n.apply(std::move(grads));
    }
    if (!retain_graph_) n.release();
    return out;
  }
  void pass_on(Node& n, Grads&& out) {
    for (size_t i = 0; i < out.size() && i < n.next.size(); ++i) {
      const Edge& e = n.next[i];
      if (!e.fn || !out[i].defined() || (captures_ && !needed_.count(e.fn.get()))) continue;
      if (anomaly_enabled() && !all_finite(out[i]))
        throw Error(detail::str("anomaly: ", n.name, " produced non-finite values (nan or inf) in its gradient ",
                                "for input ", i, " (", out[i].dtype(), out[i].shape(), ")",
                                n.created.empty() ? "" : "; the op was recorded as ", n.created));
      add_grad(e.fn.get(), e.input_nr, std::move(out[i]));
    }
  }

  const bool retain_graph_, create_graph_;
  const std::vector<Capture>* captures_;
  std::vector<Tensor>* captured_;
  std::unordered_map<Node*, std::vector<size_t>> capture_at_;
  std::unordered_map<Node*, Grads> buffer_;   // the gradients that reached each node's outputs so far
  std::vector<std::shared_ptr<Node>> order_;  // after collect(): the nodes, a node before its inputs
  std::unordered_set<Node*> needed_;          // after prune(): the nodes on a path to a requested input
};

// The modes a backward pass runs in (grad mode on only to build a graph, no autocast, the backward memory phase),
// then its steps.
void sweep(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads_in, bool retain_graph, bool create_graph,
           const std::vector<Capture>* captures, std::vector<Tensor>* captured) {
  EMBER_CHECK_VALUE(grads_in.empty() || grads_in.size() == roots.size(), "backward: got ", grads_in.size(),
                    " gradients for ", roots.size(), " outputs");
  const bool prev_mode = GradMode::is_enabled();
  GradMode::set_enabled(create_graph);
  struct RestoreMode {
    bool prev;
    ~RestoreMode() { GradMode::set_enabled(prev); }
  } restore_mode{prev_mode};
  CreateGraphScope create_scope(create_graph);
  // Backward ops take the dtypes their forward chose; autocast would cast gradients again (PyTorch's engine too
  // runs backward without autocast).
  amp::AutocastSuspend no_autocast;
  memory::PhaseScope phase(memory::Phase::kBackward);
  Sweep s(retain_graph, create_graph, captures, captured);
  s.seed(roots, grads_in);
  s.collect();
  s.prune();
  s.run();
}

// sweep() between the bookkeeping of queue_callback: the callbacks queued during the sweep run after it (not
// when it threw), each once, in order.
void run(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads_in, bool retain_graph, bool create_graph,
         const std::vector<Capture>* captures, std::vector<Tensor>* captured) {
  std::vector<std::function<void()>> callbacks;
  auto* outer = end_callbacks;
  end_callbacks = &callbacks;
  ++backward_depth;
  struct Restore {
    std::vector<std::function<void()>>* outer;
    ~Restore() {
      --backward_depth;
      end_callbacks = outer;
    }
  } restore{outer};
  sweep(roots, grads_in, retain_graph, create_graph, captures, captured);
  for (size_t i = 0; i < callbacks.size(); ++i) {  // a callback may queue another
    auto fn = std::move(callbacks[i]);
    fn();
  }
}

}  // namespace

void queue_callback(std::function<void()> fn) {
  EMBER_CHECK(end_callbacks != nullptr, Error, "queue_callback: no backward pass is running on this thread");
  end_callbacks->push_back(std::move(fn));
}

bool in_backward() { return backward_depth > 0; }

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  run(roots, grads, retain_graph, false, nullptr, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const GradOptions& opts) {
  return grad(outputs, inputs, {}, opts);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& opts) {
  const bool allow_unused = opts.allow_unused;
  std::vector<Capture> caps;
  std::vector<std::shared_ptr<Node>> keep;  // accumulators created here must live through the run
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    EMBER_CHECK(x.defined() && x.requires_grad(), Error, "grad: input ", i, " does not require grad");
    Edge e = gradient_edge(x);
    keep.push_back(e.fn);
    caps.push_back({e.fn.get(), e.input_nr});
  }
  std::vector<Tensor> result(inputs.size());
  run(outputs, grad_outputs, opts.retain_graph, opts.create_graph, &caps, &result);
  for (size_t i = 0; i < result.size(); ++i)
    EMBER_CHECK(allow_unused || result[i].defined(), Error, "grad: input ", i, " (", inputs[i].dtype(),
                inputs[i].shape(),
                ") was not used to compute the outputs (pass allow_unused=true to get an undefined tensor)");
  return result;
}

std::vector<Tensor> grads_by_recompute(const std::vector<Tensor>& inputs,
                                       const std::function<Tensor(const std::vector<Tensor>&)>& composite,
                                       const Tensor& grad_output) {
  // Each input enters the composite through its own identity view, and the gradients are taken at the views: the
  // partial derivative through that argument alone. Taken at the inputs themselves, an input that is a function of
  // another (one weight passed as w and as w.t()) would count twice. The views stay in the graph this pass builds,
  // so the gradients still reach the inputs when differentiated again.
  std::vector<Tensor> wrt, slots = inputs;
  std::vector<size_t> at;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      slots[i] = inputs[i].reshape(inputs[i].shape());
      wrt.push_back(slots[i]);
      at.push_back(i);
    }
  std::vector<Tensor> out(inputs.size());
  if (wrt.empty()) return out;
  const Tensor y = composite(slots);
  const std::vector<Tensor> gs = grad({y}, wrt, {grad_output}, {.create_graph = true, .allow_unused = true});
  for (size_t k = 0; k < at.size(); ++k) out[at[k]] = gs[k];
  return out;
}

}  // namespace ember::autograd

namespace ember {
void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  autograd::backward({*this}, {grad}, retain_graph);
}
}  // namespace ember
