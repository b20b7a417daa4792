// Tests ReduceLROnPlateau: lr, best, bad-epoch and cooldown counts against PyTorch's for both modes and both
// threshold modes (with min_lr and eps), a NaN metric, and option errors.
#include <limits>

#include "optim_test_util.h"

namespace ember::test {
namespace {

// From PyTorch 1.13 (Debian's python3-torch): after each step(metric), the lr, best, num_bad_epochs and
// cooldown_counter of ReduceLROnPlateau(patience=2, threshold=0.01, cooldown=1, the rest as in the table) on
// SGD(lr=1.0), metrics falling in min mode, rising in max mode:
//   import torch
//   from torch.optim.lr_scheduler import ReduceLROnPlateau
//   for mode, tm, factor, min_lr, eps in [('min', 'rel', 0.5, 0.1, 1e-8), ('min', 'abs', 0.5, 0.1, 1e-8),
//                                         ('max', 'rel', 0.5, 0.1, 1e-8), ('max', 'abs', 0.5, 0.1, 1e-8),
//                                         ('min', 'abs', 0.6, 0.3, 0.1), ('min', 'abs', 0.6, 0.3, 0.05)]:
//       opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
//       s = ReduceLROnPlateau(opt, mode=mode, factor=factor, patience=2, threshold=0.01, threshold_mode=tm,
//                             cooldown=1, min_lr=min_lr, eps=eps)
//       rows = []
//       for m in (falling if mode == 'min' else rising):
//           s.step(m)
//           rows.append((opt.param_groups[0]['lr'], s.best, s.num_bad_epochs, s.cooldown_counter))
//       print(mode, tm, factor, min_lr, eps, [list(c) for c in zip(*rows)])
// The last two cases: 0.36 -> max(0.216, 0.3) is a change of 0.06, skipped under eps 0.1, made under eps 0.05.
const std::vector<double> kFalling = {1.0,  0.9,    0.95, 0.89, 0.905, 0.91, 0.8,  0.85, 0.86,
                                      0.87, 0.8001, 0.88, 0.9,  0.7,   0.71, 0.72, 0.73, 0.74};
const std::vector<double> kRising = {0.5,  0.6,  0.605, 0.61, 0.7, 0.69, 0.705, 0.71, 0.72,
                                     0.75, 0.74, 0.73,  0.76, 0.8, 0.79, 0.78,  0.77, 0.76};

struct PlateauCase {
  optim::PlateauMode mode;
  optim::ThresholdMode threshold_mode;
  double factor, min_lr, eps;
  std::vector<double> lr, best;
  std::vector<int64_t> bad, cooldown;
};
const std::vector<PlateauCase> kCases = {
    {.mode = optim::PlateauMode::Min,
     .threshold_mode = optim::ThresholdMode::Rel,
     .factor = 0.5,
     .min_lr = 0.1,
     .eps = 1e-08,
     .lr = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25},
     .best = {1.0, 0.9, 0.9, 0.89, 0.89, 0.89, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.7, 0.7, 0.7, 0.7, 0.7},
     .bad = {0, 0, 1, 0, 1, 2, 0, 1, 2, 0, 0, 1, 2, 0, 1, 2, 0, 0},
     .cooldown = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0}},
    {.mode = optim::PlateauMode::Min,
     .threshold_mode = optim::ThresholdMode::Abs,
     .factor = 0.5,
     .min_lr = 0.1,
     .eps = 1e-08,
     .lr = {1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.125, 0.125},
     .best = {1.0, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.7, 0.7, 0.7, 0.7, 0.7},
     .bad = {0, 0, 1, 2, 0, 0, 0, 1, 2, 0, 0, 1, 2, 0, 1, 2, 0, 0},
     .cooldown = {0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0}},
    {.mode = optim::PlateauMode::Max,
     .threshold_mode = optim::ThresholdMode::Rel,
     .factor = 0.5,
     .min_lr = 0.1,
     .eps = 1e-08,
     .lr = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5},
     .best = {0.5, 0.6, 0.6, 0.61, 0.7, 0.7, 0.7, 0.71, 0.72, 0.75, 0.75, 0.75, 0.76, 0.8, 0.8, 0.8, 0.8, 0.8},
     .bad = {0, 0, 1, 0, 0, 1, 2, 0, 0, 0, 1, 2, 0, 0, 1, 2, 0, 0},
     .cooldown = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}},
    {.mode = optim::PlateauMode::Max,
     .threshold_mode = optim::ThresholdMode::Abs,
     .factor = 0.5,
     .min_lr = 0.1,
     .eps = 1e-08,
     .lr = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.125, 0.125},
     .best = {0.5, 0.6, 0.6, 0.6, 0.7, 0.7, 0.7, 0.7, 0.72, 0.75, 0.75, 0.75, 0.75, 0.8, 0.8, 0.8, 0.8, 0.8},
     .bad = {0, 0, 1, 2, 0, 1, 2, 0, 0, 0, 1, 2, 0, 0, 1, 2, 0, 0},
     .cooldown = {0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0}},
    {.mode = optim::PlateauMode::Min,
     .threshold_mode = optim::ThresholdMode::Abs,
     .factor = 0.6,
     .min_lr = 0.3,
     .eps = 0.1,
     .lr = {1.0, 1.0, 1.0, 1.0, 0.6, 0.6, 0.6, 0.6, 0.6, 0.36, 0.36, 0.36, 0.36, 0.36, 0.36, 0.36, 0.36, 0.36},
     .best = {1.0, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.7, 0.7, 0.7, 0.7, 0.7},
     .bad = {0, 0, 1, 2, 0, 0, 0, 1, 2, 0, 0, 1, 2, 0, 1, 2, 0, 0},
     .cooldown = {0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0}},
    {.mode = optim::PlateauMode::Min,
     .threshold_mode = optim::ThresholdMode::Abs,
     .factor = 0.6,
     .min_lr = 0.3,
     .eps = 0.05,
     .lr = {1.0, 1.0, 1.0, 1.0, 0.6, 0.6, 0.6, 0.6, 0.6, 0.36, 0.36, 0.36, 0.36, 0.36, 0.36, 0.36, 0.3, 0.3},
     .best = {1.0, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.7, 0.7, 0.7, 0.7, 0.7},
     .bad = {0, 0, 1, 2, 0, 0, 0, 1, 2, 0, 0, 1, 2, 0, 1, 2, 0, 0},
     .cooldown = {0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0}},
};

