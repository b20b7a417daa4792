// defines: memory planning (issue 16, docs/memory.md): memory::plan runs ordinary Ember code with every tensor
// shape-only (no kernel runs, no memory is touched) while a simulation of the target device's caching allocator
// (its rounding, size classes, segments, splitting and caching) takes every allocation and free, so it predicts
// what the real run will hold — for a GPU that is not there too. memory::max_batch_size bisects over plans.
//
//   auto p = memory::plan(Device::cuda(), [&] { train_step(model, opt, 512); });
//   std::cout << p.to_string();   // peak, reserved, by category, by module
//
// While planning (on the calling thread only): every op checks its arguments and allocates its outputs as usual,
// but computes nothing; reading values gives zeros (item() is 0), so code that branches on them takes the zero
// branch; Tensor::data<T>() and data_ptr() of a planned tensor throw (so does a DataLoader iterated on the planning
// thread: its transforms read sample values). Other threads (DataLoader workers) are not planned. The random
// stream is left as it was. Build what the step needs inside fn: a model or optimiser made outside it and
// trained inside gets planned gradients and state, which a later real step refuses.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ember/core/memory_context.h"
#include "ember/core/tensor.h"

namespace ember::memory {

// What a byte held at the peak is for. Tensors are tagged where they are made or kept: parameters and buffers
// by nn::Module, gradients by autograd's accumulation into .grad, optimiser state by the Optimizer, activations
// by autograd when it saves a tensor for backward; workspace is what kernels draw besides their outputs;
// everything else is a temporary.
enum class Category : uint8_t { kParameters, kGradients, kOptimizerState, kActivations, kTemporaries, kWorkspace };
inline constexpr int kNumCategories = 6;
// "parameters", "gradients", "optimizer_state", "activations", "temporaries", "workspace": Plan::by_category's keys.
const char* category_name(Category c);

struct PlanOptions {
  // The cap to simulate (as set_memory_limit would): past it the simulated cache is given back first, and an
  // allocation that still does not fit marks the plan as not fitting (the plan itself goes on). 0: the target's
  // current memory_limit(target), which may be none. The plan's allocations alone count against it (a plan starts
  // from an empty allocator); max_batch_size passes the limit less what is in use.
  size_t limit_bytes = 0;
  // The cuBLAS workspace CUDA matmuls use, taken from the caching allocator at a stream's first matmul and kept
  // (cuda/src/cublas.cpp; cuda::empty_cache() gives it back): 32 MiB on Hopper and later (compute capability 9+),
  // 4 MiB before. The default plans for Hopper.
  size_t cuda_gemm_workspace_bytes = size_t{32} << 20;
};

struct Plan {
  Device device;
  size_t peak_bytes = 0;           // high-water mark of allocated bytes (cpu: peak_bytes_in_use; cuda: max allocated)
  size_t peak_reserved_bytes = 0;  // high-water mark of reserved bytes (cpu: in use + cached; cuda: segments)
  size_t end_bytes = 0;            // allocated when fn returned: what stays (parameters, state, tensors kept)
  size_t limit_bytes = 0;          // the simulated cap (0: none)
  bool fits = true;                // false when an allocation went past limit_bytes even with the cache given back
  std::string first_oom;           // where the first such allocation was ("forward in module '2.conv'"), if any
  uint64_t allocations = 0;        // allocations on the target device
  std::map<std::string, size_t> by_category;  // bytes live at the peak, by category_name (all six keys)
  std::map<std::string, size_t> by_module;    // bytes live at the peak by module path ("(no module)" outside any)
  Phase peak_phase = Phase::kForward;                     // where the peak was reached
  std::string peak_where;                                 // " during the backward of conv2d in module '1'" style
  // The forward's multiply-add FLOPs (matmul, conv2d, attention: 2 per multiply-add) by module path, as the ops
  // ran (a module's own ops under its path, its children's under theirs); checkpoint recomputes not counted.
  // What memory::fit weighs a checkpoint's recomputation by.
  std::map<std::string, double> forward_flops_by_module;
  double recompute_flops = 0;  // the same FLOPs run again by checkpoints' recomputes in backward

  size_t bytes(Category c) const {
    auto it = by_category.find(category_name(c));
    return it == by_category.end() ? 0 : it->second;
  }
  std::string to_string() const;  // a table
};

// Runs fn with every tensor shape-only and returns what `target`'s caching allocator would go through. The
// plan starts from an empty allocator: tensors made before the call are not counted (use them as inputs).
// Throws what fn throws (OutOfMemoryError is never thrown by the simulation: see Plan::fits).
Plan plan(Device target, const std::function<void()>& fn, const PlanOptions& opts = {});

// Whether this thread is inside memory::plan.
bool is_planning();
// While alive, this thread's allocations are real again (host buffers an op fills before handing them on).
class PlanningSuspend {
 public:
  PlanningSuspend();
  ~PlanningSuspend();
  PlanningSuspend(const PlanningSuspend&) = delete;
  PlanningSuspend& operator=(const PlanningSuspend&) = delete;

 private:
  void* saved_;
};
// The bytes the running plan's simulation of `device` holds right now (0 when this thread is not planning):
// a forward hook can see what a layer keeps.
size_t planned_bytes_in_use(Device device);
// The bytes a request of `nbytes` takes in `device`'s caching allocator (its size class or block rounding).
size_t allocated_size(Device device, size_t nbytes);
// Tags t's memory as category c: in a plan, for Plan::by_category; in a real run, for the live counters and the
// timeline (memory_history.h). A stronger tag wins: parameters > gradients > optimizer state > activations >
// the rest.
void tag(const Tensor& t, Category c);

// The largest batch in [lo, hi] whose planned training step fits the budget, by bisection over plans (no real
// run, no out-of-memory errors). step(batch) runs one training step at that batch (building what it needs).
// budget_bytes 0: memory_limit(target) less what is in use on it now (for the CPU without a limit, the memory
// the system has available; for CUDA without a limit, the device's free memory plus Ember's cached bytes).
// Throws ValueError when even lo does not fit.
struct BatchSearch {
  int64_t lo = 1;
  int64_t hi = int64_t{1} << 16;
  size_t budget_bytes = 0;
};
int64_t max_batch_size(Device target, const std::function<void(int64_t)>& step, const BatchSearch& opts = {});

}  // namespace ember::memory
