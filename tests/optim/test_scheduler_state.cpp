// Tests checkpointing a schedule: the optimisers' new state entries (initial_lr, momentum) and their momentum
// accessors; the schedulers' state_dict entries; a run saved after k epochs and resumed in fresh objects repeats
// the uninterrupted run bit for bit (StepLR, ReduceLROnPlateau, OneCycleLR with a cycled momentum), whichever
// state is loaded first; a scheduler built after loading the optimiser starts from the original base lr; and
// load_state_dict's checks, which change nothing when they throw.
#include <limits>
#include <optional>
#include <string>

#include "optim_test_util.h"

namespace ember::test {
namespace {

std::vector<std::string> names_of(const optim::StateDict& sd) {
  std::vector<std::string> names;
  for (const auto& [n, t] : sd) names.push_back(n);
  return names;
}

double entry(const optim::StateDict& sd, const std::string& name) {
  for (const auto& [n, t] : sd)
    if (n == name) return t.item<double>();
  ADD_FAILURE() << "no entry " << name;
  return 0;
}

optim::StateDict replaced(optim::StateDict sd, const std::string& name, Tensor t) {
  for (auto& [n, v] : sd)
    if (n == name) v = t;
  return sd;
}
optim::StateDict without(const optim::StateDict& sd, const std::string& name) {
  optim::StateDict out;
  for (const auto& e : sd)
    if (e.first != name) out.push_back(e);
  return out;
}
optim::StateDict plus(optim::StateDict sd, const std::string& name, Tensor t) {
  sd.emplace_back(name, t);
  return sd;
}
Tensor f64(double v) { return full(Shape{}, v, {.dtype = kFloat64}); }

Tensor copy_param(const Tensor& p) {
  Tensor c = p.detach().clone();
  c.requires_grad_();
  return c;
}

// One epoch of 3 batches on p with the fixed gradients of that epoch; then the per-epoch scheduler step.
void run_epoch(optim::Optimizer& opt, Tensor& p, int epoch) {
  for (int b = 0; b < 3; ++b) {
    feed_grad(p, fixed_grad(0, 3 * epoch + b, static_cast<size_t>(p.numel())));
    opt.step();
  }
}

TEST(OptimizerMomentum, AccessorsAndChecks) {
  Tensor p = make_param({1.0, 2.0}, {2});
  optim::SGD plain({p}, {.lr = 0.1});
  EXPECT_FALSE(plain.has_momentum());
  EXPECT_THROW_MSG(plain.momentum(), ValueError, "SGD", "no momentum");
  EXPECT_THROW_MSG(plain.set_momentum(0.9), ValueError, "SGD", "no momentum");
  optim::SGD sgd({p}, {.lr = 0.1, .momentum = 0.9});
  EXPECT_TRUE(sgd.has_momentum());
  EXPECT_EQ(sgd.momentum(), 0.9);
  sgd.set_momentum(0.5);
  EXPECT_EQ(sgd.momentum(), 0.5);
  EXPECT_EQ(sgd.options().momentum, 0.5);
  EXPECT_THROW_MSG(sgd.set_momentum(0), ValueError, "SGD", "momentum", "0");
  EXPECT_THROW_MSG(sgd.set_momentum(std::nan("")), ValueError, "SGD", "momentum");
  EXPECT_EQ(sgd.momentum(), 0.5);
  optim::AdamW adamw({p}, {.lr = 0.1});
  EXPECT_TRUE(adamw.has_momentum());
  EXPECT_EQ(adamw.momentum(), 0.9);
  adamw.set_momentum(0.8);
  EXPECT_EQ(adamw.options().beta1, 0.8);
  EXPECT_THROW_MSG(adamw.set_momentum(1.0), ValueError, "AdamW", "beta1");
}

// A momentum set at run time is the one the next steps use: the same updates as an optimiser built with it.
TEST(OptimizerMomentum, SetMomentumDrivesTheSteps) {
  Tensor a = make_param({1.0, -2.0, 3.0}, {3}), b = copy_param(a), c = copy_param(a), d = copy_param(a);
  optim::SGD sa({a}, {.lr = 0.1, .momentum = 0.9}), sb({b}, {.lr = 0.1, .momentum = 0.6});
  optim::Adam aa({c}, {.lr = 0.1, .beta1 = 0.9}), ab({d}, {.lr = 0.1, .beta1 = 0.7});
  sa.set_momentum(0.6);
  aa.set_momentum(0.7);
  for (int k = 0; k < 3; ++k) {
    for (Tensor* t : {&a, &b, &c, &d}) feed_grad(*t, fixed_grad(0, k, 3));
    for (optim::Optimizer* o : std::initializer_list<optim::Optimizer*>{&sa, &sb, &aa, &ab}) o->step();
  }
  EXPECT_EQ(values(a), values(b));
  EXPECT_EQ(values(c), values(d));
}

// "param_groups.initial_lr" appears once a scheduler attached, "param_groups.momentum" once it was set; both load
// back, and a dict without them (saved before they existed) still loads.
TEST(OptimizerState, InitialLrAndMomentumEntries) {
  Tensor p = make_param({1.0, 2.0}, {2});
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  EXPECT_FALSE(opt.initial_lr().has_value());
  EXPECT_EQ(names_of(opt.state_dict()), (std::vector<std::string>{"param_groups.lr"}));
  optim::StepLR sched(opt, {.step_size = 1, .gamma = 0.5});
  EXPECT_EQ(opt.initial_lr(), 0.1);
  sched.step();
  opt.set_momentum(0.8);
  const optim::StateDict sd = opt.state_dict();
  EXPECT_EQ(names_of(sd),
            (std::vector<std::string>{"param_groups.lr", "param_groups.initial_lr", "param_groups.momentum"}));
  EXPECT_EQ(entry(sd, "param_groups.lr"), 0.05);
  EXPECT_EQ(entry(sd, "param_groups.initial_lr"), 0.1);
  EXPECT_EQ(entry(sd, "param_groups.momentum"), 0.8);

  Tensor q = copy_param(p);
  optim::SGD fresh({q}, {.lr = 1.0, .momentum = 0.9});
  fresh.load_state_dict(sd);
  EXPECT_EQ(fresh.lr(), 0.05);
  EXPECT_EQ(fresh.initial_lr(), 0.1);
  EXPECT_EQ(fresh.momentum(), 0.8);
  EXPECT_EQ(names_of(fresh.state_dict()), names_of(sd));

  optim::SGD old({copy_param(p)}, {.lr = 1.0, .momentum = 0.9});
  old.load_state_dict({{"param_groups.lr", f64(0.05)}});
  EXPECT_EQ(old.lr(), 0.05);
  EXPECT_FALSE(old.initial_lr().has_value());
  EXPECT_EQ(old.momentum(), 0.9);

  // bad entries name themselves; a failed load changes nothing
  EXPECT_THROW_MSG(fresh.load_state_dict(replaced(sd, "param_groups.initial_lr", f64(-1))), Error,
                   "'param_groups.initial_lr'", "-1");
  EXPECT_THROW_MSG(fresh.load_state_dict(replaced(sd, "param_groups.momentum", f64(0))), Error,
                   "'param_groups.momentum'", "SGD: invalid momentum 0");
  EXPECT_THROW_MSG(fresh.load_state_dict(replaced(sd, "param_groups.momentum", zeros({1}, {.dtype = kFloat64}))), Error,
                   "'param_groups.momentum'", "0-dim float64");
  EXPECT_THROW_MSG(fresh.load_state_dict(plus(sd, "param_groups.initial_lr", f64(0.1))), Error,
                   "'param_groups.initial_lr' appears twice");
  optim::SGD plain({copy_param(p)}, {.lr = 1.0});
  EXPECT_THROW_MSG(plain.load_state_dict(sd), Error, "unexpected entry 'param_groups.momentum'", "no momentum");
  EXPECT_EQ(plain.lr(), 1.0);
  EXPECT_FALSE(plain.initial_lr().has_value());
  optim::Adam adam({copy_param(p)}, {.lr = 1.0});
  EXPECT_THROW_MSG(adam.load_state_dict({{"param_groups.lr", f64(0.1)}, {"param_groups.momentum", f64(1.5)}}), Error,
                   "'param_groups.momentum'", "beta1");
  EXPECT_EQ(adam.lr(), 1.0);
  EXPECT_EQ(adam.momentum(), 0.9);
  EXPECT_EQ(fresh.lr(), 0.05);
  EXPECT_EQ(fresh.momentum(), 0.8);
}

TEST(SchedulerState, EntryNames) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  optim::StepLR step_lr(opt, {.step_size = 2});
  step_lr.step();
  const optim::StateDict sd = step_lr.state_dict();
  EXPECT_EQ(names_of(sd), (std::vector<std::string>{"last_epoch", "base_lr", "last_lr"}));
  for (const auto& [n, t] : sd) {
    EXPECT_EQ(t.dim(), 0) << n;
    EXPECT_EQ(t.dtype(), kFloat64) << n;
  }
  EXPECT_EQ(entry(sd, "last_epoch"), 1.0);
  EXPECT_EQ(entry(sd, "base_lr"), 0.1);
  EXPECT_EQ(entry(sd, "last_lr"), 0.1);
  optim::ReduceLROnPlateau plateau(opt, {.mode = optim::PlateauMode::Max});
  EXPECT_EQ(names_of(plateau.state_dict()), (std::vector<std::string>{"last_epoch", "base_lr", "last_lr", "best",
                                                                      "num_bad_epochs", "cooldown_counter"}));
  EXPECT_EQ(entry(plateau.state_dict(), "best"), -std::numeric_limits<double>::infinity());
  optim::OneCycleLR one_cycle(opt, {.max_lr = 1.0, .total_steps = 10});
  EXPECT_EQ(names_of(one_cycle.state_dict()), (std::vector<std::string>{"last_epoch", "base_lr", "last_lr"}));
  EXPECT_EQ(one_cycle.base_lr(), 1.0 / 25);
}

// Trains 7 epochs with SGD + StepLR; a run stopped after 3 epochs and resumed in fresh objects (the optimiser built
// with another lr, then both state_dicts loaded, in either order) gives the same lrs and parameters, exactly.
TEST(SchedulerState, StepLRResumeRepeatsTheUninterruptedRun) {
  const optim::SGDOptions o{.lr = 0.1, .momentum = 0.9};
  const optim::StepLROptions so{.step_size = 2, .gamma = 0.5};
  Tensor ref = make_param({0.5, -1.0, 2.0}, {3});
  optim::SGD ref_opt({ref}, o);
  optim::StepLR ref_sched(ref_opt, so);
  std::vector<double> want;
  for (int epoch = 0; epoch < 7; ++epoch) {
    run_epoch(ref_opt, ref, epoch);
    ref_sched.step();
    want.push_back(ref_opt.lr());
  }

  for (bool scheduler_first : {false, true}) {
    Tensor p = make_param({0.5, -1.0, 2.0}, {3});
    optim::SGD opt({p}, o);
    optim::StepLR sched(opt, so);
    std::vector<double> got;
    for (int epoch = 0; epoch < 3; ++epoch) {
      run_epoch(opt, p, epoch);
      sched.step();
      got.push_back(opt.lr());
    }
    const optim::StateDict opt_sd = opt.state_dict(), sched_sd = sched.state_dict();

    Tensor q = copy_param(p);
    optim::SGD opt2({q}, {.lr = 1.0, .momentum = 0.9});
    std::optional<optim::StepLR> sched2;
    if (scheduler_first) {
      sched2.emplace(opt2, so);
      sched2->load_state_dict(sched_sd);
      opt2.load_state_dict(opt_sd);
    } else {
      opt2.load_state_dict(opt_sd);
      sched2.emplace(opt2, so);
      sched2->load_state_dict(sched_sd);
    }
    EXPECT_EQ(sched2->last_epoch(), 3);
    EXPECT_EQ(sched2->base_lr(), 0.1);
    EXPECT_EQ(opt2.lr(), got.back());
    for (int epoch = 3; epoch < 7; ++epoch) {
      run_epoch(opt2, q, epoch);
      sched2->step();
      got.push_back(opt2.lr());
    }
    EXPECT_EQ(got, want) << "scheduler_first " << scheduler_first;
    EXPECT_EQ(values(q), values(ref)) << "scheduler_first " << scheduler_first;
  }
}

// Without the scheduler's state, a scheduler built after loading the optimiser starts a new schedule from the
// original lr (the optimiser's initial_lr), not from the decayed lr it loaded; a dict saved before initial_lr
// existed leaves the old behaviour: the loaded lr is the base lr.
TEST(SchedulerState, SchedulerBuiltAfterLoadingStartsFromTheOriginalLr) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD opt({p}, {.lr = 0.1});
  optim::StepLR sched(opt, {.step_size = 2, .gamma = 0.5});
  for (int epoch = 0; epoch < 5; ++epoch) sched.step();
  EXPECT_EQ(opt.lr(), 0.025);
  const optim::StateDict sd = opt.state_dict();

