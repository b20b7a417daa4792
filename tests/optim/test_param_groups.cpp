// Tests parameter groups (PyTorch's param_groups): AdamW and SGD with per-group lr and hyperparameters against
// PyTorch 1.13's numbers; the group accessors and the defaults a group falls back to; every scheduler's lrs for two
// groups against PyTorch's; state_dict with two groups (its format, a bit-for-bit resume) and old single-group
// dicts; and the errors (a parameter in two groups, group counts that differ on load, invalid group options).
//
// The PyTorch numbers come from Debian's python3-torch 1.13 (/usr/bin/python3), float64, with these gradients
// (fixed_grad in optim_test_util.h):
//
//   import math, torch
//   torch.set_default_dtype(torch.float64)
//   def grad(which, k, n):
//       return torch.tensor([math.sin(0.37*(i+1) + 1.3*k + 2.1*which) * (1.0 + 0.5*(i%3)) for i in range(n)])
//   def run(make, inits, steps=4):
//       ps = [torch.tensor(v, requires_grad=True) for v in inits]
//       opt = make(ps)
//       for k in range(steps):
//           for w, p in enumerate(ps): p.grad = grad(w, k, p.numel())
//           opt.step()
//           for p in ps: print([repr(x) for x in p.detach().tolist()])
#include <cmath>
#include <string>

#include "optim_test_util.h"

