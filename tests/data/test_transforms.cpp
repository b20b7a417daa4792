// Transforms and per-sample random streams: what each transform computes, their bad inputs, and augmentation
// through a DataLoader that is the same for any num_workers (and persistent workers), new each epoch, and
// different for another seed.
#include <set>

#include "test_util.h"

using namespace ember;
namespace T = ember::data::transforms;

namespace {

// [C, H, W] uint8 image with pixel value c * 100 + h * 10 + w.
Tensor image(int64_t C, int64_t H, int64_t W) {
  std::vector<uint8_t> v;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) v.push_back(static_cast<uint8_t>(c * 100 + h * 10 + w));
  return tensor(v, Shape{C, H, W});
}

// A dataset of noisy images: get(i) draws its noise from sample_rng(i), as a user's augmentation would.
struct Noisy {
  int64_t size() const { return 37; }
  data::Example get(int64_t i) const {
    data::SampleRng rng = data::sample_rng(i);
    std::vector<float> v(6);
    for (float& x : v) x = static_cast<float>(rng.normal());
    return {tensor(v, Shape{6}), full(Shape{}, static_cast<double>(i), {.dtype = kInt64})};
  }
};

}  // namespace

TEST(Transforms, RandomCropIsAWindowOfThePaddedImage) {
  Tensor x = image(2, 5, 6);
  T::RandomCrop crop(4, {.padding = 2});
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (int64_t i = 0; i < 200; ++i) {
    data::SampleRng rng(1, 0, i);
    Tensor y = crop(x, rng);
    ASSERT_EQ(y.shape(), (Shape{2, 4, 4}));
    // Find the offset (top, left) in padded coordinates that explains every output pixel.
    bool found = false;
    for (int64_t top = 0; top <= 5 && !found; ++top)
      for (int64_t left = 0; left <= 6 && !found; ++left) {
        bool ok = true;
        for (int64_t c = 0; c < 2 && ok; ++c)
          for (int64_t r = 0; r < 4 && ok; ++r)
            for (int64_t q = 0; q < 4 && ok; ++q) {
              const int64_t h = top + r - 2, w = left + q - 2;
              const int want = (h < 0 || h >= 5 || w < 0 || w >= 6) ? 0 : static_cast<int>(c * 100 + h * 10 + w);
              ok = y.select(0, c).select(0, r).select(0, q).item<uint8_t>() == want;
            }
        if (ok) {
          offsets.insert({top, left});
          found = true;
        }
      }
    ASSERT_TRUE(found) << "crop " << i << " is not a window of the padded image";
  }
  EXPECT_GT(offsets.size(), 20u);  // 6 x 7 possible offsets: the position varies
  data::SampleRng rng(0, 0, 0);
  EXPECT_THROW_MSG(T::RandomCrop(9)(x, rng), ShapeError, "9x9", "5x6");
  EXPECT_THROW_MSG(T::RandomCrop(2)(zeros({4}), rng), ShapeError, "[C, H, W]", "[4]");
  EXPECT_THROW_MSG(T::RandomCrop(0), ValueError, "size");
  EXPECT_EQ(T::RandomCrop(3)(image(1, 3, 3).select(0, 0), rng).shape(), (Shape{3, 3}));  // [H, W] stays 2-D
}

