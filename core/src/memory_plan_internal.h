// defines: the seam between memory::plan (memory_plan.cpp) and backend_for (backend_registry.cpp). Private to core/.
#pragma once
#include "ember/core/backend.h"

namespace ember::memory {
struct PlanState;
namespace internal {
// The backend planning hands out on this thread (computes nothing, allocates from the simulation), or null
// when this thread is not planning: backend_for asks it first.
Backend* planning_backend(DeviceType t);
}  // namespace internal
}  // namespace ember::memory