namespace ember::test {
namespace {

const std::vector<double> kInit0 = {0.5, -1.25, 2.0, 0.75, -0.5, 1.5};
const std::vector<double> kInit1 = {1.0, -2.0, 0.25, 3.0};
const std::vector<double> kInit2 = {-0.75, 0.5, 1.25};
using Values = std::vector<std::vector<double>>;  // per step, then per parameter

std::vector<Tensor> make_params(const Values& inits) {
  std::vector<Tensor> ps;
  for (const auto& v : inits) ps.push_back(make_param(v, {static_cast<int64_t>(v.size())}));
  return ps;
}

// Feeds fixed_grad(w, k) to parameter w at step k and checks every parameter against want[k].
void check_steps(optim::Optimizer& opt, std::vector<Tensor>& ps, const std::vector<Values>& want) {
  for (size_t k = 0; k < want.size(); ++k) {
    for (size_t w = 0; w < ps.size(); ++w)
      feed_grad(ps[w], fixed_grad(static_cast<int>(w), static_cast<int>(k), static_cast<size_t>(ps[w].numel())));
    opt.step();
    for (size_t w = 0; w < ps.size(); ++w)
      EXPECT_TENSOR_NEAR(ps[w], Shape({static_cast<int64_t>(want[k][w].size())}), want[k][w], 1e-13, 1e-13)
          << "step " << k << ", parameter " << w;
  }
}

// run(lambda ps: torch.optim.AdamW([{'params': [ps[0]], 'weight_decay': 0.1},
//                                   {'params': [ps[1]], 'lr': 0.01, 'weight_decay': 0.0, 'betas': (0.8, 0.999)}],
//                                  lr=0.03), [init0, init1])
TEST(ParamGroups, AdamWMatchesPyTorch) {
  std::vector<Tensor> ps = make_params({kInit0, kInit1});
  optim::AdamW opt({{{ps[0]}, {.weight_decay = 0.1}}, {{ps[1]}, {.lr = 0.01, .beta1 = 0.8, .weight_decay = 0}}},
                   {.lr = 0.03});
  check_steps(opt, ps,
              {{{0.4685000008296106, -1.276249999703391, 1.9640000001674671, 0.7177500003012409, -0.5284999997919431,
                 1.4655000001883085},
                {0.9900000001607113, -2.009999999775564, 0.259999999268514, 3.009999999764428}},
               {{0.4392489615877469, -1.302351012055062, 1.9286462718145068, 0.6891797052712029, -0.5468201423763225,
                 1.4522657948486508},
                {0.9908267078590133, -2.0046873210947087, 0.2682731543669906, 3.0197001804626873}},
               {{0.41362841652216653, -1.3178986700488065, 1.910669082584918, 0.6825192728973366, -0.5424399673698614,
                 1.4577590937018077},
                {0.9964690970706056, -1.9971861718156676, 0.2766861963498153, 3.027359182556933}},
               {{0.40841238064981766, -1.3143979470391383, 1.9076823264083695, 0.6861070519285674, -0.532612011044406,
                 1.4635157829988368},
                {1.0003064346552621, -1.9942327492119487, 0.2781908550596265, 3.0273586869910023}}});
}

// run(lambda ps: torch.optim.SGD([{'params': [ps[0]], 'lr': 0.05, 'nesterov': True, 'weight_decay': 0.01},
//                                 {'params': [ps[1]], 'momentum': 0.5, 'dampening': 0.2},
//                                 {'params': [ps[2]], 'lr': 0.2, 'momentum': 0.0}], lr=0.1, momentum=0.9),
//     [init0, init1, init2])
TEST(ParamGroups, SGDMatchesPyTorch) {
  std::vector<Tensor> ps = make_params({kInit0, kInit1, kInit2});
  optim::SGD opt({{{ps[0]}, {.lr = 0.05, .nesterov = true, .weight_decay = 0.01}},
                  {{ps[1]}, {.momentum = 0.5, .dampening = 0.2}},
                  {{ps[2]}, {.lr = 0.2, .momentum = 0}}},
                 {.lr = 0.1, .momentum = 0.9});
  check_steps(opt, ps,
              {{{0.4651715339633286, -1.3448985274070107, 1.827917249720791, 0.6546788197689242, -0.6365067164239803,
                 1.3472275602751436},
                {0.9377766444680695, -2.044556202696025, 0.26367080122420955, 3.0424497969483584},
                {-0.5520240389852992, 0.7922624749558428, 1.5806728712928142}},
               {{0.35534877777951535, -1.5111774471982404, 1.625888572044339, 0.5798123378827608, -0.6928989708743082,
                 1.3510121729652098},
                {0.953693534972383, -1.965961175618014, 0.42724046814485306, 3.1425535856114712},
                {-0.47171831650405627, 0.8052140405184613, 1.4522616896434983}},
               {{0.2849373700565757, -1.5717049621902985, 1.605740930737052, 0.6047243695870803, -0.606225001938505,
                 1.509392377669435},
                {1.036590838498466, -1.837051812534871, 0.5819411259115436, 3.2008456638418354},
                {-0.6267309041275897, 0.5198806227963286, 1.0528891370037017}},
               {{0.31499464638545766, -1.4965446362014212, 1.7200156570991245, 0.6651376071890958, -0.5207142337295829,
                 1.5924969807537308},
                {1.0711030356047073, -1.8255281298514436, 0.5415669836666499, 3.1555212918492486},
                {-0.7899679978315554, 0.35427634721746876, 0.9676369386211039}}});
  // the momentum-0 group keeps no state: no momentum_buffer for parameter 2
  std::vector<std::string> names;
  for (const auto& [n, t] : opt.state_dict()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"param_groups.lr", "state.0.momentum_buffer", "state.1.momentum_buffer"}));
  EXPECT_FALSE(opt.has_momentum());  // not every group has momentum
}

// The usual split: weight decay for the weights, none for the biases.
TEST(ParamGroups, DecayAndNoDecayGroups) {
  const std::vector<Tensor> decay_params = make_params({kInit0, kInit1}), no_decay_params = make_params({kInit2});
  optim::AdamW opt({{decay_params, {.weight_decay = 0.1}}, {no_decay_params, {.weight_decay = 0}}}, {.lr = 3e-4});
  EXPECT_EQ(opt.num_param_groups(), 2u);
  EXPECT_EQ(opt.group_options(0).weight_decay, 0.1);
  EXPECT_EQ(opt.group_options(1).weight_decay, 0);
  EXPECT_EQ(opt.group_lr(1), 3e-4);
  EXPECT_EQ(opt.parameters().size(), 3u);
}

