// defines: optim::LRScheduler (base) and the schedulers StepLR and CosineAnnealingLR. Call step() once
// per epoch, after that epoch's optimiser steps (as in PyTorch); it sets the optimiser's lr to the
// closed form at the new epoch count. The lr at construction (epoch 0) is the base lr.
//
//   optim::SGD opt(params, {.lr = 0.1});
//   optim::CosineAnnealingLR sched(opt, {.T_max = 100});
//   for (int epoch = 0; epoch < 100; ++epoch) { train_one_epoch(opt); sched.step(); }
#pragma once
#include <cstdint>

#include "ember/optim/optimizer.h"

namespace ember::optim {

// Holds a pointer to the optimiser, which must outlive the scheduler.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  void step();                                     // epoch += 1; optimiser lr = lr_at(epoch)
  double get_last_lr() const { return last_lr_; }  // the lr the last step() (or the constructor) set
  int64_t last_epoch() const { return last_epoch_; }
  double base_lr() const { return base_lr_; }

 protected:
  explicit LRScheduler(Optimizer& opt);
  virtual double lr_at(int64_t epoch) const = 0;  // the closed form; lr_at(0) == base_lr

  Optimizer* opt_;
  double base_lr_;
  int64_t last_epoch_ = 0;
  double last_lr_;
};

struct StepLROptions {
  int64_t step_size = 0;  // required, >= 1
  double gamma = 0.1;
};
// lr = base_lr * gamma^floor(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  using Options = StepLROptions;
  StepLR(Optimizer& opt, const StepLROptions& options);

 private:
  double lr_at(int64_t epoch) const override;
  StepLROptions opts_;
};

struct CosineAnnealingLROptions {
  int64_t T_max = 0;  // required, >= 1: epochs from base_lr down to eta_min
  double eta_min = 0;
};
// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 (SGDR without restarts; past
// T_max it rises again, as PyTorch's does)
class CosineAnnealingLR : public LRScheduler {
 public:
  using Options = CosineAnnealingLROptions;
  CosineAnnealingLR(Optimizer& opt, const CosineAnnealingLROptions& options);

 private:
  double lr_at(int64_t epoch) const override;
  CosineAnnealingLROptions opts_;
};

}  // namespace ember::optim
