// ember's own random functions inside a dataset's get() (randn for noise, Dropout, randint crops) give the same
// batches for any number of workers and on every run: the loader scopes a per-sample generator around get(i).
// (Issue 18: with the shared global generator, 2 workers gave a different result on each of 6 runs.)
#include <gtest/gtest.h>

#include "test_util.h"

using namespace ember;

namespace {

struct NoisyDataset {
  int64_t size() const { return 40; }
  data::Example get(int64_t i) const {
    Tensor x = full({8}, static_cast<double>(i)) + randn({8}) * 0.1;  // augmentation noise
    Tensor shift = randint(0, 5, Shape{});
    return {x + shift.to(kFloat32), full(Shape{}, static_cast<double>(i)).to(kInt64)};
  }
};

std::vector<double> run(int workers, uint64_t seed, int epochs = 2) {
  data::DataLoader loader(NoisyDataset{}, {.batch_size = 6, .shuffle = true, .num_workers = workers, .seed = seed});
  std::vector<double> all;
  for (int e = 0; e < epochs; ++e)
    for (auto [x, y] : loader)
      for (double v : test::values(x)) all.push_back(v);
  return all;
}

TEST(WorkerRng, RandnInGetIsTheSameForAnyWorkerCountAndEveryRun) {
  manual_seed(1);
  const std::vector<double> ref = run(0, 7);
  for (int workers : {1, 2, 3})
    for (int rep = 0; rep < 3; ++rep) {
      (void)randn({17});  // the global generator's position must not matter either
      EXPECT_EQ(run(workers, 7), ref) << workers << " workers, run " << rep;
    }
  EXPECT_NE(run(2, 8), ref);  // another loader seed: other noise
}

TEST(WorkerRng, EpochsDifferAndTheGlobalGeneratorIsUntouched) {
  manual_seed(3);
  const PhiloxState before = get_rng_state();
  std::vector<double> two = run(2, 7, 2);
  EXPECT_EQ(get_rng_state(), before);  // draws in get() came from the per-sample generators
  const size_t half = two.size() / 2;
  EXPECT_NE(std::vector<double>(two.begin(), two.begin() + static_cast<std::ptrdiff_t>(half)),
            std::vector<double>(two.begin() + static_cast<std::ptrdiff_t>(half), two.end()));
}

}  // namespace

namespace {
// A sampler that draws every index twice in an epoch (as sampling with replacement does).
struct Twice : data::Sampler {
  std::vector<int64_t> indices(int64_t n, uint64_t) const override {
    std::vector<int64_t> out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), {i, i});
    return out;
  }
  int64_t size(int64_t n) const override { return 2 * n; }
};

TEST(WorkerRng, AnIndexDrawnTwiceInAnEpochGetsTwoAugmentations) {
  for (int workers : {0, 2}) {
    data::DataLoader loader(
        NoisyDataset{}, {.batch_size = 10, .num_workers = workers, .seed = 4, .sampler = std::make_shared<Twice>()});
    for (auto [x, y] : loader) {
      std::vector<double> v = test::values(x), idx = test::values(y);
      for (size_t s = 0; s + 1 < idx.size(); s += 2) {
        ASSERT_EQ(idx[s], idx[s + 1]);
        EXPECT_NE(v[s * 8], v[(s + 1) * 8]) << "index " << idx[s] << " got the same noise twice";
      }
    }
  }
}
}  // namespace
