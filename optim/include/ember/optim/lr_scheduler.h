// defines: the learning-rate schedulers, as PyTorch's: the common base LRScheduler (the optimiser it drives, the
// step count, base and last lr, state_dict / load_state_dict); StepLR and CosineAnnealingLR (closed forms of the
// epoch); ReduceLROnPlateau (driven by a metric); OneCycleLR (per batch, cycles the momentum too).
//
// When to step, as in PyTorch: StepLR and CosineAnnealingLR once per epoch, after that epoch's optimiser steps;
// ReduceLROnPlateau once per epoch with the epoch's validation metric; OneCycleLR once per batch, after opt.step().
//
//   optim::SGD opt(params, {.lr = 0.1});
//   optim::CosineAnnealingLR sched(opt, {.T_max = 100});
//   for (int epoch = 0; epoch < 100; ++epoch) { train_one_epoch(opt); sched.step(); }
//
// A scheduler follows its optimiser when the optimiser is moved (into a vector, another variable); once the
// optimiser is destroyed (or assigned over), the scheduler's step() and load_state_dict() throw ember::Error.
// To resume: save opt.state_dict() and sched.state_dict(); build both as before, then load both, in either order.
//
// With parameter groups, as PyTorch: every group is scheduled from its own base lr (its initial lr), e.g. StepLR
// multiplies each group's lr by gamma; ReduceLROnPlateau reduces every group (each down to min_lr at most);
// OneCycleLR gives every group the same lr (and momentum). The scheduler's groups are its optimiser's when it was
// built.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/optim/optimizer.h"

namespace ember::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  // The lr the last step (or the constructor) left: group 0's, and each group's.
  double get_last_lr() const { return last_lrs_[0]; }
  const std::vector<double>& get_last_lrs() const { return last_lrs_; }
  int64_t last_epoch() const { return last_epoch_; }  // the number of steps so far (batches for OneCycleLR)
  // The lr the schedule starts from: the optimiser's initial_lr() (its lr when the first scheduler attached, kept
  // in its state_dict), so a scheduler built after loading a checkpoint does not start from the decayed lr.
  // OneCycleLR's is max_lr / div_factor. base_lr() is group 0's; base_lrs() each group's.
  double base_lr() const { return base_lrs_[0]; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  const char* name() const { return name_; }  // "StepLR", ...

  // A snapshot, float64 entries in this order: "last_epoch", "base_lr", "last_lr", then the scheduler's own
  // (ReduceLROnPlateau: "best", "num_bad_epochs", "cooldown_counter"). All are 0-dim but base_lr and last_lr
  // with several param groups: 1-D [num groups], one per group (as the optimiser's param_groups entries). The
  // options are not saved: like an optimiser's hyperparameters, they come from the constructor.
  StateDict state_dict() const;
  // Restores a state_dict() after checking every entry's name and value (throws ember::Error naming the entry,
  // and both group counts when they differ; nothing changes on a throw), then sets the optimiser's lr (and OneCycleLR's
  // momentum) to the restored state's, so that a resumed run repeats the uninterrupted one whichever of the two
  // state_dicts is loaded first.
  void load_state_dict(const StateDict& sd);

 protected:
  // Keeps the optimiser's anchor only: a derived constructor checks its options, then calls attach().
  LRScheduler(const char* name, Optimizer& opt);
  // Records the optimiser's initial lrs if no scheduler did before (its group lrs, or `base_lr` for every group
  // when given) and takes base_lrs from them, or `base_lr` when given (OneCycleLR's, which does not depend on
  // the optimiser's lr).
  void attach(std::optional<double> base_lr = std::nullopt);
  // The optimiser, wherever it has moved to; throws ember::Error once it has been destroyed.
  Optimizer& optimizer() const;
  // Throws the ValueError the optimiser's set_momentum would throw for `momentum`, without setting it.
  static void check_momentum(const Optimizer& opt, double momentum) { opt.check_momentum(momentum); }

  // A derived scheduler's own state: the names and current values of its entries after the common three.
  virtual std::vector<std::pair<std::string, double>> extra_state() const { return {}; }
  // Throws ember::Error (the message starting with `op`) when a loaded state cannot be this scheduler's, before
  // anything changes; `extra` holds the values of extra_state()'s entries, in its order.
  virtual void check_state(const std::string& /*op*/, int64_t /*last_epoch*/,
                           const std::vector<double>& /*extra*/) const {}
  virtual void restore_extra(const std::vector<double>&) {}
  // Sets the optimiser's hyperparameters to the restored state's (after restore_extra).
  virtual void apply_restored(Optimizer& opt) { set_lrs(opt, last_lrs_); }
  // Sets every group's lr of `opt` (checked first, so nothing changes on a throw).
  static void set_lrs(Optimizer& opt, const std::vector<double>& lrs) { opt.set_lrs(lrs); }
  static std::vector<double> group_lrs(const Optimizer& opt) { return opt.lrs_; }

  const char* name_;
  std::vector<double> base_lrs_;  // per group
  int64_t last_epoch_ = 0;
  std::vector<double> last_lrs_;  // per group

 private:
  std::shared_ptr<Optimizer::Anchor> anchor_;
  const char* opt_name_;  // for the message once the optimiser is gone
};