  optim::SGD fresh({copy_param(p)}, {.lr = 1.0});
  fresh.load_state_dict(sd);
  optim::StepLR again(fresh, {.step_size = 2, .gamma = 0.5});
  EXPECT_EQ(again.base_lr(), 0.1);
  EXPECT_EQ(again.last_epoch(), 0);
  EXPECT_EQ(again.get_last_lr(), 0.025);  // the constructor leaves the optimiser's lr as it is
  again.step();
  EXPECT_EQ(fresh.lr(), 0.1);
  again.step();
  EXPECT_EQ(fresh.lr(), 0.05);

  optim::SGD old({copy_param(p)}, {.lr = 1.0});
  old.load_state_dict(without(sd, "param_groups.initial_lr"));
  optim::StepLR from_old(old, {.step_size = 2, .gamma = 0.5});
  EXPECT_EQ(from_old.base_lr(), 0.025);
}

// ReduceLROnPlateau: its counters survive a checkpoint; the resumed run reduces the lr at the same epochs.
TEST(SchedulerState, ReduceLROnPlateauResume) {
  const std::vector<double> metrics = {1.0, 0.9, 0.95, 0.96, 0.97, 0.85, 0.9, 0.91, 0.92, 0.93, 0.8, 0.81};
  const optim::ReduceLROnPlateauOptions po{.factor = 0.5, .patience = 2, .cooldown = 2};
  Tensor ref = make_param({1.0}, {1});
  optim::Adam ref_opt({ref}, {.lr = 0.1});
  optim::ReduceLROnPlateau ref_sched(ref_opt, po);
  std::vector<double> want;
  for (double m : metrics) {
    ref_sched.step(m);
    want.push_back(ref_opt.lr());
  }
  ASSERT_LT(want.back(), 0.1);  // the sequence does reduce the lr

  Tensor p = make_param({1.0}, {1});
  optim::Adam opt({p}, {.lr = 0.1});
  optim::ReduceLROnPlateau sched(opt, po);
  std::vector<double> got;
  for (size_t i = 0; i < 5; ++i) {
    sched.step(metrics[i]);
    got.push_back(opt.lr());
  }
  const optim::StateDict opt_sd = opt.state_dict(), sched_sd = sched.state_dict();
  EXPECT_EQ(entry(sched_sd, "best"), 0.9);
  EXPECT_EQ(entry(sched_sd, "cooldown_counter"), 2.0);  // reduced at the 5th metric
  optim::Adam opt2({copy_param(p)}, {.lr = 1.0});
  optim::ReduceLROnPlateau sched2(opt2, po);
  sched2.load_state_dict(sched_sd);  // before the optimiser's: sets its lr already
  EXPECT_EQ(opt2.lr(), got.back());
  opt2.load_state_dict(opt_sd);
  EXPECT_EQ(sched2.best(), sched.best());
  EXPECT_EQ(sched2.num_bad_epochs(), sched.num_bad_epochs());
  EXPECT_EQ(sched2.cooldown_counter(), sched.cooldown_counter());
  for (size_t i = 5; i < metrics.size(); ++i) {
    sched2.step(metrics[i]);
    got.push_back(opt2.lr());
  }
  EXPECT_EQ(got, want);
}

