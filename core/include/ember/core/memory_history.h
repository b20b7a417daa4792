// defines: what tensors hold, live, in both real allocators (issue 16, docs/memory.md): bytes in use by
// memory::Category per device (always on: a few atomic adds per tensor), and a memory timeline that
// record_history(true) starts — every allocation and free with its size, category, phase, module path,
// backward op, stream and time — which dump_snapshot writes as Chrome trace-event JSON (Perfetto and
// chrome://tracing open it; scripts/plot_memory.py draws it).
//
//   memory::record_history(true);
//   train_one_epoch();
//   memory::dump_snapshot("timeline.json");   // python3 scripts/plot_memory.py timeline.json timeline.png
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ember/core/memory_plan.h"

namespace ember::memory {

// Bytes of live tensors on `device` by Category (rounded as its allocator rounds them). Tensors are temporaries
// until tagged (memory_plan.h's tag): parameters, gradients, optimiser state, saved activations.
std::array<size_t, kNumCategories> bytes_by_category(Device device);
// "activations 61% (1.2 GiB), temporaries 20% (...), parameters 10% (...)": the top three, for messages.
std::string describe_categories(Device device);
// What would shrink the largest category, with numbers ("activations are 61%: autograd::checkpoint ...; half the
// batch saves about 0.6 GiB"), for OutOfMemoryError messages; empty when no tensor is in use.
std::string category_advice(Device device);

// Starts (on: clears what was recorded) or stops recording. Past max_allocations, new allocations are not
// recorded (Snapshot::truncated); frees of recorded ones still are.
void record_history(bool on, size_t max_allocations = size_t{1} << 21);
bool is_recording_history();

struct AllocationRecord {
  double alloc_us = 0;  // microseconds since record_history(true)
  double free_us = -1;  // -1: still live when the snapshot was taken
  size_t bytes = 0;     // as the allocator counts them (size class / 512 B blocks)
  Device device;
  Category category = Category::kTemporaries;  // the last tag it got
  Phase phase = Phase::kForward;
  std::string module;   // module path when allocated ("" outside modules)
  std::string op;       // the op running, if any (memory_context.h)
  uint64_t stream = 0;  // CUDA stream handle (0: the default stream, and always on the CPU)
};
struct Snapshot {
  std::vector<AllocationRecord> allocations;  // in allocation order
  bool truncated = false;
  // Chrome trace-event JSON: per device, counter tracks "by category" and "by module" (the 8 largest modules,
  // the rest as "other"), stepping at every allocation and free.
  std::string to_chrome_trace() const;
};
Snapshot snapshot();
void dump_snapshot(const std::string& path);  // to_chrome_trace() into a file; throws Error when it cannot write

}  // namespace ember::memory