TEST(Transforms, FlipToFloatNormalizeAndCompose) {
  Tensor x = image(3, 2, 4);
  data::SampleRng rng(0, 0, 0);
  Tensor f = T::RandomHorizontalFlip(1.0)(x, rng);
  EXPECT_EQ(f.select(0, 2).select(0, 1).to_vector<int64_t>(), (std::vector<int64_t>{213, 212, 211, 210}));
  EXPECT_EQ(test::values(T::RandomHorizontalFlip(0.0)(x, rng)), test::values(x));
  Tensor g = T::ToFloat()(x, rng);
  EXPECT_EQ(g.dtype(), kFloat32);
  EXPECT_NEAR(g.select(0, 1).select(0, 1).select(0, 3).item<float>(), 113.0 / 255.0, 1e-6);
  Tensor n = T::Normalize({0.5, 0.25, 0}, {0.5, 0.5, 2})(g, rng);
  EXPECT_NEAR(n.select(0, 1).select(0, 1).select(0, 3).item<float>(), (113.0 / 255.0 - 0.25) / 0.5, 1e-6);
  EXPECT_NEAR(n.select(0, 2).select(0, 0).select(0, 0).item<float>(), (200.0 / 255.0) / 2, 1e-6);
  T::Compose all{T::RandomHorizontalFlip(1.0), T::ToFloat(), T::Normalize({0, 0, 0}, {1, 1, 1})};
  EXPECT_TRUE(test::tensor_near(all(x, rng), x.shape(), test::values(T::ToFloat()(f, rng))));
  EXPECT_THROW_MSG(T::Normalize({0.5}, {0.5})(g, rng), ShapeError, "1 channels", "[3, 2, 4]");
  EXPECT_THROW_MSG(T::Normalize({0.5, 0.5, 0.5}, {1, 1, 1})(x, rng), DTypeError, "ToFloat", "uint8");
  EXPECT_THROW_MSG(T::Normalize({0.5}, {0}), ValueError, "std must be > 0");
  EXPECT_THROW_MSG(T::RandomHorizontalFlip(1.5), ValueError, "[0, 1]");
}

TEST(Transforms, AugmentationIsTheSameForAnyWorkerCountAndNewEachEpoch) {
  data::Transformed aug(data::TensorDataset(image(3, 8, 8).unsqueeze(0).expand({40, 3, 8, 8}).contiguous(), arange(40)),
                        T::Compose{T::RandomCrop(8, {.padding = 2}), T::RandomHorizontalFlip(), T::ToFloat()});
  auto run = [&](int workers, bool persistent, uint64_t seed) {
    data::DataLoader loader(
        aug,
        {.batch_size = 6, .shuffle = true, .num_workers = workers, .seed = seed, .persistent_workers = persistent});
    std::vector<std::vector<double>> epochs;
    for (int e = 0; e < 2; ++e) {
      std::vector<double> all;
      for (auto [x, y] : loader) {
        auto v = test::values(x);
        all.insert(all.end(), v.begin(), v.end());
      }
      epochs.push_back(all);
    }
    return epochs;
  };
  const auto ref = run(0, false, 5);
  EXPECT_NE(ref[0], ref[1]);  // a new augmentation each epoch
  EXPECT_EQ(run(1, false, 5), ref);
  EXPECT_EQ(run(3, false, 5), ref);
  EXPECT_EQ(run(2, true, 5), ref);
  EXPECT_NE(run(2, false, 6)[0], ref[0]);  // another seed, other crops

  // A dataset drawing its own noise from sample_rng(i): identical for any worker count.
  auto noisy = [](int workers) {
    data::DataLoader loader(Noisy{}, {.batch_size = 5, .num_workers = workers, .seed = 11});
    std::vector<double> all;
    for (auto [x, y] : loader) {
      auto v = test::values(x);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  const auto n0 = noisy(0);
  EXPECT_EQ(noisy(2), n0);
  EXPECT_EQ(noisy(4), n0);
  // Outside a loader the stream is (0, 0, i): still a function of the index alone.
  EXPECT_EQ(data::sample_rng(3).next_u64(), data::SampleRng(0, 0, 3).next_u64());
  EXPECT_NE(data::SampleRng(0, 0, 3).next_u64(), data::SampleRng(0, 1, 3).next_u64());
  EXPECT_NE(data::SampleRng(0, 0, 3).next_u64(), data::SampleRng(1, 0, 3).next_u64());
}

TEST(SampleRng, DrawsAreInRangeAndRoughlyUniform) {
  data::SampleRng rng(7, 1, 2);
  std::vector<int> counts(5, 0);
  double sum = 0, sq = 0;
  for (int i = 0; i < 50000; ++i) {
    const int64_t k = rng.randint(10, 15);
    ASSERT_TRUE(k >= 10 && k < 15);
    ++counts[static_cast<size_t>(k - 10)];
    const double u = rng.uniform();
    ASSERT_TRUE(u >= 0 && u < 1);
    const double z = rng.normal();
    sum += z;
    sq += z * z;
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 400);
  EXPECT_NEAR(sum / 50000, 0, 0.03);
  EXPECT_NEAR(sq / 50000, 1, 0.03);
  EXPECT_THROW_MSG(rng.randint(3, 3), ValueError, "empty range");
}
