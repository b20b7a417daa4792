// Tests StepLR and CosineAnnealingLR: the lr sequence (and the optimiser's lr) against the closed forms
// computed here, that the optimiser's steps use the scheduled lr, option errors, and that every scheduler
// follows its optimiser through moves and throws once the optimiser is gone.
#include <numbers>
#include <optional>

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

// Moving the optimiser (into a vector, through its reallocation, into another variable) takes its schedulers along.
TEST(LRScheduler, FollowsAMovedOptimiser) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD opt({p}, {.lr = 1.0, .momentum = 0.9});
  optim::StepLR step_lr(opt, {.step_size = 1, .gamma = 0.1});
  optim::ReduceLROnPlateau plateau(opt, {.factor = 0.5, .patience = 0});
  std::vector<optim::SGD> v;
  v.push_back(std::move(opt));
  step_lr.step();
  EXPECT_EQ(v[0].lr(), 0.1);
  v.reserve(v.capacity() + 8);  // reallocates: the optimiser moves again
  plateau.step(1.0);
  plateau.step(2.0);  // no improvement, patience 0: halves the lr
  EXPECT_EQ(v[0].lr(), 0.05);
  optim::SGD moved = std::move(v[0]);
  v.clear();
  step_lr.step();
  EXPECT_DOUBLE_EQ(moved.lr(), 0.01);  // StepLR's closed form at epoch 2: 1.0 * 0.1^2
  EXPECT_EQ(step_lr.get_last_lr(), moved.lr());
  optim::OneCycleLR one_cycle(moved, {.max_lr = 1.0, .total_steps = 4});
  optim::SGD moved_again(std::move(moved));
  one_cycle.step();
  EXPECT_EQ(moved_again.lr(), one_cycle.get_last_lr());
  EXPECT_NE(moved_again.momentum(), 0.9);  // cycled
}

// Once the optimiser is destroyed, stepping or loading throws (the scheduler's own getters still work).
TEST(LRScheduler, ThrowsOnceTheOptimiserIsDestroyed) {
  Tensor p = make_param({1.0}, {1});
  std::optional<optim::Adam> opt(std::in_place, std::vector<Tensor>{p}, optim::AdamOptions{.lr = 0.1});
  optim::StepLR step_lr(*opt, {.step_size = 1});
  optim::CosineAnnealingLR cosine(*opt, {.T_max = 10});
  optim::ReduceLROnPlateau plateau(*opt);
  optim::OneCycleLR one_cycle(*opt, {.max_lr = 0.1, .total_steps = 10});
  const optim::StateDict sd = step_lr.state_dict();
  opt.reset();
  EXPECT_THROW_MSG(step_lr.step(), Error, "StepLR", "optimizer (Adam) was destroyed");
  EXPECT_THROW_MSG(cosine.step(), Error, "CosineAnnealingLR", "destroyed");
  EXPECT_THROW_MSG(plateau.step(1.0), Error, "ReduceLROnPlateau", "destroyed");
  EXPECT_THROW_MSG(one_cycle.step(), Error, "OneCycleLR", "destroyed");
  EXPECT_THROW_MSG(step_lr.load_state_dict(sd), Error, "StepLR", "destroyed");
  EXPECT_EQ(step_lr.last_epoch(), 0);
  EXPECT_EQ(step_lr.get_last_lr(), 0.1);
  EXPECT_EQ(step_lr.state_dict().size(), 3u);
}

// Assigning another optimiser over one detaches the schedulers of the one assigned over; those of the other follow.
TEST(LRScheduler, MoveAssignmentDetachesTheOverwrittenOptimisersSchedulers) {
  Tensor p = make_param({1.0}, {1}), q = make_param({2.0}, {1});
  optim::SGD a({p}, {.lr = 1.0}), b({q}, {.lr = 0.2});
  optim::StepLR of_a(a, {.step_size = 1, .gamma = 0.5}), of_b(b, {.step_size = 1, .gamma = 0.5});
  a = std::move(b);
  EXPECT_THROW_MSG(of_a.step(), Error, "StepLR", "destroyed or assigned over");
  of_b.step();
  EXPECT_EQ(a.lr(), 0.1);
  EXPECT_TRUE(a.parameters()[0].is_same(q));
}

}  // namespace
}  // namespace ember::test
