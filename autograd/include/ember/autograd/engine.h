// defines: the backward engine's entry points. Tensor::backward() calls backward(); autograd::grad returns
// gradients without touching any .grad.
//
//   auto g = ember::autograd::grad({loss}, {w, b});   // dloss/dw, dloss/db
#pragma once
#include <vector>

#include "ember/core/tensor.h"

namespace ember::autograd {

// Runs the graph behind `roots` backwards, seeding each with grads[i] (undefined: ones, for a one-element
// root), and accumulates into the .grad of every leaf that requires grad. Saved tensors are freed unless
// retain_graph.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {}, bool retain_graph = false);

// The gradients of sum(outputs[i] * grad_outputs[i]) with respect to each input (undefined grad_outputs:
// ones). allow_unused: an input the outputs do not depend on gives an undefined tensor instead of an error.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool allow_unused = false);

}  // namespace ember::autograd
