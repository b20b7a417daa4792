// Exact resume: a run with Dropout, a shuffling DataLoader (2 workers, random augmentation in get()), Adam and a
// StepLR, stopped mid-epoch and resumed from save_checkpoint({...}) in fresh objects, gives the same next losses,
// bit for bit, as the run that was never stopped. And load_checkpoint is all-or-nothing.
#include <gtest/gtest.h>

#include "test_util.h"

using namespace ember;

namespace {

// 96 samples of 6 features, 3 classes; get() adds noise with randn (drawn per sample by the loader).
struct Noisy {
  Tensor x, y;
  Noisy() {
    Generator g(2024);
    x = randn({96, 6}, {.generator = &g});
    y = randint(0, 3, {96}, {.dtype = kInt64, .generator = &g});
  }
  int64_t size() const { return 96; }
  data::Example get(int64_t i) const { return {x.select(0, i) + randn({6}) * 0.05, y.select(0, i)}; }
};

// A DataLoader state entry's value, and a state as load_state_dict takes it.
int64_t entry(const std::vector<std::pair<std::string, Tensor>>& sd, const std::string& n) {
  for (const auto& [k, t] : sd)
    if (k == n) return t.to_vector<int64_t>()[0];
  return -1;
}
std::vector<std::pair<std::string, Tensor>> loader_state(int64_t epoch, int64_t batches, int64_t seed, int64_t bs) {
  return {{"epoch", tensor<int64_t>({epoch}, Shape{})},
          {"batches", tensor<int64_t>({batches}, Shape{})},
          {"seed", tensor<int64_t>({seed}, Shape{})},
          {"batch_size", tensor<int64_t>({bs}, Shape{})}};
}

struct Trainer {
  nn::Chain model{nn::Dense(6, 32, nn::relu), nn::Dropout(0.3), nn::Dense(32, 3)};
  optim::Adam opt{model.parameters(), {.lr = 3e-3}};
  optim::StepLR sched{opt, {.step_size = 1, .gamma = 0.7}};
  data::DataLoader<Noisy> loader{Noisy{}, {.batch_size = 16, .shuffle = true, .num_workers = 2, .seed = 5}};
};

// Trains until `total` steps have been done (counting from `step`), calling at_step(step) after each; returns the
// losses. The scheduler steps at the end of each epoch.
std::vector<double> train(Trainer& r, int64_t step, int64_t total, const std::function<bool(int64_t)>& stop_after) {
  std::vector<double> losses;
  while (step < total) {
    for (auto [x, y] : r.loader) {
      Tensor loss = nn::cross_entropy(r.model(x), y);
      r.opt.zero_grad();
      loss.backward();
      r.opt.step();
      losses.push_back(loss.item());
      ++step;
      if (step == total || stop_after(step)) return losses;
    }
    r.sched.step();
  }
  return losses;
}

TEST(ResumeExact, SameNextLossesBitForBitAsTheUninterruptedRun) {
  const std::string path = (test::tmpdir("resume_exact") / "ckpt.safetensors").string();
  const int64_t stop = 11, total = stop + 100;  // 6 batches per epoch: stop mid-epoch 2, then 100 more steps

  manual_seed(1);
  Trainer a;
  const std::vector<double> ref = train(a, 0, total, [](int64_t) { return false; });
  ASSERT_EQ(ref.size(), static_cast<size_t>(total));

  manual_seed(1);
  std::vector<double> got;
  {
    Trainer b;
    got = train(b, 0, total, [&](int64_t s) { return s == stop; });
    nn::save_checkpoint(path, {.model = &b.model,
                               .optimizer = &b.opt,
                               .scheduler = &b.sched,
                               .loader = &b.loader,
                               .step = stop,
                               .metadata = {{"note", "mid-epoch"}}});
  }
  manual_seed(999);  // a new process: other initial weights, another generator position
  (void)randn({123});
  Trainer c;
  nn::LoadedCheckpoint info =
      nn::load_checkpoint(path, {.model = &c.model, .optimizer = &c.opt, .scheduler = &c.sched, .loader = &c.loader});
  EXPECT_EQ(info.step, stop);
  EXPECT_EQ(info.metadata.at("note"), "mid-epoch");
  std::vector<double> rest = train(c, info.step, total, [](int64_t) { return false; });
  got.insert(got.end(), rest.begin(), rest.end());
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_EQ(got[i], ref[i]) << "step " << i + 1;
  EXPECT_DOUBLE_EQ(c.opt.lr(), a.opt.lr());
}

// Without the scheduler, loader and generator state the continuation differs: the test above is not vacuous.
TEST(ResumeExact, ModelAndOptimizerAloneAreNotEnough) {
  const std::string path = (test::tmpdir("resume_partial") / "ckpt.safetensors").string();
  manual_seed(1);
  Trainer a;
  const std::vector<double> ref = train(a, 0, 20, [](int64_t) { return false; });
  manual_seed(1);
  std::vector<double> got;
  {
    Trainer b;
    got = train(b, 0, 20, [](int64_t s) { return s == 9; });
    nn::save_checkpoint(path, {.model = &b.model, .optimizer = &b.opt, .step = 9, .rng = false});
  }
  Trainer c;
  nn::LoadedCheckpoint info = nn::load_checkpoint(path, {.model = &c.model, .optimizer = &c.opt, .rng = false});
  std::vector<double> rest = train(c, info.step, 20, [](int64_t) { return false; });
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_NE(got, ref);
}

TEST(ResumeExact, LoadIsAllOrNothing) {
  const std::string path = (test::tmpdir("resume_atomic") / "ckpt.safetensors").string();
  manual_seed(1);
  Trainer a;
  (void)train(a, 0, 8, [](int64_t) { return false; });
  nn::save_checkpoint(path, {.model = &a.model, .optimizer = &a.opt, .scheduler = &a.sched, .loader = &a.loader});

  // The target's loader has another batch size: its part fails after the model, optimiser and scheduler loaded.
  manual_seed(2);
  Trainer b;
  data::DataLoader<Noisy> other(Noisy{}, {.batch_size = 8, .shuffle = true, .seed = 5});
  (void)train(b, 0, 3, [](int64_t) { return false; });
  const std::vector<double> w_before = test::values(b.model.parameters()[0]);
  const optim::StateDict opt_before = b.opt.state_dict();
  const double lr_before = b.opt.lr();
  const int64_t sched_before = b.sched.last_epoch();
  const PhiloxState rng_before = get_rng_state();
  EXPECT_THROW_MSG(
      nn::load_checkpoint(path, {.model = &b.model, .optimizer = &b.opt, .scheduler = &b.sched, .loader = &other}),
      IOError, "loader", "batch_size");
  EXPECT_EQ(test::values(b.model.parameters()[0]), w_before);
  EXPECT_EQ(b.opt.lr(), lr_before);
  EXPECT_EQ(b.sched.last_epoch(), sched_before);
  EXPECT_EQ(get_rng_state(), rng_before);
  const optim::StateDict opt_after = b.opt.state_dict();
  ASSERT_EQ(opt_after.size(), opt_before.size());
  for (size_t i = 0; i < opt_after.size(); ++i) {
    EXPECT_EQ(opt_after[i].first, opt_before[i].first);
    EXPECT_EQ(test::values(opt_after[i].second), test::values(opt_before[i].second)) << opt_after[i].first;
  }

  // A part the file does not have, and a model that does not fit: errors naming them, nothing changed.
  nn::save_checkpoint(path, {.model = &a.model, .step = 3});
  EXPECT_THROW_MSG(nn::load_checkpoint(path, {.model = &b.model, .optimizer = &b.opt}), IOError, "no optimizer state");
  nn::Chain wrong{nn::Dense(6, 8), nn::Dense(8, 3)};
  const std::vector<double> wrong_before = test::values(wrong.parameters()[0]);
  EXPECT_THROW_MSG(nn::load_checkpoint(path, {.model = &wrong, .rng = false}), IOError, "shape");
  EXPECT_EQ(test::values(wrong.parameters()[0]), wrong_before);
}

TEST(ResumeExact, LoaderStateBetweenEpochsAndBadStates) {
  data::DataLoader<Noisy> l(Noisy{}, {.batch_size = 16, .shuffle = true, .seed = 3});
  EXPECT_EQ(entry(l.state_dict(), "epoch"), 0);
  int n = 0;
  for (auto [x, y] : l) {
    if (++n == 2) {
      EXPECT_EQ(entry(l.state_dict(), "epoch"), 0);
      EXPECT_EQ(entry(l.state_dict(), "batches"), 2);
    }
  }
  EXPECT_EQ(entry(l.state_dict(), "epoch"), 1);  // a finished epoch: the next one, from its start
  EXPECT_EQ(entry(l.state_dict(), "batches"), 0);

  // Resuming at batch 2 of epoch 0 yields batches 2.. of that epoch, with the saved seed's noise. (shuffle is an
  // option of the loader, not part of its state: both loaders here read in order.)
  data::DataLoader<Noisy> ref(Noisy{}, {.batch_size = 16, .seed = 3});
  std::vector<std::vector<double>> all;
  for (auto [x, y] : ref) all.push_back(test::values(x));
  data::DataLoader<Noisy> res(Noisy{}, {.batch_size = 16, .seed = 0});
  res.load_state_dict(loader_state(0, 2, 3, 16));
  std::vector<std::vector<double>> rest;
  for (auto [x, y] : res) rest.push_back(test::values(x));
  EXPECT_EQ(rest, std::vector<std::vector<double>>(all.begin() + 2, all.end()));
  EXPECT_EQ(res.epoch(), 1u);
  EXPECT_THROW_MSG(l.load_state_dict({{"epoch", tensor<int64_t>({0}, Shape{})}}), ValueError, "no \"batches\"");
  EXPECT_THROW_MSG(l.load_state_dict(loader_state(0, 0, 0, 4)), ValueError, "batch_size 4", "batch_size 16");
  EXPECT_THROW_MSG(l.load_state_dict({{"epoch", full(Shape{}, 0.5)}}), ValueError, "integer");
}

}  // namespace

