// defines: the seam between memory::plan (memory_plan.cpp) and backend_for (backend_registry.cpp). Private to core/.
#pragma once
#include "ember/core/backend.h"
#include "ember/core/memory_plan.h"

namespace ember::memory {
struct PlanState;
// Whether tag a overrides tag b: parameters > gradients > optimizer state > activations > workspace > temporaries.
bool stronger(Category a, Category b);
namespace internal {
// The backend planning hands out on this thread (computes nothing, allocates from the simulation), or null
// when this thread is not planning: backend_for asks it first.
Backend* planning_backend(DeviceType t);
// The always-on byte counters by category and the timeline (memory_history.cpp), for storages from a real
// allocator; never throw.
void on_allocated(StorageImpl& s) noexcept;
void on_freed(StorageImpl& s) noexcept;
void retag(StorageImpl& s, uint8_t category) noexcept;
}  // namespace internal
}  // namespace ember::memory
