// defines: where memory is being asked for, so that an OutOfMemoryError can say it (issue 16, docs/memory.md):
// the training phase (forward, backward, optimizer), the module path ("2.conv", pushed by nn::Module's call
// operator) and, in backward, the op whose gradient is being computed; and memory limits per device, so that OOM
// can be met (and tested) anywhere.
//
//   ember::set_memory_limit(Device::cpu(), 512 << 20);   // allocations past 512 MiB throw OutOfMemoryError
//   ember::set_memory_limit(Device::cpu(), 0);           // no limit
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "ember/core/device.h"

namespace ember {

// A cap on the bytes a device's caching allocator holds (in use + cached; on CUDA, reserved segments). Past it,
// the cache is returned first, then OutOfMemoryError. 0 removes the cap. cuda::set_per_process_memory_fraction
// sets it as a fraction of the GPU's memory.
void set_memory_limit(Device device, size_t bytes);
size_t memory_limit(Device device);  // 0: none

namespace memory {

enum class Phase : uint8_t { kForward, kBackward, kOptimizer };
const char* phase_name(Phase p);

// Scoped setters of this thread's context; each restores what was there.
class PhaseScope {
 public:
  explicit PhaseScope(Phase p);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Phase prev_;
};
// `name` (a module's name in its parent; empty for a root) must outlive the scope, as must `type_name` (the
// module's type, "Net"): where no enclosing module has a name, the ops are attributed to the outermost one's type
// (a model's own forward names the model, not "(no module)").
class ModuleScope {
 public:
  explicit ModuleScope(const std::string* name, const std::string* type_name = nullptr);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;
};
// `op` must be a string literal or otherwise outlive the scope. The outermost scope wins: a composite op is named
// rather than the ops it is made of, and in backward the engine's node. The public autograd ops (ops.h) and the
// losses open one, so an OutOfMemoryError in the forward names the op too.
// Inline: every public op opens one, so it costs a thread-local read and write, not two calls.
extern thread_local const char* t_current_op;  // the op running on this thread (nullptr: none)
class OpScope {
 public:
  explicit OpScope(const char* op) : prev_(t_current_op) {
    if (!prev_) t_current_op = op;
  }
  ~OpScope() { t_current_op = prev_; }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const char* prev_;
};

// Open while autograd::checkpoint's backward re-runs its segment and differentiates it: an OOM there is already
// the cure "checkpoint activations" would suggest, so the advice must differ (a smaller segment, a smaller batch).
class CheckpointRecomputeScope {
 public:
  CheckpointRecomputeScope();
  ~CheckpointRecomputeScope();
  CheckpointRecomputeScope(const CheckpointRecomputeScope&) = delete;
  CheckpointRecomputeScope& operator=(const CheckpointRecomputeScope&) = delete;
};

// Open while such a segment's forward runs again (inside a CheckpointRecomputeScope, before its backward): what
// memory::plan counts as recomputed FLOPs (Plan::recompute_flops).
class CheckpointRerunScope {
 public:
  CheckpointRerunScope();
  ~CheckpointRerunScope();
  CheckpointRerunScope(const CheckpointRerunScope&) = delete;
  CheckpointRerunScope& operator=(const CheckpointRerunScope&) = delete;
};

struct Context {
  Phase phase = Phase::kForward;
  std::string module_path;   // "" outside any named module
  const char* op = nullptr;  // the op running (forward: the outermost public op; backward: the engine's node)
  bool checkpoint_recompute = false;  // inside a checkpointed segment's backward (CheckpointRecomputeScope)
  bool checkpoint_rerun = false;      // in it, the forward's re-run (CheckpointRerunScope)
};
Context current_context();
// " during the backward of linear in module '1.fc'" (empty pieces left out), for error messages.
std::string describe_context();
// What to try first against an out-of-memory error in this context, besides a smaller batch: ends with ", ".
std::string phase_advice();

}  // namespace memory
}  // namespace ember
