// defines: the definition of every public differentiable op — its name, its autocast rule and whether its
// backward is differentiable again — as one X-macro table, and OpEntry, the entry wrapper each of those ops runs
// through. The name in the table is the op's one spelling in the library: out-of-memory messages, memory plans'
// per-op rows, grad_fn names and the "<op>: ..." of error messages all read it from here.
//
// An op written with it (the whole pattern; autograd/src/elementwise.cpp has many):
//
//   Tensor softmax(const Tensor& x_in, int64_t dim) {
//     OpEntry op(opdef::softmax);        // opens the memory scope: an OOM in here names "softmax"
//     const Tensor& x = op.in(x_in);     // autocast: softmax computes 16-bit inputs in float32
//     Tensor y = raw::softmax(x, dim);
//     if (op.needs_grad({&x}))
//       op.record({x}, {y}).backward([dim, sy = save(y)](const Grads& g) -> Grads { ... sy.get() ... });
//     return y;
//   }
//
// The saved tensors are the lambda's captures, made after record() (C++17 evaluates `record(...)` before the
// argument of `.backward(...)`): a saved output is then recognised by its grad_fn, the node being recorded.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "ember/autograd/amp.h"
#include "ember/autograd/node.h"
#include "ember/core/memory_context.h"
#include "ember/core/op_list.h"

