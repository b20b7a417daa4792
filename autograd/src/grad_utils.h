// defines: helpers shared by the op files of autograd (private): the metadata an op keeps of an input to
// shape its gradient, and the reduction of a broadcast / promoted gradient back to that input.
#pragma once
#include "ember/autograd/node.h"
#include "ember/core/raw_ops.h"

namespace ember::autograd {

struct InputInfo {
  Shape shape;
  DType dtype = kFloat32;
  Device device;
  bool wants = false;  // the input requires grad, so its gradient is computed
  explicit InputInfo(const Tensor& t)
      : shape(t.shape()), dtype(t.dtype()), device(t.device()), wants(t.requires_grad()) {}
};

// The gradient `g` of a broadcast, promoted use of an input, brought back to the input's shape and dtype.
inline Tensor reduce_to(const Tensor& g, const InputInfo& in) {
  if (!in.wants || !g.defined()) return {};
  return raw::cast(raw::sum_to(g, in.shape), in.dtype);
}

}  // namespace ember::autograd

namespace ember {
// The op files of autograd are written in namespace ember with these names at hand.
using autograd::Grads;
using autograd::InputInfo;
using autograd::needs_grad;
using autograd::record;
using autograd::reduce_to;
using autograd::save;
}  // namespace ember
