// defines: Checkpoint, save_checkpoint(path, {...}) and load_checkpoint(path, {...}) — everything a training run
// needs to continue exactly where it stopped, in one safetensors file: the model, the optimiser, the LR scheduler,
// a GradScaler, the DataLoader's position, the random generator, the step, your own metadata and any other object
// with state_dict() / load_state_dict().
//
//   nn::save_checkpoint("ckpt.safetensors", {.model = &model, .optimizer = &opt, .scheduler = &sched,
//                                            .loader = &loader, .step = step, .metadata = {{"run", "a"}}});
//   ...                                                  // a new process: build the same objects, then
//   auto info = nn::load_checkpoint("ckpt.safetensors", {.model = &model, .optimizer = &opt, .scheduler = &sched,
//                                                        .loader = &loader});
//   int64_t step = info.step;                            // the loop goes on; the next losses are the same, bit
//                                                        // for bit, as those of the run that was never stopped
//
// Loading is all-or-nothing: every part named must be in the file and fit its object (names, shapes, dtypes); if
// any part fails, the ones already loaded are put back as they were and the error propagates. The global random
// generator (dropout masks, randn) is saved and restored unless .rng = false. Build the scheduler before loading
// (a scheduler made after the optimiser was loaded takes its base lr from the optimiser's saved initial lr).
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "ember/nn/module.h"

namespace ember::nn {

// A handle on an object whose state a checkpoint keeps: anything with state_dict() returning named tensors and
// load_state_dict(named tensors) — optimisers, schedulers, DataLoader, GradScaler, your own types.
class Stateful {
 public:
  Stateful() = default;
  template <class T>
  requires requires(T& t, const NamedTensors& sd) {
    { t.state_dict() } -> std::convertible_to<NamedTensors>;
    t.load_state_dict(sd);
  }
  Stateful(T* obj) {  // NOLINT: implicit, so that {.optimizer = &opt} reads naturally
    if (!obj) return;
    save_ = [obj] { return NamedTensors(obj->state_dict()); };
    load_ = [obj](const NamedTensors& sd) { obj->load_state_dict(sd); };
  }
  explicit operator bool() const { return static_cast<bool>(save_); }
  NamedTensors state_dict() const { return save_(); }
  void load_state_dict(const NamedTensors& sd) const { load_(sd); }

 private:
  std::function<NamedTensors()> save_;
  std::function<void(const NamedTensors&)> load_;
};

// The parts of a checkpoint; a null/empty part is not saved (or, when loading, not loaded).
struct Checkpoint {
  Module* model = nullptr;
  Stateful optimizer;
  Stateful scheduler;
  Stateful scaler;
  Stateful loader;
  int64_t step = 0;                             // saved; ignored when loading (load_checkpoint returns it)
  std::map<std::string, std::string> metadata;  // saved; ignored when loading (returned)
  std::map<std::string, Stateful> extra;        // more objects, by a name of your choice ([A-Za-z0-9_-]+)
  bool rng = true;                              // the global generator's state
};

struct LoadedCheckpoint {
  int64_t step = 0;
  std::map<std::string, std::string> metadata;  // the user metadata given to save_checkpoint
};

// Written atomically (temporary file, fsync, rename), like save().
void save_checkpoint(const std::string& path, const Checkpoint& parts);
// Throws IOError naming the part and the file when a requested part is missing or does not fit; then nothing
// has changed.
LoadedCheckpoint load_checkpoint(const std::string& path, const Checkpoint& parts);

}  // namespace ember::nn
