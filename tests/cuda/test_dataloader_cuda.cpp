// tests: DataLoader with pin_memory and a CUDA .device: batches are pinned (CPU device) or delivered on the
// GPU through the side-stream prefetch, equal to the CPU loader's batches, with and without workers, and
// an error building a batch still surfaces at that batch. Skipped without a GPU.
#include <gtest/gtest.h>

#include <stdexcept>

#include "test_util.h"

namespace ember {
namespace {

data::TensorDataset make_ds() {
  manual_seed(1);
  return data::TensorDataset(randn({50, 3, 4}), arange(50, {.dtype = kInt64}));
}

std::vector<data::Batch> epoch(data::DataLoader<data::TensorDataset>& loader) {
  std::vector<data::Batch> out;
  for (auto b : loader) out.push_back(b);
  return out;
}

TEST(CudaDataLoader, PinMemoryPinsBatchesOnTheCpu) {
  EMBER_SKIP_IF_NO_CUDA();
  data::TensorDataset ds = make_ds();
  for (int workers : {0, 2}) {
    data::DataLoader loader(ds, {.batch_size = 8, .num_workers = workers, .pin_memory = true});
    for (auto [x, y] : loader) {
      EXPECT_TRUE(x.is_cpu());
      EXPECT_TRUE(x.is_pinned());
      EXPECT_TRUE(y.is_pinned());
    }
  }
}

TEST(CudaDataLoader, CudaDeviceDeliversTheSameBatchesOnTheGpu) {
  EMBER_SKIP_IF_NO_CUDA();
  data::TensorDataset ds = make_ds();
  data::DataLoader ref(ds, {.batch_size = 8, .shuffle = true, .seed = 3});
  const std::vector<data::Batch> want = epoch(ref);
  for (bool pin : {false, true})
    for (int workers : {0, 2}) {
      data::DataLoader loader(ds, {.batch_size = 8,
                                   .shuffle = true,
                                   .num_workers = workers,
                                   .pin_memory = pin,
                                   .device = Device::cuda(),
                                   .seed = 3});
      const std::vector<data::Batch> got = epoch(loader);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(got[i].x.is_cuda());
        EXPECT_TRUE(got[i].y.is_cuda());
        // used on the current stream right away: the copy must be complete for this stream
        EXPECT_TENSOR_NEAR(got[i].x * 1.0, want[i].x.shape(), test::values(want[i].x), 0, 0);
        EXPECT_EQ(test::values(got[i].y), test::values(want[i].y));
      }
    }
}

// A dataset whose example 20 cannot be built.
struct Faulty {
  int64_t size() const { return 40; }
  data::Example get(int64_t i) const {
    if (i == 20) throw std::runtime_error("example 20 is broken");
    return {full({2}, static_cast<double>(i)), Tensor()};
  }
};

TEST(CudaDataLoader, AnErrorSurfacesAtItsBatchDespiteThePrefetch) {
  EMBER_SKIP_IF_NO_CUDA();
  data::DataLoader loader(Faulty{}, {.batch_size = 5, .pin_memory = true, .device = Device::cuda()});
  int seen = 0;
  try {
    for (auto [x, y] : loader) {
      EXPECT_TRUE(x.is_cuda());
      ++seen;
    }
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("example 20"), std::string::npos);
  }
  EXPECT_EQ(seen, 4);  // batches 0..3 (examples 0..19) arrive; batch 4 holds example 20
}

}  // namespace
}  // namespace ember
