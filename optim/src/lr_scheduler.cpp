// defines: the LRScheduler base (the optimiser's anchor, initial_lr, state_dict / load_state_dict) and the closed
// forms of StepLR and CosineAnnealingLR (PyTorch's _get_closed_form_lr), with their option checks.
#include "ember/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ember/core/factory.h"

namespace ember::optim {

LRScheduler::LRScheduler(const char* name, Optimizer& opt)
    : name_(name), base_lrs_(opt.lrs_), last_lrs_(opt.lrs_), anchor_(opt.anchor()), opt_name_(opt.name()) {}

void LRScheduler::attach(std::optional<double> base_lr) {
  Optimizer& opt = optimizer();
  const size_t num_groups = opt.lrs_.size();
  if (opt.initial_lrs_.empty()) opt.initial_lrs_ = base_lr ? std::vector<double>(num_groups, *base_lr) : opt.lrs_;
  base_lrs_ = base_lr ? std::vector<double>(num_groups, *base_lr) : opt.initial_lrs_;
  last_lrs_ = opt.lrs_;
}

Optimizer& LRScheduler::optimizer() const {
  EMBER_CHECK(anchor_->opt != nullptr, Error, name_, ": its optimizer (", opt_name_,
              ") was destroyed or assigned over; a scheduler must not outlive its optimizer");
  return *anchor_->opt;
}

StateDict LRScheduler::state_dict() const {
  auto scalar = [](double v) { return full(Shape{}, v, {.dtype = kFloat64}); };
  StateDict sd;
  sd.emplace_back("last_epoch", scalar(static_cast<double>(last_epoch_)));
  sd.emplace_back("base_lr", Optimizer::per_group_tensor(base_lrs_));
  sd.emplace_back("last_lr", Optimizer::per_group_tensor(last_lrs_));
  for (const auto& [name, v] : extra_state()) sd.emplace_back(name, scalar(v));
  return sd;
}

void LRScheduler::load_state_dict(const StateDict& sd) {
  const std::string op = std::string(name_) + ".load_state_dict";
  Optimizer& opt = optimizer();
  const size_t num_groups = base_lrs_.size();
  std::vector<std::string> names = {"last_epoch", "base_lr", "last_lr"};
  for (const auto& e : extra_state()) names.push_back(e.first);
  // base_lr and last_lr (1 and 2) hold one value per group, the others one value
  std::vector<std::optional<std::vector<double>>> values(names.size());
  for (const auto& [name, t] : sd) {
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      std::string all;
      for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
      throw Error(detail::str(op, ": unexpected entry '", name, "' (", name_, " has entries ", all, ")"));
    }
    const size_t k = static_cast<size_t>(it - names.begin());
    std::optional<std::vector<double>>& v = values[k];
    EMBER_CHECK(!v, Error, op, ": entry '", name, "' appears twice");
    EMBER_CHECK(t.defined(), Error, op, ": entry '", name, "' is undefined");
    if (k == 1 || k == 2) {
      v = Optimizer::read_per_group(op, name, t, num_groups,
                                    detail::str("this ", name_, "'s optimizer (", opt_name_, ")"));
      continue;
    }
    EMBER_CHECK(t.dim() == 0 && t.dtype() == kFloat64, Error, op, ": entry '", name, "' is ", t.dtype(), t.shape(),
                "; expected a 0-dim float64 tensor");
    v = t.to_vector<double>();  // works whatever the device
  }
  for (size_t i = 0; i < names.size(); ++i)
    EMBER_CHECK(values[i].has_value(), Error, op, ": entry '", names[i], "' is missing");
  const double epoch = (*values[0])[0];
  EMBER_CHECK(epoch >= 0 && epoch == std::floor(epoch) && epoch < 9e15, Error, op,
              ": entry 'last_epoch' holds an invalid step count ", epoch);
  for (size_t i : {1, 2})
    for (size_t g = 0; g < num_groups; ++g) {
      const double lr = (*values[i])[g];
      EMBER_CHECK(std::isfinite(lr) && lr >= 0, Error, op, ": entry '", names[i], "' holds an invalid lr ", lr,
                  num_groups == 1 ? "" : detail::str(" for param group ", g));
    }
  std::vector<double> extra;
  for (size_t i = 3; i < values.size(); ++i) extra.push_back((*values[i])[0]);
  check_state(op, static_cast<int64_t>(epoch), extra);

  last_epoch_ = static_cast<int64_t>(epoch);
  base_lrs_ = *values[1];
  last_lrs_ = *values[2];
  restore_extra(extra);
  apply_restored(opt);  // checked values: cannot throw
}

std::vector<double> ClosedFormLRScheduler::lrs_at(int64_t epoch) const {
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(lr_at(epoch, base));
  return lrs;
}

void ClosedFormLRScheduler::step() {
  Optimizer& opt = optimizer();
  std::vector<double> lrs = lrs_at(last_epoch_ + 1);
  set_lrs(opt, lrs);
  ++last_epoch_;
  last_lrs_ = std::move(lrs);
}

StepLR::StepLR(Optimizer& opt, const StepLROptions& o) : ClosedFormLRScheduler("StepLR", opt), opts_(o) {
  EMBER_CHECK_VALUE(o.step_size >= 1, "StepLR: invalid step_size ", o.step_size, " (must be >= 1)");
  EMBER_CHECK_VALUE(std::isfinite(o.gamma) && o.gamma >= 0, "StepLR: invalid gamma ", o.gamma, " (must be >= 0)");
  attach();
}

double StepLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(opts_.gamma, static_cast<double>(epoch / opts_.step_size));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, const CosineAnnealingLROptions& o)
    : ClosedFormLRScheduler("CosineAnnealingLR", opt), opts_(o) {
  EMBER_CHECK_VALUE(o.T_max >= 1, "CosineAnnealingLR: invalid T_max ", o.T_max, " (must be >= 1)");
  EMBER_CHECK_VALUE(std::isfinite(o.eta_min) && o.eta_min >= 0, "CosineAnnealingLR: invalid eta_min ", o.eta_min,
                    " (must be >= 0)");
  attach();
}

double CosineAnnealingLR::lr_at(int64_t epoch, double base_lr) const {
  const double c = std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(opts_.T_max));
  return opts_.eta_min + (base_lr - opts_.eta_min) * (1 + c) / 2;
}

LambdaLR::LambdaLR(Optimizer& opt, std::function<double(int64_t)> lr_lambda)
    : ClosedFormLRScheduler("LambdaLR", opt), lr_lambda_(std::move(lr_lambda)) {
  EMBER_CHECK_VALUE(static_cast<bool>(lr_lambda_), "LambdaLR: lr_lambda is empty");
  attach();
  // As PyTorch's: the step-0 factor applies at once (a warmup starts low).
  std::vector<double> lrs = lrs_at(0);
  set_lrs(optimizer(), lrs);
  last_lrs_ = std::move(lrs);
}

double LambdaLR::lr_at(int64_t epoch, double base_lr) const {
  const double f = lr_lambda_(epoch);
  EMBER_CHECK_VALUE(std::isfinite(f) && f >= 0, "LambdaLR: lr_lambda(", epoch, ") returned ", f,
                    " (must be finite and >= 0)");
  return base_lr * f;
}

}  // namespace ember::optim
