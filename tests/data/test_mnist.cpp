// MNIST on tiny fake IDX files written by the test (gzipped and plain), its errors, and the real
// Fashion-MNIST test split when installed.
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "idx_files.h"
#include "test_util.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {
fs::path tmpdir(const std::string& tag) { return test::tmpdir("mnist_" + tag); }
std::string header(uint8_t type, const std::vector<uint32_t>& dims) { return test::idx_header(type, dims); }
using test::write_gz;
using test::write_plain;
// n fake 28x28 images: pixel p of image i is (i * 7 + p) % 256; labels i % 10.
std::string images(uint32_t n) {
  std::string b = header(0x08, {n, 28, 28});
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t p = 0; p < 784; ++p) b.push_back(static_cast<char>((i * 7 + p) % 256));
  return b;
}
std::string labels(uint32_t n) {
  std::string b = header(0x08, {n});
  for (uint32_t i = 0; i < n; ++i) b.push_back(static_cast<char>(i % 10));
  return b;
}
}  // namespace

TEST(MNIST, LoadsFakeFilesScaledToUnitRange) {
  fs::path d = tmpdir("fake");
  write_gz(d / "train-images-idx3-ubyte.gz", images(5));
  write_gz(d / "train-labels-idx1-ubyte.gz", labels(5));
  // The test split as plain files: the .gz name is tried first, then the plain one.
  write_plain(d / "t10k-images-idx3-ubyte", images(3));
  write_plain(d / "t10k-labels-idx1-ubyte", labels(3));

  data::MNIST train(d.string(), data::Split::Train);
  EXPECT_EQ(train.size(), 5);
  EXPECT_EQ(train.images().shape(), Shape({5, 1, 28, 28}));
  EXPECT_EQ(train.images().dtype(), kFloat32);
  EXPECT_EQ(train.labels().dtype(), kInt64);
  EXPECT_TENSOR_NEAR(train.labels(), Shape({5}), std::vector<double>({0, 1, 2, 3, 4}));
  std::vector<double> px = test::values(train.images());
  for (size_t k = 0; k < px.size(); ++k) {
    const size_t i = k / 784, p = k % 784;
    ASSERT_NEAR(px[k], ((i * 7 + p) % 256) / 255.0, 1e-7) << "pixel " << k;
  }
  EXPECT_EQ(max(train.images()).item<float>(), 1.0f);
  EXPECT_EQ(min(train.images()).item<float>(), 0.0f);

  auto [x, y] = train.get(2);
  EXPECT_EQ(x.shape(), Shape({1, 28, 28}));
  EXPECT_EQ(y.item<int64_t>(), 2);
  EXPECT_NEAR(x.flatten().select(0, 0).item<float>(), 14 / 255.0, 1e-7);

  data::MNIST test(d.string(), data::Split::Test);
  EXPECT_EQ(test.size(), 3);
  EXPECT_EQ(test.images().shape(), Shape({3, 1, 28, 28}));

  // Through a DataLoader, gathered with get_batch.
  data::DataLoader loader(train, {.batch_size = 2});
  int n = 0;
  for (auto [xb, yb] : loader) {
    EXPECT_EQ(xb.shape()[1], 1);
    EXPECT_EQ(yb.dtype(), kInt64);
    ++n;
  }
  EXPECT_EQ(n, 3);
  fs::remove_all(d);
}

TEST(MNIST, MissingOrInconsistentFilesThrowIOError) {
  fs::path d = tmpdir("bad");
  const std::string root = d.string();
  EXPECT_THROW_MSG(data::MNIST(root, data::Split::Train), IOError, "MNIST", root.c_str(), "train-images-idx3-ubyte.gz",
                   "train-images-idx3-ubyte)");
  write_gz(d / "t10k-images-idx3-ubyte.gz", images(4));
  EXPECT_THROW_MSG(data::MNIST(d.string(), data::Split::Test), IOError, "t10k-labels-idx1-ubyte.gz");
  write_gz(d / "t10k-labels-idx1-ubyte.gz", labels(3));
  EXPECT_THROW_MSG(data::MNIST(d.string(), data::Split::Test), IOError, "4 images", "3 labels");
  // Files swapped: labels where images belong.
  write_gz(d / "train-images-idx3-ubyte.gz", labels(4));
  write_gz(d / "train-labels-idx1-ubyte.gz", labels(4));
  EXPECT_THROW_MSG(data::MNIST(d.string(), data::Split::Train), IOError, "expected uint8 images");
  fs::remove_all(d);
}

TEST(MNIST, FashionMnistTestSplitWhenInstalled) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  data::MNIST test(dir, data::Split::Test);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(test.images().shape(), Shape({10000, 1, 28, 28}));
  EXPECT_EQ(test.labels().shape(), Shape({10000}));
  EXPECT_LE(max(test.images()).item<float>(), 1.0f);
  EXPECT_GE(min(test.images()).item<float>(), 0.0f);
  EXPECT_GT(max(test.images()).item<float>(), 0.9f);  // really scaled by 255, not by something larger
  EXPECT_EQ(max(test.labels()).item<int64_t>(), 9);
  EXPECT_EQ(min(test.labels()).item<int64_t>(), 0);
}