// OneCycleLR with Adam (beta1 cycled): resumed mid-cycle, the lrs, beta1s and parameters match the uninterrupted run.
TEST(SchedulerState, OneCycleLRResumeWithCycledMomentum) {
  const optim::OneCycleLROptions co{.max_lr = 0.05, .total_steps = 15, .pct_start = 0.4};
  auto batch = [](optim::Adam& opt, optim::OneCycleLR& sched, Tensor& p, int k, std::vector<double>& log) {
    feed_grad(p, fixed_grad(1, k, 2));
    opt.step();
    sched.step();
    log.push_back(opt.lr());
    log.push_back(opt.momentum());
  };
  Tensor ref = make_param({0.3, -0.7}, {2});
  optim::Adam ref_opt({ref}, {.lr = 1.0});
  optim::OneCycleLR ref_sched(ref_opt, co);
  std::vector<double> want;
  for (int k = 0; k < 15; ++k) batch(ref_opt, ref_sched, ref, k, want);

  Tensor p = make_param({0.3, -0.7}, {2});
  optim::Adam opt({p}, {.lr = 1.0});
  optim::OneCycleLR sched(opt, co);
  std::vector<double> got;
  for (int k = 0; k < 6; ++k) batch(opt, sched, p, k, got);
  const optim::StateDict opt_sd = opt.state_dict(), sched_sd = sched.state_dict();
  EXPECT_EQ(entry(opt_sd, "param_groups.momentum"), opt.momentum());

  Tensor q = copy_param(p);
  optim::Adam opt2({q}, {.lr = 1.0});
  opt2.load_state_dict(opt_sd);
  optim::OneCycleLR sched2(opt2, co);  // sets the step-0 lr and momentum ...
  sched2.load_state_dict(sched_sd);    // ... which the scheduler's state puts back
  EXPECT_EQ(opt2.lr(), opt.lr());
  EXPECT_EQ(opt2.momentum(), opt.momentum());
  for (int k = 6; k < 15; ++k) batch(opt2, sched2, q, k, got);
  EXPECT_EQ(got, want);
  EXPECT_EQ(values(q), values(ref));
}

