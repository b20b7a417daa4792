// Tests OneCycleLR: the lr and momentum sequences against PyTorch's (cos, linear, three_phase with Adam's beta1),
// the step after the last batch and the one past it, cycle_momentum's demands on the optimiser, and option errors.
#include "optim_test_util.h"

namespace ember::test {
namespace {

// From PyTorch 1.13 (Debian's python3-torch), the values at steps 0 .. total_steps - 1:
//   import torch
//   from torch.optim.lr_scheduler import OneCycleLR
//   def run(opt, **kw):
//       s, g, lr, m = OneCycleLR(opt, **kw), opt.param_groups[0], [], []
//       for _ in range(s.total_steps):
//           lr.append(g['lr']); m.append(g['momentum'] if 'momentum' in g else g['betas'][0]); opt.step(); s.step()
//       return lr, m
//   p = [torch.nn.Parameter(torch.zeros(1))]
//   print(run(torch.optim.SGD(p, lr=0.1, momentum=0.9), max_lr=0.1, total_steps=23))                  # kCos
//   print(run(torch.optim.SGD(p, lr=0.1, momentum=0.9), max_lr=0.1, total_steps=23,
//             anneal_strategy='linear'))                                                              # kLinear
//   print(run(torch.optim.Adam(p), max_lr=0.01, epochs=4, steps_per_epoch=6, pct_start=0.25, three_phase=True,
//             div_factor=10., final_div_factor=100., base_momentum=0.8, max_momentum=0.9))           # kThreePhase
// (23 steps at pct_start 0.3 put the peak at step 5.9: the phase ends are not whole steps.)
// clang-format off
const std::vector<double> kCosLr = {
    0.0040000000000000036, 0.010645404093097319, 0.028741558224032807, 0.0532777850290132, 0.07746020358974766,
    0.09459289960271544, 0.09999048141297813, 0.09885262969055061, 0.09586058163301235, 0.0911279005693094,
    0.08483421563844575, 0.0772184039568119, 0.06856952402566213, 0.05921584450169851, 0.049512384744305915,
    0.03982744003857092, 0.030528602929897595, 0.02196881123114216, 0.014472952250831105, 0.008325531679629974,
    0.0037598751630738723, 0.0009492724153898456, 4e-07};
const std::vector<double> kCosMomentum = {
    0.95, 0.9430777040696903, 0.9242275435166325, 0.8986689739281112, 0.8734789545940128, 0.8556323962471714,
    0.8500095186250963, 0.851147374898949, 0.8541394349247273, 0.8588721349192303, 0.8651658450249343,
    0.8727816871699368, 0.8814306016967446, 0.890784318635576, 0.9004878172069629, 0.9101728006526316,
    0.9194716749568022, 0.9280315008948614, 0.9355273898587283, 0.94167483501971, 0.9462405097989652,
    0.9490511237891053, 0.95};
const std::vector<double> kLinearLr = {
    0.004, 0.02027118644067797, 0.036542372881355936, 0.05281355932203391, 0.06908474576271188, 0.08535593220338984,
    0.09937888447204969, 0.09316772919254658, 0.08695657391304348, 0.08074541863354037, 0.07453426335403726,
    0.06832310807453416, 0.06211195279503106, 0.055900797515527956, 0.04968964223602484, 0.043478486956521734,
    0.03726733167701862, 0.031056176397515525, 0.024845021118012428, 0.018633865838509317, 0.012422710559006206,
    0.006211555279503109, 3.999999999976245e-07};
const std::vector<double> kLinearMomentum = {
    0.95, 0.9330508474576271, 0.9161016949152542, 0.8991525423728813, 0.8822033898305084, 0.8652542372881356,
    0.8506211180124224, 0.856832298136646, 0.8630434782608696, 0.8692546583850932, 0.8754658385093167,
    0.8816770186335403, 0.8878881987577639, 0.8940993788819875, 0.9003105590062112, 0.9065217391304348,
    0.9127329192546584, 0.918944099378882, 0.9251552795031055, 0.9313664596273291, 0.9375776397515527,
    0.9437888198757763, 0.95};
const std::vector<double> kThreePhaseLr = {
    0.0009999999999999992, 0.001859423525312735, 0.004109423525312736, 0.006890576474687262, 0.009140576474687263,
    0.01, 0.009140576474687266, 0.006890576474687264, 0.004109423525312737, 0.0018594235253127371, 0.001,
    0.0009856161996258958, 0.0009433007326983388, 0.000875512820344695, 0.0007861920496319221, 0.0006805294190860552,
    0.0005646656567263849, 0.0004453343432736152, 0.0003294705809139449, 0.00022380795036807793,
    0.0001344871796553049, 6.669926730166114e-05, 2.4383800374104253e-05, 1e-05};
const std::vector<double> kThreePhaseMomentum = {
    0.9, 0.8904508497187474, 0.8654508497187474, 0.8345491502812526, 0.8095491502812526, 0.8, 0.8095491502812526,
    0.8345491502812526, 0.8654508497187474, 0.8904508497187474, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9,
    0.9, 0.9, 0.9};
// clang-format on

// The lr and momentum the constructor and then each step() leave, for steps 0 .. n - 1.
void expect_schedule(optim::Optimizer& opt, optim::OneCycleLR& sched, const std::vector<double>& lr,
                     const std::vector<double>& momentum) {
  ASSERT_EQ(static_cast<int64_t>(lr.size()), sched.total_steps());
  for (size_t i = 0; i < lr.size(); ++i) {
    if (i > 0) sched.step();
    EXPECT_EQ(sched.last_epoch(), static_cast<int64_t>(i));
    EXPECT_DOUBLE_EQ(opt.lr(), lr[i]) << "step " << i;
    EXPECT_EQ(sched.get_last_lr(), opt.lr());
    EXPECT_DOUBLE_EQ(opt.momentum(), momentum[i]) << "step " << i;
  }
}

TEST(OneCycleLR, CosMatchesPyTorch) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  optim::OneCycleLR sched(opt, {.max_lr = 0.1, .total_steps = 23});
  EXPECT_DOUBLE_EQ(sched.base_lr(), 0.1 / 25);
  expect_schedule(opt, sched, kCosLr, kCosMomentum);
}

TEST(OneCycleLR, LinearMatchesPyTorch) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  optim::OneCycleLR sched(opt, {.max_lr = 0.1, .total_steps = 23, .anneal_strategy = optim::AnnealStrategy::Linear});
  expect_schedule(opt, sched, kLinearLr, kLinearMomentum);
}

