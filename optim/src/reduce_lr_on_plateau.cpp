// defines: ReduceLROnPlateau — option checks, step(metric) with PyTorch's comparisons in PyTorch's order (the
// tests hold its numbers bit for bit), and its own state_dict entries.
#include "ember/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ember::optim {

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& opt, const ReduceLROnPlateauOptions& o)
    : LRScheduler("ReduceLROnPlateau", opt), opts_(o) {
  EMBER_CHECK_VALUE(std::isfinite(o.factor) && o.factor >= 0 && o.factor < 1, "ReduceLROnPlateau: invalid factor ",
                    o.factor, " (must be in [0, 1))");
  EMBER_CHECK_VALUE(o.patience >= 0, "ReduceLROnPlateau: invalid patience ", o.patience, " (must be >= 0)");
  EMBER_CHECK_VALUE(std::isfinite(o.threshold) && o.threshold >= 0, "ReduceLROnPlateau: invalid threshold ",
                    o.threshold, " (must be >= 0)");
  EMBER_CHECK_VALUE(o.cooldown >= 0, "ReduceLROnPlateau: invalid cooldown ", o.cooldown, " (must be >= 0)");
  EMBER_CHECK_VALUE(std::isfinite(o.min_lr) && o.min_lr >= 0, "ReduceLROnPlateau: invalid min_lr ", o.min_lr,
                    " (must be >= 0)");
  EMBER_CHECK_VALUE(std::isfinite(o.eps) && o.eps >= 0, "ReduceLROnPlateau: invalid eps ", o.eps, " (must be >= 0)");
  const double inf = std::numeric_limits<double>::infinity();
  best_ = o.mode == PlateauMode::Min ? inf : -inf;  // any metric but NaN improves on it
  attach();
}

// PyTorch's expressions exactly (best * (1 - threshold), not best - best * threshold), so the decisions agree.
bool ReduceLROnPlateau::is_better(double metric) const {
  const bool rel = opts_.threshold_mode == ThresholdMode::Rel;
  if (opts_.mode == PlateauMode::Min)
    return rel ? metric < best_ * (1.0 - opts_.threshold) : metric < best_ - opts_.threshold;
  return rel ? metric > best_ * (opts_.threshold + 1.0) : metric > best_ + opts_.threshold;
}

void ReduceLROnPlateau::step(double metric) {
  Optimizer& opt = optimizer();
  double best = best_;
  int64_t bad = num_bad_epochs_, cooldown = cooldown_counter_;
  if (is_better(metric)) {
    best = metric;
    bad = 0;
  } else {
    ++bad;
  }
  if (cooldown > 0) {
    --cooldown;
    bad = 0;  // bad epochs in the cooldown do not count
  }
  std::vector<double> lrs = group_lrs(opt);
  if (bad > opts_.patience) {
    for (double& lr : lrs) {  // each group on its own, as PyTorch's _reduce_lr
      const double new_lr = std::max(lr * opts_.factor, opts_.min_lr);
      if (lr - new_lr > opts_.eps) lr = new_lr;
    }
    set_lrs(opt, lrs);
    cooldown = opts_.cooldown;
    bad = 0;
  }
  best_ = best;
  num_bad_epochs_ = bad;
  cooldown_counter_ = cooldown;
  ++last_epoch_;
  last_lrs_ = std::move(lrs);
}

std::vector<std::pair<std::string, double>> ReduceLROnPlateau::extra_state() const {
  return {{"best", best_},
          {"num_bad_epochs", static_cast<double>(num_bad_epochs_)},
          {"cooldown_counter", static_cast<double>(cooldown_counter_)}};
}

void ReduceLROnPlateau::check_state(const std::string& op, int64_t, const std::vector<double>& extra) const {
  EMBER_CHECK(!std::isnan(extra[0]), Error, op, ": entry 'best' holds NaN");
  for (size_t i : {1, 2}) {
    const double v = extra[i];
    EMBER_CHECK(v >= 0 && v == std::floor(v) && v < 9e15, Error, op, ": entry '",
                i == 1 ? "num_bad_epochs" : "cooldown_counter", "' holds an invalid count ", v);
  }
}

void ReduceLROnPlateau::restore_extra(const std::vector<double>& extra) {
  best_ = extra[0];
  num_bad_epochs_ = static_cast<int64_t>(extra[1]);
  cooldown_counter_ = static_cast<int64_t>(extra[2]);
}

}  // namespace ember::optim