// Schedulers whose lr is a closed form of the epoch (PyTorch's _get_closed_form_lr).
class ClosedFormLRScheduler : public LRScheduler {
 public:
  void step();  // epoch += 1; each group's lr = lr_at(epoch, its base lr)

 protected:
  using LRScheduler::LRScheduler;
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;  // lr_at(0, b) == b
  std::vector<double> lrs_at(int64_t epoch) const;                // every group's
};

struct StepLROptions {
  int64_t step_size = 0;  // required, >= 1
  double gamma = 0.1;
};
// lr = base_lr * gamma^floor(epoch / step_size)
class StepLR : public ClosedFormLRScheduler {
 public:
  using Options = StepLROptions;
  StepLR(Optimizer& opt, const StepLROptions& options);

 private:
  double lr_at(int64_t epoch, double base_lr) const override;
  StepLROptions opts_;
};

struct CosineAnnealingLROptions {
  int64_t T_max = 0;  // required, >= 1: epochs from base_lr down to eta_min
  double eta_min = 0;
};
// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 (SGDR without restarts; past
// T_max it rises again, as PyTorch's does)
class CosineAnnealingLR : public ClosedFormLRScheduler {
 public:
  using Options = CosineAnnealingLROptions;
  CosineAnnealingLR(Optimizer& opt, const CosineAnnealingLROptions& options);

 private:
  double lr_at(int64_t epoch, double base_lr) const override;
  CosineAnnealingLROptions opts_;
};

// lr = base_lr * lr_lambda(epoch): any schedule as a function of the step count — e.g. linear warmup then cosine
// decay, stepped once per batch:
//
//   optim::LambdaLR sched(opt, [=](int64_t s) {
//     if (s < warmup) return double(s + 1) / warmup;
//     return 0.5 * (1 + std::cos(M_PI * double(s - warmup) / double(total - warmup)));
//   });
//   for (...) { ...; opt.step(); sched.step(); }
//
// The function is called with 0 at construction (the optimiser's lr becomes base_lr * lr_lambda(0), as PyTorch)
// and with each new step count after, once per param group (each group's lr is its base lr times the factor); it must
// return a finite value >= 0 (else ValueError naming the step). The function is not saved in state_dict: pass the same
// one when resuming.
class LambdaLR : public ClosedFormLRScheduler {
 public:
  LambdaLR(Optimizer& opt, std::function<double(int64_t)> lr_lambda);

 private:
  double lr_at(int64_t epoch, double base_lr) const override;
  std::function<double(int64_t)> lr_lambda_;
};

enum class PlateauMode { Min, Max };    // whether the metric should fall (a loss) or rise (an accuracy)
enum class ThresholdMode { Rel, Abs };  // an improvement beats best * (1 -/+ threshold), or best -/+ threshold

