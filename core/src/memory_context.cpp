// defines: the thread's memory context (memory_context.h). set_memory_limit is in cuda_api.cpp, beside the
// other functions that route to a device's allocator.
#include "ember/core/memory_context.h"

#include <vector>

#include "ember/core/error.h"

namespace ember {
namespace memory {
namespace {
thread_local Phase t_phase = Phase::kForward;
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

Context current_context() {
  Context c{.phase = t_phase, .module_path = {}, .op = t_current_op};
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
  return s;
}

}  // namespace memory
}  // namespace ember
