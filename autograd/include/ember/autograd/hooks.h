// defines: hooks on the backward pass, for layers built on autograd (DistributedDataParallel starts each
// gradient bucket's all-reduce from them) and for users: Tensor::register_hook (tensor.h: sees, and may
// replace, every gradient computed for a tensor, before it is used), a hook run right after a leaf's .grad has
// been accumulated, and a callback run once, when the current backward pass has swept every node.
//
//   auto clip = x.register_hook([](const ember::Tensor& g) { return ember::clamp(g, -1, 1); });
//
//   auto h = ember::autograd::register_post_accumulate_grad_hook(w, [](const ember::Tensor& p) {
//     // p.grad() holds this pass's gradient (added to what was there)
//   });
//   h.remove();
//
// Hooks run on the thread that runs backward, with grad mode off, in registration order. autograd::grad()
// (which never touches .grad) runs no accumulation hook.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "ember/core/tensor.h"

namespace ember::autograd {

// Removes the hook it was returned for (idempotent; a no-op once the tensor, or its graph, is gone). Dropping the
// handle leaves the hook in place, as in PyTorch.
class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(std::function<void()> remover) : remover_(std::move(remover)) {}
  void remove();

 private:
  std::function<void()> remover_;
};

// `leaf` must be a leaf that requires grad (a parameter); throws ValueError otherwise.
HookHandle register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(const Tensor&)> hook);

// Queues `fn` to run at the end of the backward pass now running on this thread, after its last node (then
// the queue is empty again). Throws Error when no backward pass is running. An exception thrown by `fn`
// propagates out of backward().
void queue_callback(std::function<void()> fn);

// True while this thread runs a backward pass.
bool in_backward();

}  // namespace ember::autograd
