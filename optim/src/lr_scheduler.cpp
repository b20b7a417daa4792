// defines: the LRScheduler base (the optimiser's anchor, initial_lr, state_dict / load_state_dict) and the closed
// forms of StepLR and CosineAnnealingLR (PyTorch's _get_closed_form_lr), with their option checks.
#include "ember/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ember/core/factory.h"

namespace ember::optim {

LRScheduler::LRScheduler(const char* name, Optimizer& opt)
    : name_(name), base_lr_(opt.lr()), last_lr_(opt.lr()), anchor_(opt.anchor()), opt_name_(opt.name()) {}

void LRScheduler::attach(std::optional<double> base_lr) {
  Optimizer& opt = optimizer();
  if (!opt.initial_lr_) opt.initial_lr_ = base_lr.value_or(opt.lr());
  base_lr_ = base_lr.value_or(*opt.initial_lr_);
  last_lr_ = opt.lr();
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
  sd.emplace_back("base_lr", scalar(base_lr_));
  sd.emplace_back("last_lr", scalar(last_lr_));
  for (const auto& [name, v] : extra_state()) sd.emplace_back(name, scalar(v));
  return sd;
}

void LRScheduler::load_state_dict(const StateDict& sd) {
  const std::string op = std::string(name_) + ".load_state_dict";
  Optimizer& opt = optimizer();
  std::vector<std::string> names = {"last_epoch", "base_lr", "last_lr"};
  for (const auto& e : extra_state()) names.push_back(e.first);
  std::vector<std::optional<double>> values(names.size());
  for (const auto& [name, t] : sd) {
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      std::string all;
      for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
      throw Error(detail::str(op, ": unexpected entry '", name, "' (", name_, " has entries ", all, ")"));
    }
    std::optional<double>& v = values[static_cast<size_t>(it - names.begin())];
    EMBER_CHECK(!v, Error, op, ": entry '", name, "' appears twice");
    EMBER_CHECK(t.defined() && t.dim() == 0 && t.dtype() == kFloat64, Error, op, ": entry '", name, "' is ",
                t.defined() ? detail::str(t.dtype(), t.shape()) : std::string("undefined"),
                "; expected a 0-dim float64 tensor");
    v = t.to_vector<double>()[0];  // works whatever the device
  }
  for (size_t i = 0; i < names.size(); ++i)
    EMBER_CHECK(values[i].has_value(), Error, op, ": entry '", names[i], "' is missing");
  const double epoch = *values[0];
  EMBER_CHECK(epoch >= 0 && epoch == std::floor(epoch) && epoch < 9e15, Error, op,
              ": entry 'last_epoch' holds an invalid step count ", epoch);
  for (size_t i : {1, 2})
    EMBER_CHECK(std::isfinite(*values[i]) && *values[i] >= 0, Error, op, ": entry '", names[i],
                "' holds an invalid lr ", *values[i]);
  std::vector<double> extra;
  for (size_t i = 3; i < values.size(); ++i) extra.push_back(*values[i]);
  check_state(op, static_cast<int64_t>(epoch), extra);

  last_epoch_ = static_cast<int64_t>(epoch);
  base_lr_ = *values[1];
  last_lr_ = *values[2];
  restore_extra(extra);
  apply_restored(opt);  // checked values: cannot throw
}

void ClosedFormLRScheduler::step() {
  Optimizer& opt = optimizer();
  const double lr = lr_at(last_epoch_ + 1);
  opt.set_lr(lr);
  ++last_epoch_;
  last_lr_ = lr;
}

StepLR::StepLR(Optimizer& opt, const StepLROptions& o) : ClosedFormLRScheduler("StepLR", opt), opts_(o) {
  EMBER_CHECK_VALUE(o.step_size >= 1, "StepLR: invalid step_size ", o.step_size, " (must be >= 1)");
  EMBER_CHECK_VALUE(std::isfinite(o.gamma) && o.gamma >= 0, "StepLR: invalid gamma ", o.gamma, " (must be >= 0)");
  attach();
}

double StepLR::lr_at(int64_t epoch) const {
  return base_lr_ * std::pow(opts_.gamma, static_cast<double>(epoch / opts_.step_size));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, const CosineAnnealingLROptions& o)
    : ClosedFormLRScheduler("CosineAnnealingLR", opt), opts_(o) {
  EMBER_CHECK_VALUE(o.T_max >= 1, "CosineAnnealingLR: invalid T_max ", o.T_max, " (must be >= 1)");
  EMBER_CHECK_VALUE(std::isfinite(o.eta_min) && o.eta_min >= 0, "CosineAnnealingLR: invalid eta_min ", o.eta_min,
                    " (must be >= 0)");
  attach();
}

double CosineAnnealingLR::lr_at(int64_t epoch) const {
  const double c = std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(opts_.T_max));
  return opts_.eta_min + (base_lr_ - opts_.eta_min) * (1 + c) / 2;
}

LambdaLR::LambdaLR(Optimizer& opt, std::function<double(int64_t)> lr_lambda)
    : ClosedFormLRScheduler("LambdaLR", opt), lr_lambda_(std::move(lr_lambda)) {
  EMBER_CHECK_VALUE(static_cast<bool>(lr_lambda_), "LambdaLR: lr_lambda is empty");
  attach();
  // As PyTorch's: the step-0 factor applies at once (a warmup starts low).
  const double lr = lr_at(0);
  optimizer().set_lr(lr);
  last_lr_ = lr;
}

double LambdaLR::lr_at(int64_t epoch) const {
  const double f = lr_lambda_(epoch);
  EMBER_CHECK_VALUE(std::isfinite(f) && f >= 0, "LambdaLR: lr_lambda(", epoch, ") returned ", f,
                    " (must be finite and >= 0)");
  return base_lr_ * f;
}

}  // namespace ember::optim