namespace {

TEST(ResumeExact, LoadedLoaderStateReadsBackAndSetEpochDropsIt) {
  data::DataLoader<Noisy> l(Noisy{}, {.batch_size = 16, .seed = 3});
  for (auto [x, y] : l) (void)x;  // an epoch done
  l.load_state_dict(loader_state(2, 5, 3, 16));
  EXPECT_EQ(entry(l.state_dict(), "epoch"), 2);  // before the next begin(): the loaded position
  EXPECT_EQ(entry(l.state_dict(), "batches"), 5);
  l.set_epoch(3);  // another epoch: the loaded position does not apply to it
  EXPECT_EQ(entry(l.state_dict(), "epoch"), 3);
  EXPECT_EQ(entry(l.state_dict(), "batches"), 0);
  int n = 0;
  for (auto [x, y] : l) ++n;
  EXPECT_EQ(n, 6);  // all of epoch 3
}

// A batch whose get() throws counts as handed out: a loop that catches and goes on resumes after it.
struct Failing {
  int64_t size() const { return 8; }
  data::Example get(int64_t i) const {
    EMBER_CHECK_VALUE(i != 2, "sample 2 is broken");
    return {full({1}, static_cast<double>(i)), full(Shape{}, 0.0).to(kInt64)};
  }
};
TEST(ResumeExact, AFailedBatchCountsAsDelivered) {
  data::DataLoader<Failing> l(Failing{}, {.batch_size = 2});
  auto it = l.begin();             // batch 0
  EXPECT_THROW(++it, ValueError);  // batch 1 holds sample 2
  EXPECT_EQ(entry(l.state_dict(), "batches"), 2);
  ++it;  // batch 2 goes on
  EXPECT_EQ(entry(l.state_dict(), "batches"), 3);
}

// An extra part that changes itself and then throws is put back, with everything before it.
struct HalfLoads {
  double value = 1.0;
  nn::NamedTensors state_dict() const { return {{"v", full(Shape{}, value, {.dtype = kFloat64})}}; }
  void load_state_dict(const nn::NamedTensors& sd) {
    value = sd.at(0).second.item();
    EMBER_CHECK_VALUE(value < 100, "HalfLoads: value ", value, " too large");
  }
};
TEST(ResumeExact, AFailingPartIsPutBackWithThePartsBeforeIt) {
  const std::string path = (test::tmpdir("resume_extra") / "ckpt.safetensors").string();
  manual_seed(4);
  Trainer a;
  (void)train(a, 0, 4, [](int64_t) { return false; });
  HalfLoads big{500.0};
  nn::save_checkpoint(path, {.model = &a.model, .optimizer = &a.opt, .extra = {{"half", &big}}});
  Trainer b;
  HalfLoads mine{2.0};
  const std::vector<double> w = test::values(b.model.parameters()[0]);
  EXPECT_THROW_MSG(nn::load_checkpoint(path, {.model = &b.model, .optimizer = &b.opt, .extra = {{"half", &mine}}}),
                   IOError, "extra.half", "too large");
  EXPECT_EQ(mine.value, 2.0);
  EXPECT_EQ(test::values(b.model.parameters()[0]), w);
}
}  // namespace
