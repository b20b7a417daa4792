// defines: the thread's memory context (memory_context.h). set_memory_limit is in cuda_api.cpp, beside the
// other functions that route to a device's allocator.
#include "ember/core/memory_context.h"

#include <vector>

#include "ember/core/error.h"

namespace ember {
namespace memory {
namespace {
thread_local Phase t_phase = Phase::kForward;
thread_local int t_recompute_depth = 0;  // open CheckpointRecomputeScopes
thread_local int t_rerun_depth = 0;      // open CheckpointRerunScopes
thread_local std::vector<std::pair<const std::string*, const std::string*>> t_modules;  // (name, type)
}  // namespace
thread_local const char* t_current_op = nullptr;

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kOptimizer:
      return "optimizer step";
  }
  return "?";
}

PhaseScope::PhaseScope(Phase p) : prev_(t_phase) { t_phase = p; }
PhaseScope::~PhaseScope() { t_phase = prev_; }
ModuleScope::ModuleScope(const std::string* name, const std::string* type_name) {
  t_modules.emplace_back(name, type_name);
}
ModuleScope::~ModuleScope() { t_modules.pop_back(); }
CheckpointRecomputeScope::CheckpointRecomputeScope() { ++t_recompute_depth; }
CheckpointRecomputeScope::~CheckpointRecomputeScope() { --t_recompute_depth; }
CheckpointRerunScope::CheckpointRerunScope() { ++t_rerun_depth; }
CheckpointRerunScope::~CheckpointRerunScope() { --t_rerun_depth; }

Context current_context() {
  Context c{.phase = t_phase, .module_path = {}, .op = t_current_op, .checkpoint_recompute = t_recompute_depth > 0,
            .checkpoint_rerun = t_rerun_depth > 0};
  for (const auto& [n, type] : t_modules) {
    if (!n || n->empty()) continue;
    if (!c.module_path.empty()) c.module_path += '.';
    c.module_path += *n;
  }
  if (c.module_path.empty() && !t_modules.empty() && t_modules.front().second) c.module_path = *t_modules.front().second;
  return c;
}

std::string describe_context() {
  const Context c = current_context();
  std::string s = detail::str(" during the ", phase_name(c.phase));
  if (c.op) s += detail::str(" of ", c.op);
  if (!c.module_path.empty()) s += detail::str(" in module '", c.module_path, "'");
  if (c.checkpoint_recompute) s += " (re-running a checkpointed segment)";
  return s;
}

std::string phase_advice() {
  const Context c = current_context();
  if (c.checkpoint_recompute)
    return "this segment is already checkpointed and its backward holds its activations all at once: checkpoint "
           "smaller segments (each block on its own), ";
  switch (c.phase) {
    case Phase::kForward:
      return "checkpoint activations (autograd::checkpoint), ";
    case Phase::kBackward:
      return "checkpoint activations (autograd::checkpoint) to hold fewer for backward, ";
    case Phase::kOptimizer:
      return "the optimiser's state is made at its first step (Adam: twice the parameters), ";
  }
  return "";
}

}  // namespace memory
}  // namespace ember
