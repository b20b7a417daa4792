// defines: LRScheduler::step and the closed forms of StepLR and CosineAnnealingLR (PyTorch's
// _get_closed_form_lr), with their option checks.
#include "ember/optim/lr_scheduler.h"

#include <cmath>
#include <numbers>

namespace ember::optim {

LRScheduler::LRScheduler(Optimizer& opt) : opt_(&opt), base_lr_(opt.lr()), last_lr_(opt.lr()) {}

void LRScheduler::step() {
  ++last_epoch_;
  last_lr_ = lr_at(last_epoch_);
  opt_->set_lr(last_lr_);
}

StepLR::StepLR(Optimizer& opt, const StepLROptions& o) : LRScheduler(opt), opts_(o) {
  EMBER_CHECK_VALUE(o.step_size >= 1, "StepLR: invalid step_size ", o.step_size, " (must be >= 1)");
  EMBER_CHECK_VALUE(std::isfinite(o.gamma) && o.gamma >= 0, "StepLR: invalid gamma ", o.gamma, " (must be >= 0)");
}

double StepLR::lr_at(int64_t epoch) const {
  return base_lr_ * std::pow(opts_.gamma, static_cast<double>(epoch / opts_.step_size));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, const CosineAnnealingLROptions& o) : LRScheduler(opt), opts_(o) {
  EMBER_CHECK_VALUE(o.T_max >= 1, "CosineAnnealingLR: invalid T_max ", o.T_max, " (must be >= 1)");
  EMBER_CHECK_VALUE(std::isfinite(o.eta_min) && o.eta_min >= 0, "CosineAnnealingLR: invalid eta_min ", o.eta_min,
                    " (must be >= 0)");
}

double CosineAnnealingLR::lr_at(int64_t epoch) const {
  const double c = std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(opts_.T_max));
  return opts_.eta_min + (base_lr_ - opts_.eta_min) * (1 + c) / 2;
}

}  // namespace ember::optim
