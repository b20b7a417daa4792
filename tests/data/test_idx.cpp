// read_idx on small IDX files written by the test (plain and gzipped), on the real Fashion-MNIST files when
// installed, and on missing, truncated and malformed files.
#include <unistd.h>
#include <zlib.h>

#include <cstring>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "idx_files.h"
#include "test_util.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {
fs::path tmpdir() { return test::tmpdir("idx"); }
std::string header(uint8_t type, const std::vector<uint32_t>& dims) { return test::idx_header(type, dims); }
using test::write_gz;
using test::write_plain;
}  // namespace

TEST(ReadIdx, Uint8PlainAndGzip) {
  fs::path d = tmpdir();
  std::string body = header(0x08, {2, 3});
  for (int i = 0; i < 6; ++i) body.push_back(static_cast<char>(i * 40));
  write_plain(d / "a.idx", body);
  write_gz(d / "a.idx.gz", body);
  for (const char* f : {"a.idx", "a.idx.gz"}) {
    Tensor t = data::read_idx((d / f).string());
    EXPECT_EQ(t.dtype(), kUInt8);
    EXPECT_TENSOR_NEAR(t, Shape({2, 3}), std::vector<double>({0, 40, 80, 120, 160, 200}));
  }
  fs::remove_all(d);
}

TEST(ReadIdx, Int32AndFloat32AreBigEndian) {
  fs::path d = tmpdir();
  std::string bi = header(0x0C, {2});
  for (uint32_t v : {uint32_t{1}, static_cast<uint32_t>(-7)})
    for (int s = 24; s >= 0; s -= 8) bi.push_back(static_cast<char>((v >> s) & 0xff));
  write_gz(d / "i.gz", bi);
  Tensor ti = data::read_idx((d / "i.gz").string());
  EXPECT_EQ(ti.dtype(), kInt32);
  EXPECT_TENSOR_NEAR(ti, Shape({2}), std::vector<double>({1, -7}));
  std::string bf = header(0x0D, {1});
  float f = -1.25f;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  for (int s = 24; s >= 0; s -= 8) bf.push_back(static_cast<char>((u >> s) & 0xff));
  write_plain(d / "f.idx", bf);
  Tensor tf = data::read_idx((d / "f.idx").string());
  EXPECT_EQ(tf.dtype(), kFloat32);
  EXPECT_TENSOR_NEAR(tf, Shape({1}), std::vector<double>({-1.25}));
  fs::remove_all(d);
}

TEST(ReadIdx, BadFilesThrowIOErrorNamingTheFile) {
  fs::path d = tmpdir();
  EXPECT_THROW_MSG(data::read_idx((d / "missing.idx").string()), IOError, "cannot open", "missing.idx");
  std::string trunc = header(0x08, {10, 10}) + std::string(50, '\1');
  write_gz(d / "trunc.gz", trunc);
  EXPECT_THROW_MSG(data::read_idx((d / "trunc.gz").string()), IOError, "truncated", "trunc.gz");
  write_plain(d / "bad.idx", std::string("\x12\x34\x08\x01", 4));
  EXPECT_THROW_MSG(data::read_idx((d / "bad.idx").string()), IOError, "not an IDX file");
  write_plain(d / "type.idx", header(0x0B, {1}) + "ab");
  EXPECT_THROW_MSG(data::read_idx((d / "type.idx").string()), IOError, "unsupported IDX element type");
  write_plain(d / "short.idx", std::string("\0\0", 2));
  EXPECT_THROW_MSG(data::read_idx((d / "short.idx").string()), IOError, "truncated");
  fs::remove_all(d);
}

TEST(ReadIdx, FashionMnistWhenInstalled) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/t10k-labels-idx1-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  Tensor y = data::read_idx(dir + "/t10k-labels-idx1-ubyte.gz");
  Tensor x = data::read_idx(dir + "/t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(y.shape(), Shape({10000}));
  EXPECT_EQ(x.shape(), Shape({10000, 28, 28}));
  // Fashion-MNIST's test set has 1000 images of each of the 10 classes.
  Tensor counts = sum(eq(y.to(kInt64).unsqueeze(1), arange(10).unsqueeze(0)).to(kInt64), {0});
  EXPECT_TENSOR_NEAR(counts, Shape({10}), std::vector<double>(10, 1000.0));
}
