// defines: the non-template half of autograd::Function — the saved tensors of its ctx, and the node that runs
// the user's backward with checks on what it returns.
#include "ember/autograd/function.h"

#include <cxxabi.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "ember/core/raw_ops.h"

namespace ember::autograd {

void FunctionCtx::save_for_backward(const std::vector<Tensor>& ts) {
  saved_.clear();
  saved_graph_ = false;
  for (const Tensor& t : ts) {
    saved_.emplace_back(t);
    saved_graph_ = saved_graph_ || (t.defined() && t.requires_grad());
  }
}
std::vector<Tensor> FunctionCtx::saved() const {
  std::vector<Tensor> out;
  for (const SavedTensor& s : saved_) out.push_back(s.get());
  return out;
}

namespace detail {

bool FunctionAccess::saved_graph(const FunctionCtx& c) { return c.saved_graph_; }
std::vector<SavedTensor>& FunctionAccess::saved_tensors(FunctionCtx& c) { return c.saved_; }

const char* function_name(const std::type_info& t) {
  static std::mutex mu;
  static std::set<std::string> names;  // node names are const char*: keep each one for the process
  int status = 0;
  char* d = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && d ? d : t.name();
  std::free(d);
  std::lock_guard<std::mutex> lock(mu);
  return names.insert(name).first->c_str();
}

std::vector<Tensor> record_function(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor> outputs,
                                    std::shared_ptr<FunctionCtx> ctx,
                                    std::function<Grads(FunctionCtx&, const Grads&)> backward,
                                    bool once_differentiable) {
  EMBER_CHECK_VALUE(!outputs.empty(), name, ": forward returned no tensors");
  for (size_t i = 0; i < outputs.size(); ++i) {
    EMBER_CHECK_VALUE(outputs[i].defined(), name, ": forward returned an undefined tensor as output ", i);
    for (const Tensor& in : inputs)  // an input returned as is: its own handle, or recording would rewrite it
      if (in.defined() && outputs[i].impl() == in.impl()) outputs[i] = raw::alias(outputs[i]);
  }
  if (!needs_grad(inputs)) return outputs;
  std::vector<Tensor> diff;  // the floating outputs carry the node; integer ones (indices) do not
  for (const Tensor& o : outputs)
    if (is_floating(o.dtype())) diff.push_back(o);
  if (diff.empty()) return outputs;
  struct Info {
    Shape shape;
    DType dtype;
    Device device;
    bool wants;
  };
  std::vector<Info> infos;
  for (const Tensor& t : inputs)
    infos.push_back(t.defined() ? Info{t.shape(), t.dtype(), t.device(), t.requires_grad()}
                                : Info{{}, kFloat32, Device::cpu(), false});
  const size_t n_out = diff.size();
  Recording rec = record(name, inputs, diff);
  // Tensors ctx saved in forward, before this node existed, that are its outputs: their place in the graph.
  for (SavedTensor& s : FunctionAccess::saved_tensors(*ctx)) s.adopt_output(rec.node(), diff);
  // The user's backward is made of ember ops unless it says otherwise (and is checked below).
  rec.node()->double_differentiable = !once_differentiable;
  std::move(rec).backward([name, infos, ctx, backward, n_out](const Grads& g) -> Grads {
    Grads padded = g;  // the engine passes gradients up to the last output that got one
    padded.resize(n_out);
    Grads r = backward(*ctx, padded);
    // In a create_graph pass the results must carry a graph whenever what they were computed from did; one
    // without is a backward built of raw kernels (or detached), whose second derivative would be silently zero.
    bool graph_in = FunctionAccess::saved_graph(*ctx);
    for (const Tensor& t : g) graph_in = graph_in || (t.defined() && t.requires_grad());
    EMBER_CHECK_VALUE(r.size() == infos.size(), name, ": backward returned ", r.size(), " gradients for ", infos.size(),
                      " tensor inputs (return one per input; an undefined tensor for none)");
    for (size_t i = 0; i < r.size(); ++i) {
      if (!r[i].defined()) continue;
      if (!infos[i].wants) {
        r[i] = Tensor();  // a gradient nobody asked for
        continue;
      }
      EMBER_CHECK(
          !create_graph_enabled() || !graph_in || r[i].requires_grad(), Error, name,
          ": under create_graph, backward returned a gradient for input ", i, " that does not depend on its ",
          "inputs through recorded ops (raw kernels, detach or host values?); write backward with ember ops, or ",
          "declare `static constexpr bool once_differentiable = true;` so that double backward refuses it");
      EMBER_CHECK_SHAPE(
          r[i].shape() == infos[i].shape && r[i].dtype() == infos[i].dtype && r[i].device() == infos[i].device, name,
          ": backward returned a gradient of ", r[i].dtype(), r[i].shape(), " on ", r[i].device(), " for input ", i,
          ", which is ", infos[i].dtype, infos[i].shape, " on ", infos[i].device);
    }
    return r;
  });
  return outputs;
}

}  // namespace detail
}  // namespace ember::autograd