namespace ember::autograd {

// What autocast (amp.h) does to an op's inputs: PyTorch's three lists, plus the ops on none of them.
enum class Autocast : uint8_t {
  kKeep,     // runs in its inputs' dtypes (elementwise arithmetic, views, most activations)
  kFp32,     // range/precision sensitive: 16-bit float inputs computed in float32 (exp, softmax, norms, losses)
  kLower,    // matrix products: float32 inputs in the autocast dtype (matmul, linear, conv2d, attention)
  kPromote,  // several inputs: every floating one in the widest floating dtype among them (scatter_add)
};

// Twice: the backward is built of recorded ops (or of the op's composite, grads_by_recompute), so a create_graph
// pass differentiates it again. Once: a create_graph pass refuses the op rather than return a wrong derivative.
enum class Derivative : uint8_t { kTwice, kOnce };

struct OpDef {
  const char* name;
  Autocast autocast;
  Derivative derivative;
};

// X(name, autocast, derivative): the ops of ops.h, the Tensor members that record, nn's losses, checkpoint.
#define EMBER_AUTOGRAD_OPS(X) \
  /* (the elementwise kernels of op_list.h are ops as they stand: their definitions are opdef::of(UnaryOp::Exp), \
     opdef::of(BinaryOp::Add), from that list) */ \
  X(where, Keep, Twice) \
  X(clamp, Keep, Twice) \
  X(clamp_min, Keep, Twice) \
  X(clamp_max, Keep, Twice) \
  X(silu, Keep, Twice) \
  X(leaky_relu, Keep, Twice) \
  X(elu, Keep, Twice) \
  /* reductions and the softmax family */ \
  X(sum, Fp32, Twice) \
  X(mean, Keep, Twice) \
  X(max, Keep, Twice) \
  X(min, Keep, Twice) \
  X(var, Keep, Twice) \
  X(logsumexp, Fp32, Twice) \
  X(norm, Fp32, Twice) \
  X(cumsum, Fp32, Twice) \
  X(softmax, Fp32, Twice) \
  X(log_softmax, Fp32, Twice) \
  /* normalisation */ \
  X(batch_norm, Keep, Twice) /* 16-bit input and output, float32 statistics (PyTorch's autocast too) */ \
  X(batch_norm_relu, Keep, Twice) \
  X(layer_norm, Fp32, Twice) \
  X(rms_norm, Fp32, Twice) \
  /* products, convolution, pooling, attention */ \
  X(matmul, Lower, Twice) \
  X(linear, Lower, Twice) \
  X(linear_gelu_linear, Lower, Twice) \
  X(einsum, Lower, Twice) \
  X(conv2d, Lower, Twice) \
  X(max_pool2d, Keep, Twice) \
  X(avg_pool2d, Keep, Twice) \
  X(adaptive_avg_pool2d, Keep, Twice) \
  X(scaled_dot_product_attention, Lower, Twice) \
  /* joining, indexing, padding */ \
  X(cat, Keep, Twice) \
  X(stack, Keep, Twice) \
  X(pad, Keep, Twice) \
  X(split, Keep, Twice) \
  X(index_select, Keep, Twice) \
  X(index_add, Keep, Twice) \
  X(gather, Keep, Twice) \
  X(scatter_add, Promote, Twice) \
  X(masked_fill, Keep, Twice) \
  X(sort, Keep, Twice) \
  X(topk, Keep, Twice) \
  /* views and copies (Tensor members) */ \
  X(reshape, Keep, Twice) \
  X(view, Keep, Twice) \
  X(flatten, Keep, Twice) \
  X(squeeze, Keep, Twice) \
  X(unsqueeze, Keep, Twice) \
  X(transpose, Keep, Twice) \
  X(t, Keep, Twice) \
  X(permute, Keep, Twice) \
  X(expand, Keep, Twice) \
  X(slice, Keep, Twice) \
  X(select, Keep, Twice) \
  X(clone, Keep, Twice) \
  X(contiguous, Keep, Twice) \
  X(to, Keep, Twice) \
  /* in-place (Tensor members) */ \
  X(add_, Keep, Twice) \
  X(sub_, Keep, Twice) \
  X(mul_, Keep, Twice) \
  X(div_, Keep, Twice) \
  X(copy_, Keep, Twice) \
  X(fill_, Keep, Twice) \
  X(clamp_, Keep, Twice) \
  X(relu_, Keep, Twice) \
  /* losses (nn) */ \
  X(cross_entropy, Fp32, Twice) \
  X(logitcrossentropy, Fp32, Twice) \
  X(nll_loss, Fp32, Twice) \
  X(binary_cross_entropy_with_logits, Fp32, Twice) \
  X(mse_loss, Fp32, Twice) \
  X(l1_loss, Fp32, Twice) \
  X(smooth_l1_loss, Fp32, Twice) \
  X(huber_loss, Fp32, Twice) \
  /* recomputation: its backward reruns the forward and differentiates fresh leaves */ \
  X(checkpoint, Keep, Once)

namespace opdef {
#define EMBER_X(Name, cast, deriv) inline constexpr OpDef Name{#Name, Autocast::k##cast, Derivative::k##deriv};
EMBER_AUTOGRAD_OPS(EMBER_X)
#undef EMBER_X

// The elementwise kernels' ops, defined by op_list.h's lists (name, autocast); their backward is built of
// recorded ops, so every one is differentiable twice.
constexpr OpDef of(UnaryOp op) {
  switch (op) {
#define EMBER_X(Name, str, float_only, cost, cast) \
  case UnaryOp::Name: \
    return {str, Autocast::k##cast, Derivative::kTwice};
    EMBER_UNARY_OPS(EMBER_X)
#undef EMBER_X
  }
  return {"?", Autocast::kKeep, Derivative::kTwice};
}
constexpr OpDef of(BinaryOp op) {
  switch (op) {
#define EMBER_X(Name, str, kind, cast) \
  case BinaryOp::Name: \
    return {str, Autocast::k##cast, Derivative::kTwice};
    EMBER_BINARY_OPS(EMBER_X)
#undef EMBER_X
  }
  return {"?", Autocast::kKeep, Derivative::kTwice};
}
}  // namespace opdef

// Records an op's node with the flags of its definition (node.h's record(), named and marked from the table).
Recording record(const OpDef& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                 bool outputs_are_views = false);

// One call of a public op, from entry to return: the memory scope (OOM messages and plans name the op), the
// autocast of its inputs, the test whether to record, and the recording. Everything here is inline: the op pays
// what it paid when each of these was written out by hand.
class OpEntry {
 public:
  explicit OpEntry(const OpDef& op) : def_(op), scope_(op.name) {}
  OpEntry(const OpEntry&) = delete;
  OpEntry& operator=(const OpEntry&) = delete;

  const OpDef& def() const { return def_; }
  const char* name() const { return def_.name; }

  // An input as this op's autocast rule makes it (one thread-local test when no autocast is on). A reference: to
  // the caller's tensor when nothing is cast (no copy, no reference-count traffic on the hot path), else to the
  // cast, which this entry keeps until the op returns. An undefined tensor (an absent bias) stays undefined.
  const Tensor& in(const Tensor& t) {
    if (def_.autocast == Autocast::kKeep || def_.autocast == Autocast::kPromote || !amp::detail::any_enabled ||
        !t.defined())
      return t;
    Tensor c = def_.autocast == Autocast::kFp32 ? amp::detail::to_fp32(t) : amp::detail::to_lower(t);
    if (c.impl() == t.impl()) return t;
    EMBER_INTERNAL_ASSERT(n_casts_ < kMaxCasts, "an op cast more than ", kMaxCasts, " inputs");
    return casts_[n_casts_++] = std::move(c);
  }
  // Whether in(t) would make t float32 (a float32-rule op under autocast, t 16-bit): for a kernel that reads 16-bit
  // inputs as they are and computes in float32 itself, so that nothing is cast and the output is still float32.
  bool computes_in_fp32(const Tensor& t) const {
    return def_.autocast == Autocast::kFp32 && amp::detail::any_enabled && amp::detail::casts_to_fp32(t);
  }
  // The inputs of a promoting op, together (kPromote); the others one by one.
  std::vector<Tensor> in(const std::vector<Tensor>& ts) {
    if (def_.autocast == Autocast::kPromote) return amp::promote(ts);
    std::vector<Tensor> r;
    r.reserve(ts.size());
    for (const Tensor& t : ts) r.push_back(in(t));
    return r;
  }

  static bool needs_grad(std::initializer_list<const Tensor*> inputs) { return autograd::needs_grad(inputs); }
  static bool needs_grad(const std::vector<Tensor>& inputs) { return autograd::needs_grad(inputs); }

  // record(inputs, outputs).backward(fn): see node.h's record().
  Recording record(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                   bool outputs_are_views = false) const {
    return autograd::record(def_, inputs, outputs, outputs_are_views);
  }

 private:
  static constexpr int kMaxCasts = 5;  // linear_gelu_linear casts its five inputs
  OpDef def_;  // a copy: opdef::of() gives a temporary
  memory::OpScope scope_;
  Tensor casts_[kMaxCasts];  // the inputs autocast made, alive until the op returns
  int n_casts_ = 0;
};

}  // namespace ember::autograd