TEST(OneCycleLR, ThreePhaseWithAdamMatchesPyTorch) {
  Tensor p = make_param({1.0}, {1});
  optim::Adam opt({p});
  optim::OneCycleLR sched(opt, {.max_lr = 0.01,
                                .epochs = 4,
                                .steps_per_epoch = 6,
                                .pct_start = 0.25,
                                .div_factor = 10,
                                .final_div_factor = 100,
                                .three_phase = true,
                                .base_momentum = 0.8,
                                .max_momentum = 0.9});
  EXPECT_EQ(sched.total_steps(), 24);
  expect_schedule(opt, sched, kThreePhaseLr, kThreePhaseMomentum);
  EXPECT_EQ(opt.options().beta1, opt.momentum());
}

// The step() after the last batch (step total_steps) leaves the end lr and momentum: PyTorch extrapolates its
// last phase there, which with Linear gives a negative lr (-0.14285257142857133 here). One more step() throws and
// changes nothing.
TEST(OneCycleLR, LastStepHoldsTheEndValuesAndOneMoreThrows) {
  for (auto strategy : {optim::AnnealStrategy::Cos, optim::AnnealStrategy::Linear}) {
    Tensor p = make_param({1.0}, {1});
    optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
    optim::OneCycleLR sched(opt, {.max_lr = 1.0, .total_steps = 10, .anneal_strategy = strategy});
    for (int i = 0; i < 10; ++i) sched.step();
    EXPECT_EQ(opt.lr(), 1.0 / 25 / 1e4);
    EXPECT_EQ(opt.momentum(), 0.95);
    EXPECT_THROW_MSG(sched.step(), ValueError, "OneCycleLR", "11 times", "total_steps = 10");
    EXPECT_EQ(sched.last_epoch(), 10);
    EXPECT_EQ(opt.lr(), 1.0 / 25 / 1e4);
  }
}

