// defines: helpers shared by the op files of autograd (private): the metadata an op keeps of an input to
// shape its gradient, and the reduction of a broadcast / promoted gradient back to that input.
#pragma once
#include "ember/autograd/node.h"
#include "ember/autograd/op_def.h"
#include "ember/autograd/ops.h"
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

// The check of a composite op's tensor argument (the raw ops it calls would name themselves, not it).
inline void check_defined(const char* op, const Tensor& t, const char* arg) {
  EMBER_CHECK(t.defined(), Error, op, ": argument '", arg, "' is an undefined tensor (an empty handle)");
}
// A composite's input in the dtype it computes in: float32 for integers and bools (as the float-only list ops) and
// for float16 / bfloat16, which compute in float32 and round once at the end, as every op (composite_result).
inline Tensor composite_input(const char* op, const Tensor& x) {
  check_defined(op, x, "x");
  return is_floating(x.dtype()) && !is_reduced_float(x.dtype()) ? x : x.to(kFloat32);
}
// A composite's result y, back in the 16-bit float dtype of its input x.
inline Tensor composite_result(const Tensor& y, const Tensor& x) {
  return is_reduced_float(x.dtype()) ? y.to(x.dtype()) : y;
}

// g summed down to `shape` (the reverse of broadcasting). In a create_graph pass it is built of recorded ops,
// so that the sum is differentiable in turn; otherwise one raw kernel.
inline Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (!create_graph_enabled()) return raw::sum_to(g, shape);
  if (g.shape() == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[static_cast<size_t>(d - lead)] == 1 && g.shape()[static_cast<size_t>(d)] != 1))
      dims.push_back(d);
  return (dims.empty() ? g : ember::sum(g, dims, /*keepdim=*/true)).reshape(shape);
}

// The gradient `g` of a broadcast, promoted use of an input, brought back to the input's shape and dtype.
inline Tensor reduce_to(const Tensor& g, const InputInfo& in) {
  if (!in.wants || !g.defined()) return {};
  if (create_graph_enabled()) return sum_to(g, in.shape).to(in.dtype);
  return raw::cast(raw::sum_to(g, in.shape), in.dtype);
}

// Whether a backward may write its result into the incoming gradient g in place: no create_graph pass (whose
// gradients are recorded values), nothing else holds g or its memory (no other handle, view, saved alias or hook:
// both use counts are 1), the memory is Ember's (an allocator's; not a from_blob buffer a custom Function's
// backward may have wrapped), and g already has the layout of the result (`like`'s shape, dtype and device,
// contiguous). CPU memory that is not pinned only: a CUDA gradient a hook used on another stream (record_stream)
// or a pinned one a non_blocking copy still reads has readers the use counts cannot see. Saves the result's
// allocation and, on the CPU, a quarter of an elementwise backward's memory traffic: no fresh lines fetched before
// being written (relu's backward in a CNN: 6 MB a layer).
inline bool owns_gradient(const Tensor& g, const Tensor& like) {
  if (create_graph_enabled() || !g.defined() || !g.device().is_cpu()) return false;
  const Storage& st = g.impl()->storage;
  return g.impl_ptr().use_count() == 1 && st.use_count() == 1 && st->allocator != nullptr && !st->pinned &&
         g.is_contiguous() && g.shape() == like.shape() && g.dtype() == like.dtype() && g.device() == like.device();
}

// g op= other in place when the backward owns g (owns_gradient), else a fresh g op other: an elementwise
// backward's result.
inline Tensor binary_into_gradient(BinaryOp op, const Tensor& g, const Tensor& other) {
  if (!owns_gradient(g, other)) return raw::binary(op, g, other);
  Tensor out = g;  // a second handle on g's buffer, for the in-place call
  raw::binary_(op, out, other);
  return out;
}

}  // namespace ember::autograd

namespace ember {
// The op files of autograd are written in namespace ember with these names at hand.
namespace opdef = autograd::opdef;
using autograd::Grads;
using autograd::InputInfo;
using autograd::needs_grad;
using autograd::OpDef;
using autograd::OpEntry;
using autograd::reduce_to;
using autograd::save;
}  // namespace ember
