// defines: the backward engine's entry points. Tensor::backward() calls backward(); autograd::grad returns
// gradients without touching any .grad.
//
//   auto g = ember::autograd::grad({loss}, {w, b});   // dloss/dw, dloss/db
//   // a gradient penalty: the gradient is itself differentiable
//   auto [gx] = ember::autograd::grad({d_out.sum()}, {x}, {.create_graph = true});
//   Tensor penalty = square(sqrt(sum(gx * gx, {1})) - 1).mean();   // penalty.backward() reaches the weights
#pragma once
#include <functional>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::autograd {

// Runs the graph behind `roots` backwards, seeding each with grads[i] (undefined: ones, for a one-element
// root), and accumulates into the .grad of every leaf that requires grad. Saved tensors are freed unless
// retain_graph.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {}, bool retain_graph = false);

// The gradients of sum(outputs[i] * grad_outputs[i]) with respect to each input (undefined grad_outputs:
// ones). allow_unused: an input the outputs do not depend on gives an undefined tensor instead of an error. Only
// the part of the graph between the outputs and the inputs runs (and, without retain_graph, is freed).
struct GradOptions {
  bool retain_graph = false;  // keep the graph for another pass (implied by create_graph)
  // Record the backward pass itself, so the returned gradients can be differentiated again (double backward,
  // gradient penalties). Every built-in op supports it (the fused ones — conv2d, pooling, softmax, the norms,
  // attention, the losses — by differentiating their composite in this pass); a checkpoint or a Function marked
  // once_differentiable on the way throws Error.
  bool create_graph = false;
  bool allow_unused = false;  // an input the outputs do not depend on gives an undefined tensor
};
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const GradOptions& opts);
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& opts);

// The positional form: (grad_outputs, retain_graph, allow_unused) — note that PyTorch's fifth positional argument is
// create_graph; for it use the options, grad(outs, ins, {.create_graph = true}). A template only so that a braced
// list as the third argument picks the GradOptions overload above (it could otherwise initialise either).
template <class GradOutputs = std::vector<Tensor>>
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const GradOutputs& grad_outputs = {}, bool retain_graph = false, bool allow_unused = false) {
  return grad(outputs, inputs, static_cast<const std::vector<Tensor>&>(grad_outputs),
              GradOptions{.retain_graph = retain_graph, .create_graph = false, .allow_unused = allow_unused});
}

// The gradients of a fused op in a create_graph pass: its forward recomputed from `inputs` (its saved tensors, which a
// create_graph pass hands back attached to the graph) through `composite`, an equivalent built of differentiable
// ops, then differentiated with create_graph against grad_output, so that the gradients are differentiable again.
// The plain backward keeps the fused kernel; only passes that build a graph pay for the recomputation. An input
// that does not require grad (or is undefined) gets an undefined gradient.
std::vector<Tensor> grads_by_recompute(const std::vector<Tensor>& inputs,
                                       const std::function<Tensor(const std::vector<Tensor>&)>& composite,
                                       const Tensor& grad_output);

}  // namespace ember::autograd