TEST(ReduceLROnPlateau, MatchesPyTorch) {
  for (size_t c = 0; c < kCases.size(); ++c) {
    const PlateauCase& k = kCases[c];
    Tensor p = make_param({1.0}, {1});
    optim::SGD opt({p}, {.lr = 1.0});
    optim::ReduceLROnPlateau sched(opt, {.mode = k.mode,
                                         .factor = k.factor,
                                         .patience = 2,
                                         .threshold = 0.01,
                                         .threshold_mode = k.threshold_mode,
                                         .cooldown = 1,
                                         .min_lr = k.min_lr,
                                         .eps = k.eps});
    const std::vector<double>& metrics = k.mode == optim::PlateauMode::Min ? kFalling : kRising;
    for (size_t i = 0; i < metrics.size(); ++i) {
      sched.step(metrics[i]);
      EXPECT_EQ(opt.lr(), k.lr[i]) << "case " << c << ", step " << i;
      EXPECT_EQ(sched.get_last_lr(), opt.lr());
      EXPECT_EQ(sched.best(), k.best[i]) << "case " << c << ", step " << i;
      EXPECT_EQ(sched.num_bad_epochs(), k.bad[i]) << "case " << c << ", step " << i;
      EXPECT_EQ(sched.cooldown_counter(), k.cooldown[i]) << "case " << c << ", step " << i;
      EXPECT_EQ(sched.in_cooldown(), k.cooldown[i] > 0);
      EXPECT_EQ(sched.last_epoch(), static_cast<int64_t>(i + 1));
    }
  }
}

// NaN never improves (every comparison is false), as in PyTorch; the best starts at the mode's worst value.
TEST(ReduceLROnPlateau, NaNMetricCountsAsNoImprovement) {
  Tensor p = make_param({1.0}, {1});
  optim::Adam opt({p}, {.lr = 0.1});
  optim::ReduceLROnPlateau sched(opt, {.factor = 0.5, .patience = 1});
  EXPECT_EQ(sched.best(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(sched.base_lr(), 0.1);
  sched.step(2.0);
  sched.step(std::nan(""));
  EXPECT_EQ(sched.num_bad_epochs(), 1);
  sched.step(std::nan(""));
  EXPECT_EQ(opt.lr(), 0.05);
  EXPECT_EQ(sched.best(), 2.0);
  optim::ReduceLROnPlateau max_mode(opt, {.mode = optim::PlateauMode::Max});
  EXPECT_EQ(max_mode.best(), -std::numeric_limits<double>::infinity());
}

TEST(ReduceLROnPlateau, BadOptionsThrow) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD opt({p}, {.lr = 0.1});
  using O = optim::ReduceLROnPlateauOptions;
  auto make = [&](const O& o) { optim::ReduceLROnPlateau s(opt, o); };
  EXPECT_THROW_MSG(make({.factor = 1.0}), ValueError, "ReduceLROnPlateau", "factor 1");
  EXPECT_THROW_MSG(make({.factor = 2.5}), ValueError, "ReduceLROnPlateau", "factor 2.5");
  EXPECT_THROW_MSG(make({.factor = -0.1}), ValueError, "ReduceLROnPlateau", "factor -0.1");
  EXPECT_THROW_MSG(make({.factor = std::nan("")}), ValueError, "ReduceLROnPlateau", "factor");
  EXPECT_THROW_MSG(make({.patience = -1}), ValueError, "ReduceLROnPlateau", "patience -1");
  EXPECT_THROW_MSG(make({.threshold = -1e-4}), ValueError, "ReduceLROnPlateau", "threshold");
  EXPECT_THROW_MSG(make({.cooldown = -2}), ValueError, "ReduceLROnPlateau", "cooldown -2");
  EXPECT_THROW_MSG(make({.min_lr = -1}), ValueError, "ReduceLROnPlateau", "min_lr -1");
  EXPECT_THROW_MSG(make({.eps = -1}), ValueError, "ReduceLROnPlateau", "eps -1");
  EXPECT_FALSE(opt.initial_lr().has_value());  // a failed constructor leaves the optimiser alone
  make({.factor = 0});                         // factor 0 is allowed: the lr drops to min_lr
}

}  // namespace
}  // namespace ember::test