TEST(SchedulerState, LoadStateDictChecksEntries) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  optim::StepLR sched(opt, {.step_size = 1, .gamma = 0.5});
  sched.step();
  const optim::StateDict good = sched.state_dict();
  EXPECT_THROW_MSG(sched.load_state_dict(plus(good, "gamma", f64(0.5))), Error, "StepLR.load_state_dict",
                   "unexpected entry 'gamma'", "last_epoch, base_lr, last_lr");
  EXPECT_THROW_MSG(sched.load_state_dict(without(good, "last_lr")), Error, "StepLR.load_state_dict",
                   "'last_lr' is missing");
  EXPECT_THROW_MSG(sched.load_state_dict(plus(good, "base_lr", f64(0.1))), Error, "'base_lr' appears twice");
  EXPECT_THROW_MSG(sched.load_state_dict(replaced(good, "last_epoch", full(Shape{}, 1.0f))), Error, "'last_epoch'",
                   "float32", "0-dim float64");
  EXPECT_THROW_MSG(sched.load_state_dict(replaced(good, "base_lr", zeros({1}, {.dtype = kFloat64}))), Error,
                   "'base_lr'", "0-dim float64");
  EXPECT_THROW_MSG(sched.load_state_dict(replaced(good, "last_epoch", f64(-1))), Error, "'last_epoch'", "-1");
  EXPECT_THROW_MSG(sched.load_state_dict(replaced(good, "last_epoch", f64(1.5))), Error, "'last_epoch'", "1.5");
  EXPECT_THROW_MSG(sched.load_state_dict(replaced(good, "last_lr", f64(-0.5))), Error, "'last_lr'", "-0.5");
  EXPECT_THROW_MSG(sched.load_state_dict(replaced(good, "base_lr", f64(std::nan("")))), Error, "'base_lr'");
  EXPECT_THROW_MSG(sched.load_state_dict(replaced(good, "last_lr", Tensor())), Error, "'last_lr'", "undefined");

  optim::ReduceLROnPlateau plateau(opt);
  plateau.step(1.0);
  const optim::StateDict pg = plateau.state_dict();
  EXPECT_THROW_MSG(plateau.load_state_dict(good), Error, "ReduceLROnPlateau.load_state_dict", "'best' is missing");
  EXPECT_THROW_MSG(plateau.load_state_dict(replaced(pg, "best", f64(std::nan("")))), Error, "'best'", "NaN");
  EXPECT_THROW_MSG(plateau.load_state_dict(replaced(pg, "num_bad_epochs", f64(-1))), Error, "'num_bad_epochs'");
  EXPECT_THROW_MSG(plateau.load_state_dict(replaced(pg, "cooldown_counter", f64(0.5))), Error, "'cooldown_counter'");
  EXPECT_THROW_MSG(sched.load_state_dict(pg), Error, "StepLR.load_state_dict", "unexpected entry 'best'");

  optim::OneCycleLR one_cycle(opt, {.max_lr = 1.0, .total_steps = 10});
  EXPECT_THROW_MSG(one_cycle.load_state_dict(replaced(one_cycle.state_dict(), "last_epoch", f64(11))), Error,
                   "OneCycleLR.load_state_dict", "'last_epoch'", "11", "total_steps = 10");

  // nothing changed: neither the schedulers nor the optimiser
  EXPECT_EQ(sched.last_epoch(), 1);
  EXPECT_EQ(sched.get_last_lr(), 0.05);
  EXPECT_EQ(plateau.best(), 1.0);
  EXPECT_EQ(plateau.last_epoch(), 1);
  EXPECT_EQ(one_cycle.last_epoch(), 0);
  EXPECT_EQ(opt.lr(), one_cycle.get_last_lr());
  EXPECT_NEAR(opt.lr(), 1.0 / 25, 1e-16);  // the cosine at step 0 rounds: 0.040000000000000036, as PyTorch
  EXPECT_EQ(opt.momentum(), 0.95);
}

}  // namespace
}  // namespace ember::test
