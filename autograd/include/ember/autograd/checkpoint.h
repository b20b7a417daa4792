// defines: checkpoint — runs fn without keeping its intermediate tensors and runs it again during backward
// to get its gradients: activation memory traded for a second forward. Random ops inside fn (dropout) see
// the same random numbers in both runs.
//
//   Tensor h = ember::autograd::checkpoint([&](const std::vector<Tensor>& in) { return block(in[0]); }, {x});
#pragma once
#include <vector>

#include "ember/autograd/gradcheck.h"
#include "ember/core/tensor.h"

namespace ember::autograd {

Tensor checkpoint(const TensorFn& fn, const std::vector<Tensor>& inputs);

}  // namespace ember::autograd
