// Tests StepLR and CosineAnnealingLR: the lr sequence (and the optimiser's lr) against the closed forms
// computed here, that the optimiser's steps use the scheduled lr, and option errors.
#include <numbers>

#include "optim_test_util.h"

namespace ember::test {
namespace {

TEST(StepLR, SequenceMatchesClosedForm) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD opt({p}, {.lr = 0.1});
  optim::StepLR sched(opt, {.step_size = 3, .gamma = 0.5});
  EXPECT_EQ(sched.get_last_lr(), 0.1);
  EXPECT_EQ(sched.last_epoch(), 0);
  for (int epoch = 1; epoch <= 10; ++epoch) {
    sched.step();
    const double want = 0.1 * std::pow(0.5, epoch / 3);
    EXPECT_DOUBLE_EQ(sched.get_last_lr(), want) << "epoch " << epoch;
    EXPECT_EQ(opt.lr(), sched.get_last_lr());
    EXPECT_EQ(sched.last_epoch(), epoch);
  }
}

TEST(CosineAnnealingLR, SequenceMatchesClosedForm) {
  Tensor p = make_param({1.0}, {1});
  optim::Adam opt({p}, {.lr = 0.01});
  optim::CosineAnnealingLR sched(opt, {.T_max = 10, .eta_min = 0.001});
  EXPECT_EQ(sched.get_last_lr(), 0.01);
  for (int epoch = 1; epoch <= 15; ++epoch) {
    sched.step();
    const double want = 0.001 + (0.01 - 0.001) * (1 + std::cos(std::numbers::pi * epoch / 10)) / 2;
    EXPECT_NEAR(sched.get_last_lr(), want, 1e-15) << "epoch " << epoch;
    EXPECT_EQ(opt.lr(), sched.get_last_lr());
  }
}

TEST(CosineAnnealingLR, ReachesEtaMinAtTMax) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD opt({p}, {.lr = 0.5});
  optim::CosineAnnealingLR sched(opt, {.T_max = 4});
  for (int i = 0; i < 4; ++i) sched.step();
  EXPECT_NEAR(opt.lr(), 0.0, 1e-15);
}

// The optimiser's step after a scheduler step uses the new lr.
TEST(StepLR, DrivesTheOptimiser) {
  Tensor p = make_param({0.0}, {1});
  optim::SGD opt({p}, {.lr = 1.0});
  optim::StepLR sched(opt, {.step_size = 1, .gamma = 0.5});
  double want = 0;
  for (int epoch = 0; epoch < 4; ++epoch) {
    feed_grad(p, {1.0});
    opt.step();
    want -= std::pow(0.5, epoch);
    sched.step();
  }
  EXPECT_TENSOR_NEAR(p, Shape({1}), (std::vector<double>{want}), 1e-15, 0);
}

TEST(LRScheduler, BadOptionsThrow) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD opt({p}, {.lr = 0.1});
  EXPECT_THROW_MSG(optim::StepLR(opt, {}), ValueError, "StepLR", "step_size");
  EXPECT_THROW_MSG(optim::StepLR(opt, {.step_size = 2, .gamma = -1}), ValueError, "StepLR", "gamma");
  EXPECT_THROW_MSG(optim::CosineAnnealingLR(opt, {.T_max = 0}), ValueError, "CosineAnnealingLR", "T_max");
  EXPECT_THROW_MSG(optim::CosineAnnealingLR(opt, {.T_max = 5, .eta_min = -1}), ValueError, "CosineAnnealingLR",
                   "eta_min");
}

}  // namespace
}  // namespace ember::test
