// defines: OneCycleLR — option checks, PyTorch's phases and annealing formulas in PyTorch's order of operations
// (the tests hold its numbers bit for bit; this file is compiled with -ffp-contract=off so that no multiply-add is
// fused), step() and the restore of the momentum on load_state_dict.
#include "ember/optim/lr_scheduler.h"

#include <cmath>
#include <limits>
#include <numbers>

namespace ember::optim {
namespace {

double anneal(AnnealStrategy s, double start, double end, double pct) {
  if (s == AnnealStrategy::Linear) return (end - start) * pct + start;
  const double cos_out = std::cos(std::numbers::pi * pct) + 1;
  return end + (start - end) / 2.0 * cos_out;
}

int64_t checked_total_steps(const OneCycleLROptions& o) {
  if (o.total_steps != 0 || (o.epochs == 0 && o.steps_per_epoch == 0)) {
    EMBER_CHECK_VALUE(o.total_steps > 0, "OneCycleLR: invalid total_steps ", o.total_steps,
                      " (must be > 0; or leave it 0 and give epochs and steps_per_epoch)");
    EMBER_CHECK_VALUE(o.epochs == 0 && o.steps_per_epoch == 0, "OneCycleLR: got total_steps ", o.total_steps,
                      " and epochs ", o.epochs, ", steps_per_epoch ", o.steps_per_epoch, "; give one or the other");
    return o.total_steps;
  }
  EMBER_CHECK_VALUE(o.epochs > 0, "OneCycleLR: invalid epochs ", o.epochs, " (must be > 0)");
  EMBER_CHECK_VALUE(o.steps_per_epoch > 0, "OneCycleLR: invalid steps_per_epoch ", o.steps_per_epoch, " (must be > 0)");
  EMBER_CHECK_VALUE(o.epochs <= std::numeric_limits<int64_t>::max() / o.steps_per_epoch, "OneCycleLR: epochs ",
                    o.epochs, " * steps_per_epoch ", o.steps_per_epoch, " overflows");
  return o.epochs * o.steps_per_epoch;
}

}  // namespace

OneCycleLR::OneCycleLR(Optimizer& opt, const OneCycleLROptions& o)
    : LRScheduler("OneCycleLR", opt), opts_(o), total_steps_(checked_total_steps(o)) {
  EMBER_CHECK_VALUE(std::isfinite(o.max_lr) && o.max_lr > 0, "OneCycleLR: invalid max_lr ", o.max_lr, " (must be > 0)");
  EMBER_CHECK_VALUE(o.pct_start >= 0 && o.pct_start <= 1, "OneCycleLR: invalid pct_start ", o.pct_start,
                    " (must be in [0, 1])");
  EMBER_CHECK_VALUE(std::isfinite(o.div_factor) && o.div_factor > 0, "OneCycleLR: invalid div_factor ", o.div_factor,
                    " (must be > 0)");
  EMBER_CHECK_VALUE(std::isfinite(o.final_div_factor) && o.final_div_factor > 0,
                    "OneCycleLR: invalid final_div_factor ", o.final_div_factor, " (must be > 0)");
  if (o.cycle_momentum) {
    // PyTorch's SGD would start using momentum here; ours fixed its state (no momentum buffer) at construction.
    EMBER_CHECK_VALUE(opt.has_momentum(), "OneCycleLR: cycle_momentum needs an optimizer with a momentum, but this ",
                      opt.name(),
                      " has none (build SGD with momentum != 0 in every param group, or set "
                      "cycle_momentum = false)");
    for (const auto& [what, m] : {std::pair{"base_momentum", o.base_momentum}, {"max_momentum", o.max_momentum}}) {
      try {
        check_momentum(opt, m);
      } catch (const ValueError& e) {
        throw ValueError(detail::str("OneCycleLR: invalid ", what, " ", m, " for ", opt.name(), ": ", e.what()));
      }
    }
  }

  const double initial_lr = o.max_lr / o.div_factor;
  const double min_lr = initial_lr / o.final_div_factor;
  const double steps = static_cast<double>(total_steps_);
  const double bm = o.base_momentum, mm = o.max_momentum;
  if (o.three_phase) {
    phases_ = {{o.pct_start * steps - 1, initial_lr, o.max_lr, mm, bm},
               {2 * o.pct_start * steps - 2, o.max_lr, initial_lr, bm, mm},
               {steps - 1, initial_lr, min_lr, mm, mm}};
  } else {
    phases_ = {{o.pct_start * steps - 1, initial_lr, o.max_lr, mm, bm}, {steps - 1, o.max_lr, min_lr, bm, mm}};
  }

  attach(initial_lr);
  const Point p = at(0);
  if (o.cycle_momentum) opt.set_momentum(p.momentum);
  last_lrs_.assign(opt.num_param_groups(), p.lr);  // every group the same, as PyTorch with one max_lr
  set_lrs(opt, last_lrs_);
}

OneCycleLR::Point OneCycleLR::at(int64_t step) const {
  // Step total_steps comes after the last batch: it holds the end values where PyTorch extrapolates its last
  // phase (which the optimiser would reject: Linear goes below zero there).
  if (step == total_steps_) return {phases_.back().end_lr, phases_.back().end_momentum};
  const double s = static_cast<double>(step);
  double start = 0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const Phase& ph = phases_[i];
    if (s <= ph.end_step || i + 1 == phases_.size()) {
      // A phase of no length (pct_start * total_steps == 1) is over at once; PyTorch divides by zero there.
      const double pct = ph.end_step == start ? 1.0 : (s - start) / (ph.end_step - start);
      return {anneal(opts_.anneal_strategy, ph.start_lr, ph.end_lr, pct),
              anneal(opts_.anneal_strategy, ph.start_momentum, ph.end_momentum, pct)};
    }
    start = ph.end_step;
  }
  return {};  // not reached: the last phase takes every step
}

void OneCycleLR::step() {
  Optimizer& opt = optimizer();
  const int64_t next = last_epoch_ + 1;
  EMBER_CHECK_VALUE(next <= total_steps_, "OneCycleLR: step() called ", next,
                    " times, past total_steps = ", total_steps_, " (step once per batch)");
  const Point p = at(next);
  if (opts_.cycle_momentum) opt.set_momentum(p.momentum);
  opt.set_lr(p.lr);  // every group's
  last_epoch_ = next;
  last_lrs_.assign(last_lrs_.size(), p.lr);
}

void OneCycleLR::check_state(const std::string& op, int64_t last_epoch, const std::vector<double>&) const {
  EMBER_CHECK(last_epoch <= total_steps_, Error, op, ": entry 'last_epoch' holds ", last_epoch,
              ", past this OneCycleLR's total_steps = ", total_steps_);
}

void OneCycleLR::apply_restored(Optimizer& opt) {
  if (opts_.cycle_momentum) opt.set_momentum(at(last_epoch_).momentum);
  set_lrs(opt, last_lrs_);
}

}  // namespace ember::optim
