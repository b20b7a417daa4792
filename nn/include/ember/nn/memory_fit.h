// defines: memory::fit and memory::apply — which modules to checkpoint so that a training step fits a memory budget
// with the least recomputation, found from memory plans alone (no real run, no out-of-memory errors), and optionally
// the largest batch that then fits.
//
//   auto step = [&](int64_t batch) { ... one training step of `model` at `batch` ... };
//   memory::FitPlan p = memory::fit(step, 8ull << 30, {.model = &model, .batch = 64, .max_batch = 1024});
//   memory::apply(model, p);   // p.checkpointed: module paths; p.batch: the largest batch that fits with them
//
// The choice (greedy, by bytes per FLOP): each candidate's saving is the planned peak without any checkpoint less
// the peak with that one alone; its cost, the FLOPs its checkpoint runs again (that plan's recompute_flops).
// Candidates are taken best saving per FLOP first, re-planning after each, until the step fits; then, most costly
// first, each one the step still fits without is dropped. A budget that not even every candidate checkpointed
// meets is an error that gives the smallest peak reachable.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ember/core/device.h"
#include "ember/nn/module.h"

namespace ember::memory {

struct FitOptions {
  // The modules that may be checkpointed (pointers into the model, valid during fit). Empty: every child of every
  // Chain and ModuleList in `model` (a transformer's blocks, a Chain's layers).
  std::vector<nn::Module*> candidates;
  nn::Module* model = nullptr;  // required: where the default candidates come from, and the paths named
  int64_t batch = 1;            // the batch the step is fitted at (fit(step(batch), ...) only)
  int64_t max_batch = 0;        // > 0: also the largest batch in [batch, max_batch] that fits with the choice
  Device device = Device::cpu();  // the device planned for (a CUDA plan needs no GPU)
};

struct FitPlan {
  std::vector<std::string> checkpointed;  // module paths in `model`, in model order
  size_t predicted_peak_bytes = 0;        // the planned peak with them checkpointed, at `batch`
  double recompute_flops = 0;             // the FLOPs their checkpoints run again per step (Plan::recompute_flops)
  int64_t batch = 0;                      // the batch planned (the largest that fits when max_batch > 0)
};

// The step at opts.batch (and, with max_batch, at larger ones). The candidates' checkpointing is put back as it was.
FitPlan fit(const std::function<void(int64_t)>& step, size_t budget_bytes, const FitOptions& opts);
// A step at a fixed batch (max_batch is refused).
FitPlan fit(const std::function<void()>& step, size_t budget_bytes, const FitOptions& opts);
// Turns checkpointing on (Module::set_checkpointing) for the modules `plan` names in `model`; an unknown path throws
// ValueError and changes nothing.
void apply(nn::Module& model, const FitPlan& plan);

}  // namespace ember::memory