TEST(OneCycleLR, CycleMomentumNeedsAMomentum) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD plain({p}, {.lr = 0.1});
  EXPECT_THROW_MSG(optim::OneCycleLR(plain, {.max_lr = 1.0, .total_steps = 10}), ValueError, "OneCycleLR",
                   "cycle_momentum", "SGD");
  EXPECT_EQ(plain.lr(), 0.1);  // a failed constructor leaves the optimiser alone
  EXPECT_FALSE(plain.initial_lr().has_value());
  optim::OneCycleLR lr_only(plain, {.max_lr = 1.0, .total_steps = 10, .cycle_momentum = false});
  lr_only.step();
  EXPECT_GT(plain.lr(), 0.04);
  optim::SGD sgd({p}, {.lr = 0.1, .momentum = 0.9});
  optim::OneCycleLR keeps(sgd, {.max_lr = 1.0, .total_steps = 10, .cycle_momentum = false});
  keeps.step();
  EXPECT_EQ(sgd.momentum(), 0.9);
  EXPECT_EQ(sgd.state_dict().size(), 2u);  // lr and initial_lr: no momentum entry, it was never set
}

TEST(OneCycleLR, BadOptionsThrow) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  using O = optim::OneCycleLROptions;
  auto make = [&](const O& o) { optim::OneCycleLR s(opt, o); };
  EXPECT_THROW_MSG(make({.max_lr = 1.0}), ValueError, "OneCycleLR", "total_steps 0");
  EXPECT_THROW_MSG(make({.max_lr = 1.0, .total_steps = -3}), ValueError, "OneCycleLR", "total_steps -3");
  EXPECT_THROW_MSG(make({.max_lr = 1.0, .epochs = 2}), ValueError, "OneCycleLR", "steps_per_epoch 0");
  EXPECT_THROW_MSG(make({.max_lr = 1.0, .epochs = -1, .steps_per_epoch = 5}), ValueError, "OneCycleLR", "epochs -1");
  EXPECT_THROW_MSG(make({.max_lr = 1.0, .total_steps = 10, .epochs = 2, .steps_per_epoch = 5}), ValueError,
                   "OneCycleLR", "one or the other");
  EXPECT_THROW_MSG(make({.total_steps = 10}), ValueError, "OneCycleLR", "max_lr 0");
  EXPECT_THROW_MSG(make({.max_lr = -0.1, .total_steps = 10}), ValueError, "OneCycleLR", "max_lr -0.1");
  EXPECT_THROW_MSG(make({.max_lr = std::nan(""), .total_steps = 10}), ValueError, "OneCycleLR", "max_lr");
  EXPECT_THROW_MSG(make({.max_lr = 1.0, .total_steps = 10, .pct_start = -0.1}), ValueError, "OneCycleLR",
                   "pct_start -0.1");
  EXPECT_THROW_MSG(make({.max_lr = 1.0, .total_steps = 10, .pct_start = 1.5}), ValueError, "OneCycleLR",
                   "pct_start 1.5");
  EXPECT_THROW_MSG(make({.max_lr = 1.0, .total_steps = 10, .div_factor = 0}), ValueError, "OneCycleLR", "div_factor 0");
  EXPECT_THROW_MSG(make({.max_lr = 1.0, .total_steps = 10, .final_div_factor = -1}), ValueError, "OneCycleLR",
                   "final_div_factor -1");
  EXPECT_THROW_MSG(make({.max_lr = 1.0, .total_steps = 10, .max_momentum = 0}), ValueError, "OneCycleLR",
                   "max_momentum 0", "SGD");
  optim::Adam adam({p});
  EXPECT_THROW_MSG(optim::OneCycleLR(adam, {.max_lr = 1.0, .total_steps = 10, .base_momentum = 1.2}), ValueError,
                   "OneCycleLR", "base_momentum 1.2", "beta1");
  EXPECT_EQ(opt.lr(), 0.1);
  EXPECT_EQ(opt.momentum(), 0.9);
  EXPECT_EQ(adam.momentum(), 0.9);
  // pct_start's ends are accepted, as PyTorch's
  optim::OneCycleLR none_up(opt, {.max_lr = 1.0, .total_steps = 10, .pct_start = 0});
  optim::OneCycleLR all_up(opt, {.max_lr = 1.0, .total_steps = 10, .pct_start = 1});
  for (int i = 0; i < 10; ++i) all_up.step();
  EXPECT_EQ(opt.lr(), 1.0 / 25 / 1e4);
}

}  // namespace
}  // namespace ember::test
