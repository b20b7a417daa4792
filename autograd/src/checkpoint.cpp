// defines: checkpoint. The forward runs under NoGradGuard (nothing inside fn is saved); one node stands for
// the whole of fn and, when backward reaches it, re-runs fn with grad on from the saved inputs and the saved
// random-generator state, then runs backward through that rerun.
#include "ember/autograd/checkpoint.h"

#include "ember/autograd/amp.h"
#include "ember/autograd/engine.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/node.h"
#include "ember/autograd/op_def.h"
#include "ember/core/factory.h"
#include "ember/core/generator.h"
#include "ember/core/memory_context.h"
#include "ember/core/raw_ops.h"

namespace ember::autograd {

Tensor checkpoint(const TensorFn& fn, const std::vector<Tensor>& inputs) {
  if (!needs_grad(inputs)) return fn(inputs);
  const PhiloxState rng = current_generator().state();              // the stream fn draws from
  const amp::AutocastSnapshot autocast = amp::autocast_snapshot();  // the rerun casts as this run does
  Tensor out;
  {
    NoGradGuard no_grad;
    out = fn(inputs);
  }
  EMBER_CHECK(out.defined() && is_floating(out.dtype()), Error, "checkpoint: fn must return a floating-point tensor");
  // The output may alias an input (fn returned it unchanged): give it its own handle before recording.
  out = raw::alias(out);
  std::vector<SavedTensor> saved;
  std::vector<bool> wants;
  for (const Tensor& t : inputs) {
    saved.emplace_back(t);
    wants.push_back(t.defined() && t.requires_grad());
  }
  // The rerun differentiates fresh leaves with backward(): its gradients carry no graph, so the table marks it
  // once-differentiable (PyTorch's reentrant checkpoint refuses double backward too).
  record(opdef::checkpoint, inputs, {out}).backward([fn, saved, wants, rng, autocast](const Grads& g) -> Grads {
    memory::CheckpointRecomputeScope recompute;  // an OOM from here on advises smaller segments
    std::vector<Tensor> xs;
    for (size_t i = 0; i < saved.size(); ++i) {
      Tensor x = saved[i].get();
      if (x.defined()) x = raw::alias(x);  // a fresh leaf for the rerun
      if (wants[i]) x.requires_grad_(true);
      xs.push_back(x);
    }
    Tensor y;
    {
      EnableGradGuard grad_on;
      // Same dropout masks as the first run, from a private copy of the stream: the generators in use now
      // (the global one or a scoped one) do not move.
      Generator replay;
      replay.set_state(rng);
      GeneratorScope use(replay);
      amp::AutocastRestore same_autocast(autocast);
      memory::CheckpointRerunScope rerun;  // memory::plan counts these FLOPs as recomputed
      y = fn(xs);
    }
    // backward() rather than grad(): tensors fn captured instead of taking as inputs (a module's parameters)
    // get their .grad too, as in the plain run. The rerun's input leaves collect the gradients returned here.
    if (y.requires_grad()) backward({y}, {g[0]});
    Grads out_grads;
    for (size_t i = 0; i < saved.size(); ++i) out_grads.push_back(wants[i] ? xs[i].grad() : Tensor());
    return out_grads;
  });
  return out;
}

}  // namespace ember::autograd