struct ReduceLROnPlateauOptions {
  PlateauMode mode = PlateauMode::Min;
  double factor = 0.1;      // in [0, 1): new lr = max(lr * factor, min_lr), in every param group
  int64_t patience = 10;    // >= 0: epochs without improvement tolerated; the next one reduces the lr
  double threshold = 1e-4;  // >= 0
  ThresholdMode threshold_mode = ThresholdMode::Rel;
  int64_t cooldown = 0;  // >= 0: epochs after a reduction during which bad epochs are not counted
  double min_lr = 0;     // >= 0
  double eps = 1e-8;     // >= 0: a reduction smaller than this is skipped
};
// Reduces the lr by `factor` when the metric has not improved for more than `patience` epochs (PyTorch's rules:
// an epoch improves when the metric beats the best so far by the threshold; a reduction applies only if it
// changes the lr by more than eps; the cooldown then restarts).
//
//   optim::ReduceLROnPlateau sched(opt, {.factor = 0.5, .patience = 3});
//   for (...) { train_one_epoch(opt); sched.step(validation_loss()); }
class ReduceLROnPlateau : public LRScheduler {
 public:
  using Options = ReduceLROnPlateauOptions;
  ReduceLROnPlateau(Optimizer& opt, const ReduceLROnPlateauOptions& options = {});
  void step(double metric);  // once per epoch; a NaN metric counts as no improvement

  double best() const { return best_; }  // +inf (Min) or -inf (Max) before the first step
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }
  bool in_cooldown() const { return cooldown_counter_ > 0; }

 private:
  bool is_better(double metric) const;
  std::vector<std::pair<std::string, double>> extra_state() const override;
  void check_state(const std::string& op, int64_t last_epoch, const std::vector<double>& extra) const override;
  void restore_extra(const std::vector<double>& extra) override;

  ReduceLROnPlateauOptions opts_;
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
};

enum class AnnealStrategy { Cos, Linear };

struct OneCycleLROptions {
  double max_lr = 0;        // required, > 0: the peak lr
  int64_t total_steps = 0;  // the number of batches (> 0), or 0 to take epochs * steps_per_epoch
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0;
  double pct_start = 0.3;  // in [0, 1]: the share of the steps spent rising to max_lr
  AnnealStrategy anneal_strategy = AnnealStrategy::Cos;
  double div_factor = 25;         // > 0: the lr starts at max_lr / div_factor
  double final_div_factor = 1e4;  // > 0: and ends at max_lr / div_factor / final_div_factor
  bool three_phase = false;       // rise, fall back to the start lr, then anneal to the end lr (fast.ai's schedule)
  // Cycle the optimiser's momentum (SGD's momentum, Adam's beta1) inversely to the lr, between these two.
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
};
// The 1cycle policy (Smith & Topin, "Super-Convergence"), with PyTorch's phases: lr from max_lr / div_factor up
// to max_lr at step pct_start * total_steps - 1, then annealed down to the end lr at step total_steps - 1. The
// constructor sets the step-0 lr (and momentum); step() once per batch, total_steps times at most (the last
// call, after the last batch, leaves the end lr: PyTorch extrapolates there, to a negative lr with Linear); one
// more throws ValueError.
//
//   optim::OneCycleLR sched(opt, {.max_lr = 0.1, .epochs = 10, .steps_per_epoch = loader.size()});
//   for (...) for (auto& batch : loader) { ...; opt.step(); sched.step(); }
class OneCycleLR : public LRScheduler {
 public:
  using Options = OneCycleLROptions;
  // Throws ValueError for an invalid option, and when cycle_momentum is set but the optimiser has no momentum
  // (an SGD built with momentum 0, whose state keeps no momentum buffer).
  OneCycleLR(Optimizer& opt, const OneCycleLROptions& options);
  void step();
  int64_t total_steps() const { return total_steps_; }

 private:
  struct Point {
    double lr, momentum;
  };
  Point at(int64_t step) const;
  void check_state(const std::string& op, int64_t last_epoch, const std::vector<double>& extra) const override;
  void apply_restored(Optimizer& opt) override;

  struct Phase {
    double end_step;  // a double, as PyTorch's float(pct_start * total_steps) - 1
    double start_lr, end_lr, start_momentum, end_momentum;
  };
  OneCycleLROptions opts_;
  int64_t total_steps_;
  std::vector<Phase> phases_;
};

}  // namespace ember::optim
