// defines: the autograd graph — Node (a backward function with edges to the nodes of its inputs and a tape
// position), Edge, SavedTensor (a tensor kept for backward, checked against in-place changes), AutogradMeta
// (per-tensor state) and record(), which ops call to attach a node to their outputs.
//
// Note [Tape order by sequence number]: every node takes the next number of one global counter when it is
// created, and a node is always created after the nodes of its inputs, so running nodes in decreasing
// sequence number is a valid reverse topological order. Outputs own their node (and a node owns its inputs'
// nodes through its edges), so a graph is freed as soon as no tensor can reach it.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::autograd {

struct Node;

struct Edge {
  std::shared_ptr<Node> fn;  // null: this input needs no gradient
  uint32_t input_nr = 0;     // which output of fn the gradient belongs to
};

using Grads = std::vector<Tensor>;
// A gradient hook (Tensor::register_hook): gets the gradient, returns a replacement or an undefined tensor.
using TensorHook = std::function<Tensor(const Tensor&)>;
struct TensorHookEntry {
  uint64_t id;
  uint32_t output_nr;  // which output of the node the hooked tensor is
  TensorHook fn;
};

// CONVENTION: apply() gets one gradient per output (undefined = zero) and returns one per edge in `next`
// (undefined = none). It runs with grad mode off. release() drops saved tensors; applying a released node
// throws.
struct Node {
  Node(const char* name, std::vector<Edge> next);
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  virtual Grads apply(Grads&& grad_outputs) = 0;
  virtual void release() {}
  virtual bool is_accumulator() const { return false; }

  const char* name;
  uint64_t seq;
  std::vector<Edge> next;
  // How many outputs the node computed (set by record()): the engine hands apply() exactly this many gradients,
  // undefined for the outputs no gradient reached, so a backward never indexes past the ones that came.
  uint32_t num_outputs = 1;
  std::string created;  // where it was recorded (filled in anomaly mode only)
  // A create_graph pass may run its backward: every op's backward is differentiable again (built of recorded ops,
  // or through the op's composite: autograd::grads_by_recompute). The exceptions clear it — checkpoint, and custom
  // Functions marked once_differentiable — and a create_graph pass refuses them rather than return a wrong
  // second derivative.
  bool double_differentiable = true;
  // Between record() and Recording::backward(): the op is still saving what its backward keeps (SavedTensor
  // recognises the op's own outputs by it).
  bool recording = false;
  std::vector<TensorHookEntry> tensor_hooks;  // hooks of the non-leaf tensors this node computed
  static std::atomic<int64_t> live;           // nodes alive now (tests check that graphs are freed)
};

// A node whose backward is a closure (most ops: their backward fits in a few lines).
struct LambdaNode final : Node {
  using Fn = std::function<Grads(const Grads&)>;
  LambdaNode(const char* name, std::vector<Edge> next, Fn fn) : Node(name, std::move(next)), fn_(std::move(fn)) {}
  Grads apply(Grads&& grad_outputs) override;
  void release() override {
    if (!saves_nothing) fn_ = nullptr;
  }
  void set_fn(Fn fn) { fn_ = std::move(fn); }
  // Its backward keeps no tensor (views, copies, casts: it needs only shapes, dtypes, devices), so release() leaves
  // it runnable: backward passes that share it each get through, as PyTorch's nodes without saved variables — an
  // autocast region's one cast of a parameter serves a backward per micro-batch (gradient accumulation).
  bool saves_nothing = false;

 private:
  Fn fn_;
};

// The sink of a leaf: adds incoming gradients into the leaf's .grad.
struct AccumulateGrad final : Node {
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  Grads apply(Grads&& grad_outputs) override;
  bool is_accumulator() const override { return true; }
  std::shared_ptr<TensorImpl> leaf;
};

// (A leaf's requires_grad flag is TensorImpl::requires_grad, set by core.)
struct AutogradMeta final : AutogradMetaBase {
  const char* grad_fn_name() const override;
  bool is_view = false;  // produced by a view op from a tensor that requires grad
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;
  // Run by the leaf's AccumulateGrad after each accumulation (hooks.h), in registration order; key: handle id.
  std::vector<std::pair<uint64_t, std::function<void(const Tensor&)>>> post_accumulate_hooks;
  // A leaf's gradient hooks (Tensor::register_hook), run before accumulation; non-leaves keep theirs on grad_fn.
  std::vector<TensorHookEntry> leaf_hooks;
};

AutogradMeta* meta(const Tensor& t);  // null when the tensor has no autograd state
AutogradMeta& ensure_meta(const Tensor& t);

// A tensor saved for backward: an alias without autograd state (so saving an op's own output makes no
// cycle), plus the storage version at save time. For double backward it also remembers the tensor's place in
// the graph: an input's own handle, or — for the op's outputs, which record() recognises — the node and output
// number, re-attached when a create_graph pass reads it (the node is alive then: it is the one running).
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  // A value saved for backward that sits at graph position `where` (an in-place op's input: a copy of self made
  // before the op, whose gradient belongs to self's earlier grad_fn).
  SavedTensor(const Tensor& value, Edge where);
  // Throws if the tensor was modified in place since saved, naming the op whose backward is running. In a
  // create_graph pass: the tensor with its graph.
  Tensor get() const;
  // A tensor saved before its op was recorded (a custom Function's ctx.save_for_backward in forward) that is one
  // of `outputs` of `node`: kept as that place in the graph, as if saved after record().
  void adopt_output(const std::shared_ptr<Node>& node, const std::vector<Tensor>& outputs);

  struct Slot;

 private:
  std::shared_ptr<Slot> slot_;
};
inline SavedTensor save(const Tensor& t) { return SavedTensor(t); }

// True when grad mode is on and any defined input requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);
// The edge a gradient for `t` flows along: its grad_fn, its leaf accumulator, or none.
Edge gradient_edge(const Tensor& t);
// Recording an op takes two steps, so that what its backward keeps is saved once its node exists:
//   record("name", {x}, {y}).backward([sy = save(y)](const Grads& g) -> Grads { ... });
// record() makes a LambdaNode named `name` with edges to `inputs` (read now: an in-place op's self still has its
// previous grad_fn) and makes it the grad_fn of each output (output i gets output_nr i); backward() gives the node
// its function. A tensor saved in between that is one of the outputs is recognised by its grad_fn, the node being
// recorded, and kept as a place in the graph instead of a handle (which would own the node: a cycle). No state
// outside the node: an op's saved tensors are the backward's captures, passed explicitly. (The library's ops call
// op_def.h's record(OpDef), which names and marks the node from the op table.)
class Recording {
 public:
  explicit Recording(std::shared_ptr<LambdaNode> node) : node_(std::move(node)) {}
  void backward(LambdaNode::Fn fn) &&;
  const std::shared_ptr<LambdaNode>& node() const { return node_; }

 private:
  std::shared_ptr<LambdaNode> node_;
};
Recording record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                 bool outputs_are_views = false);

// Anomaly mode (see anomaly.h): on this thread, whether to check every gradient for NaN/Inf.
bool anomaly_enabled();

// Whether this thread is running a create_graph backward pass (autograd::grad with .create_graph): backward
// functions then record their own graph, and saved tensors come back with theirs.
bool create_graph_enabled();
class CreateGraphScope {
 public:
  explicit CreateGraphScope(bool on);
  ~CreateGraphScope();
  CreateGraphScope(const CreateGraphScope&) = delete;
  CreateGraphScope& operator=(const CreateGraphScope&) = delete;

 private:
  bool prev_;
};

}  // namespace ember::autograd