TEST(ParamGroups, AccessorsAndDefaults) {
  std::vector<Tensor> ps = make_params({kInit0, kInit1, kInit2});
  optim::SGD opt({{{ps[0], ps[1]}, {}}, {{ps[2]}, {.lr = 0.5, .momentum = 0.8}}},
                 {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  EXPECT_EQ(opt.num_param_groups(), 2u);
  EXPECT_EQ(opt.group_lr(0), 0.1);
  EXPECT_EQ(opt.group_lr(1), 0.5);
  EXPECT_EQ(opt.lr(), 0.1);
  EXPECT_EQ(opt.group_options(0).momentum, 0.9);
  EXPECT_EQ(opt.group_options(1).momentum, 0.8);
  EXPECT_EQ(opt.group_options(1).weight_decay, 0.01);  // from the defaults
  EXPECT_EQ(opt.group_momentum(1), 0.8);
  EXPECT_EQ(opt.parameters().size(), 3u);
  EXPECT_EQ(opt.group_parameters(0).size(), 2u);
  EXPECT_TRUE(opt.group_parameters(1)[0].is_same(ps[2]));
  opt.set_group_lr(1, 0.25);
  EXPECT_EQ(opt.group_lr(1), 0.25);
  EXPECT_EQ(opt.lr(), 0.1);
  opt.set_lr(0.05);  // every group
  EXPECT_EQ(opt.group_lr(0), 0.05);
  EXPECT_EQ(opt.group_lr(1), 0.05);
  opt.set_momentum(0.7);
  EXPECT_EQ(opt.group_momentum(0), 0.7);
  EXPECT_EQ(opt.group_momentum(1), 0.7);
  EXPECT_THROW_MSG(opt.group_lr(2), IndexError, "SGD", "param group 2", "2 param groups");
  EXPECT_THROW_MSG(opt.set_group_lr(1, -1), ValueError, "SGD", "lr = -1", "param group 1");

  // a group's lr is used by its parameters only
  Tensor a = make_param({1.0}, {1}), b = make_param({1.0}, {1});
  optim::SGD plain({{{a}, {}}, {{b}, {.lr = 0.5}}}, {.lr = 0.1});
  feed_grad(a, {1.0});
  feed_grad(b, {1.0});
  plain.step();
  EXPECT_TENSOR_NEAR(a, Shape({1}), (std::vector<double>{0.9}), 0, 0);
  EXPECT_TENSOR_NEAR(b, Shape({1}), (std::vector<double>{0.5}), 0, 0);

  // an empty group is allowed, as in PyTorch
  optim::Adam with_empty({{{a}, {}}, {{}, {.lr = 0.5}}});
  EXPECT_EQ(with_empty.num_param_groups(), 2u);
  EXPECT_TRUE(with_empty.group_parameters(1).empty());
  feed_grad(a, {1.0});
  with_empty.step();
}

// The lrs of two groups (SGD, lr 0.1 and 0.02, momentum 0.9) from construction on, one scheduler step between
// entries, from:
//   def opt():
//       a = torch.zeros(2, requires_grad=True); b = torch.zeros(3, requires_grad=True)
//       return torch.optim.SGD([{'params': [a]}, {'params': [b], 'lr': 0.02}], lr=0.1, momentum=0.9)
//   o = opt(); s = <scheduler>(o, ...); lrs = [[g['lr'] for g in o.param_groups]]
//   for k in range(n): o.step(); s.step(); lrs.append([g['lr'] for g in o.param_groups])
struct TwoGroups {
  Tensor a = make_param({0.0, 0.0}, {2}), b = make_param({0.0, 0.0, 0.0}, {3});
  optim::SGD opt{{{{a}, {}}, {{b}, {.lr = 0.02}}}, {.lr = 0.1, .momentum = 0.9}};
};

template <class Step>
void check_lrs(optim::LRScheduler& sched, optim::Optimizer& opt, Step step, const std::vector<double>& want0,
               const std::vector<double>& want1, double tol) {
  for (size_t k = 0; k < want0.size(); ++k) {
    if (k > 0) step(k - 1);
    ASSERT_EQ(sched.get_last_lrs().size(), 2u);
    EXPECT_NEAR(sched.get_last_lrs()[0], want0[k], tol) << "step " << k;
    EXPECT_NEAR(sched.get_last_lrs()[1], want1[k], tol) << "step " << k;
    EXPECT_EQ(sched.get_last_lr(), sched.get_last_lrs()[0]);
    EXPECT_EQ(opt.group_lr(0), sched.get_last_lrs()[0]);
    EXPECT_EQ(opt.group_lr(1), sched.get_last_lrs()[1]);
  }
}

// StepLR(o, step_size=2, gamma=0.5)
TEST(ParamGroups, StepLRMatchesPyTorch) {
  TwoGroups t;
  optim::StepLR sched(t.opt, {.step_size = 2, .gamma = 0.5});
  EXPECT_EQ(sched.base_lrs(), (std::vector<double>{0.1, 0.02}));
  EXPECT_EQ(t.opt.group_initial_lr(1), 0.02);  // PyTorch's initial_lr, per group
  check_lrs(
      sched, t.opt, [&](size_t) { sched.step(); }, {0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.0125},
      {0.02, 0.02, 0.01, 0.01, 0.005, 0.005, 0.0025}, 0);
}

// CosineAnnealingLR(o, T_max=5, eta_min=0.001)
TEST(ParamGroups, CosineAnnealingLRMatchesPyTorch) {
  TwoGroups t;
  optim::CosineAnnealingLR sched(t.opt, {.T_max = 5, .eta_min = 0.001});
  check_lrs(
      sched, t.opt, [&](size_t) { sched.step(); },
      {0.1, 0.0905463412215599, 0.06579634122155989, 0.035203658778440096, 0.010453658778440105, 0.001,
       0.010453658778440102, 0.03520365877844012},
      {0.02, 0.018185661446562, 0.013435661446562, 0.007564338553437999, 0.002814338553438, 0.001, 0.002814338553437999,
       0.007564338553438001},
      1e-16);
}

// LambdaLR(o, lambda e: 1.0 / (e + 1))
TEST(ParamGroups, LambdaLRMatchesPyTorch) {
  TwoGroups t;
  optim::LambdaLR sched(t.opt, [](int64_t e) { return 1.0 / static_cast<double>(e + 1); });
  check_lrs(
      sched, t.opt, [&](size_t) { sched.step(); },
      {0.1, 0.05, 0.03333333333333333, 0.025, 0.020000000000000004, 0.016666666666666666},
      {0.02, 0.01, 0.006666666666666666, 0.005, 0.004, 0.003333333333333333}, 0);
}

// ReduceLROnPlateau(o, factor=0.5, patience=1, min_lr=0.015), metrics below: group 1 stops at min_lr first
TEST(ParamGroups, ReduceLROnPlateauMatchesPyTorch) {
  TwoGroups t;
  optim::ReduceLROnPlateau sched(t.opt, {.factor = 0.5, .patience = 1, .min_lr = 0.015});
  const std::vector<double> metrics = {1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85};
  check_lrs(
      sched, t.opt, [&](size_t k) { sched.step(metrics[k]); },
      {0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.025, 0.025, 0.015},
      {0.02, 0.02, 0.02, 0.02, 0.015, 0.015, 0.015, 0.015, 0.015, 0.015, 0.015}, 0);
}

// OneCycleLR(o, max_lr=0.1, total_steps=10): every group gets the same lr and momentum
TEST(ParamGroups, OneCycleLRMatchesPyTorch) {
  TwoGroups t;
  optim::OneCycleLR sched(t.opt, {.max_lr = 0.1, .total_steps = 10});
  const std::vector<double> lrs = {0.0040000000000000036,
                                   0.052000000000000005,
                                   0.1,
                                   0.09504846320134738,
                                   0.0811745653949763,
                                   0.06112620219362893,
                                   0.03887419780637107,
                                   0.0188258346050237,
                                   0.004951936798652629,
                                   4e-07};
  const std::vector<double> momenta = {0.95,
                                       0.8999999999999999,
                                       0.85,
                                       0.854951556604879,
                                       0.8688255099070633,
                                       0.8888739533021842,
                                       0.9111260466978157,
                                       0.9311744900929366,
                                       0.945048443395121,
                                       0.95};
  check_lrs(
      sched, t.opt,
      [&](size_t k) {
        EXPECT_EQ(t.opt.group_momentum(0), momenta[k]) << "step " << k;
        EXPECT_EQ(t.opt.group_momentum(1), momenta[k]) << "step " << k;
        sched.step();
      },
      lrs, lrs, 0);
}

optim::StateDict replaced(optim::StateDict sd, const std::string& name, Tensor t) {
  for (auto& [n, v] : sd)
    if (n == name) v = t;
  return sd;
}
Tensor f64(double v) { return full(Shape{}, v, {.dtype = kFloat64}); }
Tensor f64s(const std::vector<double>& v) {
  return tensor(v, Shape{static_cast<int64_t>(v.size())}, {.dtype = kFloat64});
}
const Tensor& entry(const optim::StateDict& sd, const std::string& name) {
  for (const auto& [n, t] : sd)
    if (n == name) return t;
  throw std::runtime_error("no entry " + name);
}

// Trains `k` steps from step `from` with the fixed gradients, stepping the scheduler after each.
template <class Sched>
void train(optim::Optimizer& opt, Sched& sched, std::vector<Tensor>& ps, int from, int k) {
  for (int s = from; s < from + k; ++s) {
    for (size_t w = 0; w < ps.size(); ++w)
      feed_grad(ps[w], fixed_grad(static_cast<int>(w), s, static_cast<size_t>(ps[w].numel())));
    opt.step();
    sched.step();
  }
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Saved after 3 steps and resumed in fresh objects, two groups repeat the uninterrupted run bit for bit.
TEST(ParamGroups, StateDictRoundTripResumesExactly) {
  auto make_adamw = [](std::vector<Tensor> ps) {
    return optim::AdamW({{{ps[0]}, {.weight_decay = 0.1}}, {{ps[1]}, {.lr = 0.01, .weight_decay = 0}}}, {.lr = 0.03});
  };
  std::vector<Tensor> a = make_params({kInit0, kInit1});
  optim::AdamW opt_a = make_adamw(a);
  optim::StepLR sched_a(opt_a, {.step_size = 2, .gamma = 0.5});
  train(opt_a, sched_a, a, 0, 3);
  const optim::StateDict opt_sd = opt_a.state_dict(), sched_sd = sched_a.state_dict();
  std::vector<Tensor> b = make_params({values(a[0]), values(a[1])});
  train(opt_a, sched_a, a, 3, 3);

  // the format: per-group entries 1-D [2], state numbered over both groups
  EXPECT_EQ(entry(opt_sd, "param_groups.lr").shape(), Shape({2}));
  EXPECT_EQ(values(entry(opt_sd, "param_groups.lr")), (std::vector<double>{0.015, 0.005}));
  EXPECT_EQ(values(entry(opt_sd, "param_groups.initial_lr")), (std::vector<double>{0.03, 0.01}));
  EXPECT_EQ(entry(opt_sd, "state.1.exp_avg").shape(), Shape({4}));
  EXPECT_EQ(values(entry(sched_sd, "base_lr")), (std::vector<double>{0.03, 0.01}));
  EXPECT_EQ(values(entry(sched_sd, "last_lr")), (std::vector<double>{0.015, 0.005}));
  EXPECT_EQ(entry(sched_sd, "last_epoch").dim(), 0);

  optim::AdamW opt_b = make_adamw(b);
  optim::StepLR sched_b(opt_b, {.step_size = 2, .gamma = 0.5});
  sched_b.load_state_dict(sched_sd);
  opt_b.load_state_dict(opt_sd);
  EXPECT_EQ(opt_b.group_lr(1), 0.005);
  train(opt_b, sched_b, b, 3, 3);
  for (size_t w = 0; w < 2; ++w) EXPECT_EQ(values(b[w]), values(a[w])) << "parameter " << w;
  EXPECT_EQ(sched_b.get_last_lrs(), sched_a.get_last_lrs());

  // SGD with its momentum cycled by OneCycleLR: the momentum is saved per group too
  auto make_sgd = [](std::vector<Tensor> ps) {
    return optim::SGD({{{ps[0]}, {.nesterov = true}}, {{ps[1]}, {.momentum = 0.5}}}, {.lr = 0.1, .momentum = 0.9});
  };
  std::vector<Tensor> c = make_params({kInit0, kInit1});
  optim::SGD opt_c = make_sgd(c);
  optim::OneCycleLR sched_c(opt_c, {.max_lr = 0.2, .total_steps = 8});
  train(opt_c, sched_c, c, 0, 3);
  const optim::StateDict sgd_sd = opt_c.state_dict(), cycle_sd = sched_c.state_dict();
  EXPECT_EQ(entry(sgd_sd, "param_groups.momentum").shape(), Shape({2}));
  std::vector<Tensor> d = make_params({values(c[0]), values(c[1])});
  train(opt_c, sched_c, c, 3, 5);
  optim::SGD opt_d = make_sgd(d);
  optim::OneCycleLR sched_d(opt_d, {.max_lr = 0.2, .total_steps = 8});
  opt_d.load_state_dict(sgd_sd);
  sched_d.load_state_dict(cycle_sd);
  train(opt_d, sched_d, d, 3, 5);
  for (size_t w = 0; w < 2; ++w) EXPECT_EQ(values(d[w]), values(c[w])) << "parameter " << w;
  EXPECT_EQ(opt_d.group_momentum(1), opt_c.group_momentum(1));
}

// Dicts from before groups (0-dim entries) load into single-group optimisers and schedulers, built either way.
TEST(ParamGroups, OldSingleGroupDictLoads) {
  Tensor p = make_param({1.0, 2.0}, {2});
  const optim::StateDict old_opt = {{"param_groups.lr", f64(0.05)},
                                    {"param_groups.initial_lr", f64(0.1)},
                                    {"state.0.step", f64(3)},
                                    {"state.0.exp_avg", tensor<double>({0.1, 0.2}, {2})},
                                    {"state.0.exp_avg_sq", tensor<double>({0.01, 0.02}, {2})}};
  const optim::StateDict old_sched = {{"last_epoch", f64(2)}, {"base_lr", f64(0.1)}, {"last_lr", f64(0.05)}};
  optim::Adam from_list({p}, {.lr = 1.0});
  from_list.load_state_dict(old_opt);
  EXPECT_EQ(from_list.lr(), 0.05);
  EXPECT_EQ(from_list.initial_lr(), 0.1);
  optim::Adam one_group({{{p}, {.beta1 = 0.8}}}, {.lr = 1.0});
  one_group.load_state_dict(old_opt);
  EXPECT_EQ(one_group.group_lr(0), 0.05);
  optim::StepLR sched(one_group, {.step_size = 2, .gamma = 0.5});
  sched.load_state_dict(old_sched);
  EXPECT_EQ(sched.get_last_lrs(), (std::vector<double>{0.05}));
  sched.step();  // epoch 3
  EXPECT_EQ(one_group.lr(), 0.05);
  // and a single group still saves the old format
  const optim::StateDict sd = one_group.state_dict();
  EXPECT_EQ(entry(sd, "param_groups.lr").dim(), 0);
  EXPECT_EQ(entry(sched.state_dict(), "base_lr").dim(), 0);
}

TEST(ParamGroups, Errors) {
  std::vector<Tensor> ps = make_params({kInit0, kInit1, kInit2});
  // a parameter in two groups (PyTorch raises too), or twice in one
  EXPECT_THROW_MSG(optim::SGD({{{ps[0], ps[1]}, {}}, {{ps[2], ps[1]}, {}}}), ValueError, "SGD", "parameter 3",
                   "param group 1", "also in param group 0");
  EXPECT_THROW_MSG(optim::AdamW({{{ps[0]}, {}}, {{ps[1], ps[1]}, {}}}), ValueError, "AdamW", "parameter 2",
                   "param group 1", "more than once");
  EXPECT_THROW_MSG(optim::Adam(std::vector<optim::Adam::ParamGroup>{}), ValueError, "Adam",
                   "empty list of parameter groups");
  // invalid group options name the group; invalid defaults are errors too, as in PyTorch
  EXPECT_THROW_MSG(optim::AdamW({{{ps[0]}, {}}, {{ps[1]}, {.weight_decay = -1}}}), ValueError, "AdamW", "param group 1",
                   "weight_decay -1");
  EXPECT_THROW_MSG(optim::Adam({{{ps[0]}, {.beta2 = 1.0}}}), ValueError, "Adam", "param group 0", "beta2 1");
  EXPECT_THROW_MSG(optim::SGD({{{ps[0]}, {}}, {{ps[1]}, {.lr = -0.5}}}), ValueError, "SGD", "param group 1",
                   "lr = -0.5");
  EXPECT_THROW_MSG(optim::SGD({{{ps[0]}, {.lr = 0.1}}}, {.momentum = -1}), ValueError, "SGD", "momentum -1");
  EXPECT_THROW_MSG(optim::SGD({{{ps[0]}, {}}, {{ps[1]}, {.momentum = 0}}}, {.momentum = 0.9, .nesterov = true}),
                   ValueError, "SGD", "param group 1", "nesterov");

  // OneCycleLR needs momentum in every group of an SGD
  optim::SGD mixed({{{ps[0]}, {}}, {{ps[1]}, {.momentum = 0}}}, {.lr = 0.1, .momentum = 0.9});
  EXPECT_THROW_MSG(optim::OneCycleLR(mixed, {.max_lr = 0.1, .total_steps = 10}), ValueError, "OneCycleLR",
                   "every param group");
  EXPECT_THROW_MSG(mixed.set_momentum(0.5), ValueError, "SGD", "no momentum");
  feed_grad(ps[1], fixed_grad(1, 0, 4));
  mixed.step();
  // no momentum_buffer for a parameter of a momentum-0 group
  EXPECT_THROW_MSG(mixed.load_state_dict({{"param_groups.lr", f64s({0.1, 0.1})},
                                          {"state.1.momentum_buffer", zeros({4}, {.dtype = kFloat64})}}),
                   Error, "unexpected entry 'state.1.momentum_buffer'", "param group 1", "no momentum_buffer");

  // group counts that differ on load name both; nothing changes on a throw
  optim::SGD two({{{ps[0]}, {}}, {{ps[1]}, {.lr = 0.02}}}, {.lr = 0.1, .momentum = 0.9});
  optim::SGD three({{{ps[0]}, {}}, {{ps[1]}, {}}, {{ps[2]}, {}}}, {.lr = 0.1});
  optim::SGD one({ps[0]}, {.lr = 0.1});
  EXPECT_THROW_MSG(three.load_state_dict(two.state_dict()), Error, "SGD.load_state_dict", "'param_groups.lr'",
                   "2 param groups", "this SGD has 3 param groups");
  EXPECT_THROW_MSG(two.load_state_dict(one.state_dict()), Error, "'param_groups.lr'", "1 param group",
                   "this SGD has 2 param groups");
  EXPECT_THROW_MSG(one.load_state_dict(two.state_dict()), Error, "'param_groups.lr'", "2 param groups",
                   "this SGD has 1 param group");
  EXPECT_THROW_MSG(two.load_state_dict({{"param_groups.lr", zeros({2, 1}, {.dtype = kFloat64})}}), Error,
                   "'param_groups.lr'", "1-D float64");
  EXPECT_THROW_MSG(two.load_state_dict({{"param_groups.lr", f64s({0.1, -1})}}), Error, "'param_groups.lr'",
                   "invalid lr -1", "param group 1");
  EXPECT_EQ(three.group_lr(2), 0.1);
  EXPECT_EQ(two.group_lr(1), 0.02);

  optim::StepLR two_sched(two, {.step_size = 1});
  optim::StepLR three_sched(three, {.step_size = 1});
  EXPECT_THROW_MSG(three_sched.load_state_dict(two_sched.state_dict()), Error, "StepLR.load_state_dict", "'base_lr'",
                   "2 param groups", "optimizer (SGD) has 3 param groups");
  EXPECT_THROW_MSG(two_sched.load_state_dict(replaced(two_sched.state_dict(), "last_lr", f64s({0.1, std::nan("")}))),
                   Error, "'last_lr'", "param group 1");
  EXPECT_EQ(three_sched.get_last_lrs(), (std::vector<double>{0.1, 0.1, 0.1}));
}

}  // namespace
}  // namespace ember::test
