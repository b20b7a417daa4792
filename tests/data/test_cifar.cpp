// CIFAR10 on small CIFAR-format files written by the test (both splits, the folder or its parent), and its errors:
// missing files, truncated files, labels outside 0..9.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

fs::path tmpdir(const std::string& tag) { return test::tmpdir("cifar_" + tag); }

// n records; record i of file f: label (f * 7 + i) % 10, pixel p = (f + i * 3 + p) % 256.
std::string records(int f, int n) {
  std::string b;
  for (int i = 0; i < n; ++i) {
    b.push_back(static_cast<char>((f * 7 + i) % 10));
    for (int p = 0; p < 3072; ++p) b.push_back(static_cast<char>((f + i * 3 + p) % 256));
  }
  return b;
}

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

fs::path fake_cifar(const std::string& tag, int per_file) {
  fs::path root = tmpdir(tag);
  fs::path dir = root / "cifar-10-batches-bin";
  fs::create_directories(dir);
  for (int f = 1; f <= 5; ++f) write(dir / ("data_batch_" + std::to_string(f) + ".bin"), records(f, per_file));
  write(dir / "test_batch.bin", records(0, per_file));
  return root;
}

}  // namespace

TEST(CIFAR10, ReadsBothSplitsFromTheFolderOrItsParent) {
  const fs::path root = fake_cifar("ok", 3);
  data::CIFAR10 train(root.string(), data::Split::Train);
  data::CIFAR10 test((root / "cifar-10-batches-bin").string(), data::Split::Test);
  ASSERT_EQ(train.size(), 15);
  ASSERT_EQ(test.size(), 3);
  EXPECT_EQ(train.images().dtype(), kUInt8);
  EXPECT_EQ(train.images().shape(), (Shape{15, 3, 32, 32}));
  EXPECT_EQ(train.labels().dtype(), kInt64);
  // Sample 4 is file 2's record 1: label (14 + 1) % 10 = 5; channel 1, row 2, col 3 is pixel 1024 + 67.
  auto [x, y] = train.get(4);
  EXPECT_EQ(x.shape(), (Shape{3, 32, 32}));
  EXPECT_EQ(y.item<int64_t>(), 5);
  EXPECT_EQ(x.select(0, 1).select(0, 2).select(0, 3).item<uint8_t>(), (2 + 3 + 1024 + 67) % 256);
  EXPECT_EQ(test.get(2).y.item<int64_t>(), 2);
  EXPECT_STREQ(data::CIFAR10::classes()[9], "truck");
  fs::remove_all(root);
}

TEST(CIFAR10, MissingTruncatedAndWrongFilesAreIOErrors) {
  const fs::path empty = tmpdir("none");
  EXPECT_THROW_MSG(data::CIFAR10(empty.string()), IOError, "data_batch_1.bin", "not found", "cifar-10-binary.tar.gz");
  const fs::path root = fake_cifar("bad", 2);
  const fs::path dir = root / "cifar-10-batches-bin";
  fs::remove(dir / "data_batch_4.bin");
  EXPECT_THROW_MSG(data::CIFAR10(root.string()), IOError, "data_batch_4.bin", "missing");
  write(dir / "data_batch_4.bin", records(4, 2).substr(0, 5000));
  EXPECT_THROW_MSG(data::CIFAR10(root.string()), IOError, "data_batch_4.bin", "truncated", "5000 bytes", "3073");
  std::string wrong = records(4, 2);
  wrong[3073] = 57;  // record 1's label
  write(dir / "data_batch_4.bin", wrong);
  EXPECT_THROW_MSG(data::CIFAR10(root.string()), IOError, "record 1", "label 57", "CIFAR-100");
  // A zero-byte batch file (a failed copy) is refused, not read as a batch of no samples (which silently trained
  // on the other four files only).
  write(dir / "data_batch_4.bin", records(4, 2));
  write(dir / "data_batch_3.bin", "");
  EXPECT_THROW_MSG(data::CIFAR10(root.string()), IOError, "data_batch_3.bin", "is empty");
  // Neither is a FIFO in its place read (nor waited on).
  fs::remove(dir / "data_batch_3.bin");
  ASSERT_EQ(::mkfifo((dir / "data_batch_3.bin").c_str(), 0600), 0);
  EXPECT_THROW_MSG(data::CIFAR10(root.string()), IOError, "data_batch_3.bin", "is a FIFO, not a regular file");
  fs::remove_all(empty);
  fs::remove_all(root);
}
