// defines: amp::GradScaler, dynamic loss scaling for float16 training (torch.amp.GradScaler): the loss is
// multiplied by a large scale so that small gradients survive float16; before the step the gradients are divided
// back and checked for inf/NaN (one fused pass per device); a step with a non-finite gradient is skipped and the
// scale halved, and after growth_interval clean steps in a row the scale doubles. The scale trajectory is
// PyTorch's for the same sequence of finite / non-finite steps.
//
//   amp::GradScaler scaler;
//   for (...) {
//     opt.zero_grad();
//     Tensor loss;
//     { amp::AutocastGuard ac(Device::cuda(), kFloat16); loss = cross_entropy(model(x), y); }
//     scaler.scale(loss).backward();
//     scaler.unscale_(opt);                      // optional: clip_grad_norm_ then sees the true gradients
//     nn::clip_grad_norm_(model.parameters(), 1.0);
//     scaler.step(opt);                          // skipped (returns false) when a gradient is inf/NaN
//     scaler.update();
//   }
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "ember/optim/optimizer.h"

namespace ember::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;   // > 1
  double backoff_factor = 0.5;  // in (0, 1)
  int64_t growth_interval = 2000;
  bool enabled = true;  // false: scale() returns its argument, step() just steps, get_scale() is 1
};

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& opts = {});

  // loss * scale (differentiable; loss's dtype and device).
  Tensor scale(const Tensor& loss) const;
  // Divides the gradients of opt's parameters by the scale in place and records whether any is inf/NaN. At most
  // once per optimiser between update()s; step() calls it when you did not.
  void unscale_(optim::Optimizer& opt);
  // opt.step() unless a gradient of its parameters was inf/NaN; returns whether it stepped. Reads the inf/NaN
  // flags back (one host synchronisation per device).
  bool step(optim::Optimizer& opt);
  // The next scale from this iteration's steps: backoff on any inf/NaN, growth after growth_interval clean ones.
  void update();
  // Sets the scale (the growth count goes on), as update(new_scale) in PyTorch.
  void update(double new_scale);

  double get_scale() const;  // 1.0 when disabled
  bool is_enabled() const { return opts_.enabled; }
  int64_t growth_tracker() const { return growth_tracker_; }
  const GradScalerOptions& options() const { return opts_; }

  // PyTorch's keys: "scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"
  // (float64 scalars); nn::save_checkpoint keeps them through Checkpoint::scaler.
  optim::StateDict state_dict() const;
  void load_state_dict(const optim::StateDict& sd);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct PerOptimizer {
    Stage stage = Stage::kReady;
    std::vector<Tensor> found_inf;  // one float32 flag per device of its gradients
    int read = -1;                  // the flags as step() read them back (1: an inf/NaN), -1: not read yet
  };
  static bool any_set(const std::vector<Tensor>& flags);  // reads the flags back (a host sync per device)
  PerOptimizer& state_of(optim::Optimizer& opt);

  GradScalerOptions opts_;
  float scale_;  // float32, as PyTorch's scale tensor: the same roundings, the same trajectory
  int64_t growth_tracker_ = 0;
  std::map<const optim::Optimizer*, PerOptimizer> per_opt_;
};

}  // namespace ember::amp
