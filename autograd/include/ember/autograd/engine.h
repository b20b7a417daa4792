// defines: the backward engine's entry points. Tensor::backward() calls backward(); autograd::grad returns
// gradients without touching any .grad.
//
//   auto g = ember::autograd::grad({loss}, {w, b});   // dloss/dw, dloss/db
//   // a gradient penalty: the gradient is itself differentiable
//   auto [gx] = ember::autograd::grad({d_out.sum()}, {x}, {.create_graph = true});
//   Tensor penalty = square(sqrt(sum(gx * gx, {1})) - 1).mean();   // penalty.backward() reaches the weights
#pragma once
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
  // gradient penalties). Every node between the outputs and the inputs must have a differentiable backward — the
  // elementwise ops, matmul/linear, sum/mean, the views and custom Functions do; others (conv2d, softmax, ...)
  // throw Error.
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

}  // namespace ember::autograd
