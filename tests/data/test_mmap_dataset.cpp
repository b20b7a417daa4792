// MmapDataset: samples served from mapped .npy shards and raw files equal the arrays written; integer labels come
// as int64; mismatched shards and bad files are clear errors; and a 4 GiB file read end to end through a
// DataLoader with workers, in order and shuffled, keeps the process's resident set far below the file size.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

fs::path tmpdir(const std::string& tag) { return test::tmpdir("mmapds_" + tag); }

// This process's resident set in bytes (VmRSS: anonymous + file-backed pages mapped in).
size_t rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmRSS:") {
      size_t kb = 0;
      f >> kb;
      return kb * 1024;
    }
    std::getline(f, key);
  }
  return 0;
}

}  // namespace

TEST(MmapDataset, ServesNpyShardsAsTheArraysWritten) {
  const fs::path d = tmpdir("shards");
  Tensor x0 = randn({5, 2, 3}), x1 = randn({4, 2, 3});
  Tensor y0 = randint(0, 10, {5}, {.dtype = kUInt8}), y1 = randint(0, 10, {4}, {.dtype = kUInt8});
  data::save_npy((d / "x0.npy").string(), x0);
  data::save_npy((d / "x1.npy").string(), x1);
  data::save_npy((d / "y0.npy").string(), y0);
  data::save_npy((d / "y1.npy").string(), y1);
  data::MmapDataset ds({(d / "x0.npy").string(), (d / "x1.npy").string()},
                       {(d / "y0.npy").string(), (d / "y1.npy").string()});
  ASSERT_EQ(ds.size(), 9);
  EXPECT_EQ(ds.x_dtype(), kFloat32);
  EXPECT_EQ(ds.x_sample_shape(), (Shape{2, 3}));
  Tensor xs = cat({x0, x1}, 0), ys = cat({y0, y1}, 0).to(kInt64);
  for (int64_t i = 0; i < 9; ++i) {
    data::Example e = ds.get(i);
    EXPECT_EQ(test::values(e.x), test::values(xs.select(0, i))) << i;
    EXPECT_EQ(e.y.dtype(), kInt64);
    EXPECT_EQ(e.y.item<int64_t>(), ys.select(0, i).item<int64_t>()) << i;
  }
  data::Batch b = ds.get_batch({8, 0, 5, 4});
  EXPECT_EQ(b.x.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(test::values(b.x), test::values(xs.index_select(0, tensor(std::vector<int64_t>{8, 0, 5, 4}))));
  // Through a loader with workers: the same batches as a TensorDataset of the same arrays.
  data::DataLoader a(ds, {.batch_size = 4, .shuffle = true, .num_workers = 2, .seed = 3});
  data::DataLoader ref(data::TensorDataset(xs, ys), {.batch_size = 4, .shuffle = true, .seed = 3});
  auto it = ref.begin();
  for (auto [x, y] : a) {
    EXPECT_EQ(test::values(x), test::values(it->x));
    EXPECT_EQ(test::values(y), test::values(it->y));
    ++it;
  }
  EXPECT_THROW_MSG(ds.get(9), IndexError, "index 9", "size 9");
  EXPECT_THROW_MSG(ds.get_batch({0, -1}), IndexError, "index -1");
  // Shards must agree; x and y must have the same number of samples.
  data::save_npy((d / "other.npy").string(), randn({3, 3, 2}));
  EXPECT_THROW_MSG(data::MmapDataset(std::vector<std::string>{(d / "x0.npy").string(), (d / "other.npy").string()}),
                   IOError, "other.npy", "[3, 2]", "[2, 3]", "every shard");
  EXPECT_THROW_MSG(data::MmapDataset((d / "x0.npy").string(), (d / "y1.npy").string()), ShapeError, "5 samples", "4");
  data::save_npy((d / "scalar.npy").string(), full(Shape{}, 1.0));
  EXPECT_THROW_MSG(data::MmapDataset((d / "scalar.npy").string()), IOError, "0-d");
  fs::remove_all(d);
}

TEST(MmapDataset, ServesRawFilesAndChecksTheirSize) {
  const fs::path d = tmpdir("raw");
  std::vector<uint8_t> bytes(16 + 6 * 12);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 3);
  {
    std::ofstream f(d / "x.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  data::MmapDataset ds(
      data::RawArray{.path = (d / "x.bin").string(), .dtype = kUInt8, .sample_shape = {3, 4}, .offset = 16});
  ASSERT_EQ(ds.size(), 6);
  data::Example e = ds.get(2);
  EXPECT_EQ(e.x.shape(), (Shape{3, 4}));
  EXPECT_FALSE(e.y.defined());
  std::vector<double> want;
  for (size_t i = 0; i < 12; ++i) want.push_back(bytes[16 + 2 * 12 + i]);
  EXPECT_EQ(test::values(e.x), want);
  EXPECT_THROW_MSG(
      data::MmapDataset(data::RawArray{.path = (d / "x.bin").string(), .dtype = kUInt8, .sample_shape = {5}}), IOError,
      "88 bytes", "whole number", "[5]");
  EXPECT_THROW_MSG(data::MmapDataset(data::RawArray{.path = (d / "missing.bin").string(), .sample_shape = {1}}),
                   IOError, "cannot open", "missing.bin");
  EXPECT_THROW_MSG(data::MmapDataset(data::RawArray{
                       .path = (d / "x.bin").string(), .dtype = kUInt8, .sample_shape = {4}, .offset = 1000}),
                   IOError, "offset of 1000");
  { std::ofstream(d / "odd.bin", std::ios::binary) << std::string(18, 'x'); }  // 2 + one 16-byte sample
  EXPECT_THROW_MSG(data::MmapDataset(data::RawArray{
                       .path = (d / "odd.bin").string(), .dtype = kInt32, .sample_shape = {4}, .offset = 2}),
                   IOError, "not aligned");
  EXPECT_THROW_MSG(
      data::MmapDataset(data::RawArray{
          .path = (d / "x.bin").string(), .dtype = kUInt8, .sample_shape = {int64_t{1} << 40, int64_t{1} << 40}}),
      ValueError, "too large");
  { std::ofstream(d / "empty.bin"); }
  EXPECT_EQ(data::MmapDataset(data::RawArray{.path = (d / "empty.bin").string(), .sample_shape = {3}}).size(), 0);
  // A zero-row shard between two others, and no release at all (resident_bytes = 0): the same samples.
  data::save_npy((d / "a.npy").string(), arange(0, 6, 1, {.dtype = kFloat32}).reshape({3, 2}));
  data::save_npy((d / "z.npy").string(), zeros({0, 2}));
  data::save_npy((d / "b.npy").string(), arange(6, 10, 1, {.dtype = kFloat32}).reshape({2, 2}));
  data::MmapDataset gap(
      std::vector<std::string>{(d / "a.npy").string(), (d / "z.npy").string(), (d / "b.npy").string()}, {},
      {.resident_bytes = 0});
  ASSERT_EQ(gap.size(), 5);
  EXPECT_EQ(test::values(gap.get_batch({4, 3, 2}).x), (std::vector<double>{8, 9, 6, 7, 4, 5}));
  EXPECT_EQ(test::values(gap.get_batch({2, 3, 4}).x), (std::vector<double>{4, 5, 6, 7, 8, 9}));
  fs::remove_all(d);
}

TEST(MmapDataset, AFourGiBFileTrainsWithABoundedResidentSet) {
  // A sparse 4 GiB .npy (no disk used: the holes read as zeros) with a few samples marked; every sample is read
  // once through a DataLoader with two workers while the resident set is sampled after each batch.
  const fs::path d = tmpdir("big");
  const std::string path = (d / "big.npy").string();
  const int64_t features = 4096, n = (int64_t{4} << 30) / (features * 4);  // float32 [262144, 4096]
  data::save_npy(path, zeros({1, features}));                              // a valid header, then grow the data part
  std::string head;
  {
    std::ifstream f(path, std::ios::binary);
    head.assign(std::istreambuf_iterator<char>(f), {});
  }
  const int64_t off = static_cast<int64_t>(data::parse_npy_header(head.data(), head.size(), path).data_offset);
  head.resize(static_cast<size_t>(off));
  {
    // Rewrite the shape in place: the dict is padded, so a longer shape still fits.
    const size_t at = head.find("(1, 4096)");
    ASSERT_NE(at, std::string::npos);
    std::string shape = "(" + std::to_string(n) + ", 4096)";
    head.replace(at, 9, shape);
    head.erase(head.find('\n') - (shape.size() - 9), shape.size() - 9);
    std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
    out.write(head.data(), off);
  }
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off + n * features * 4), 0);
  const std::vector<int64_t> marked = {0, 12345, n / 2, n - 1};
  for (int64_t i : marked) {
    const float v = static_cast<float>(i + 1);
    ASSERT_EQ(::pwrite(fd, &v, 4, off + (i * features + 7) * 4), 4);
  }
  ::close(fd);

  data::MmapDataset ds(path);
  ASSERT_EQ(ds.size(), n);
  EXPECT_GE(ds.mapped_bytes(), size_t{4} << 30);
  data::DataLoader loader(ds, {.batch_size = 512, .num_workers = 2});
  const size_t before = rss_bytes();
  size_t peak = before;
  int64_t seen = 0, marks = 0;
  for (auto [x, y] : loader) {
    peak = std::max(peak, rss_bytes());
    for (int64_t i : marked)
      if (i >= seen && i < seen + x.size(0)) {
        EXPECT_EQ(x.select(0, i - seen).select(0, 7).item<float>(), static_cast<float>(i + 1)) << i;
        ++marks;
      }
    seen += x.size(0);
  }
  EXPECT_EQ(seen, n);
  EXPECT_EQ(marks, 4);
  // 256 MiB between releases + the batches in flight (6 x 8 MiB) + noise: far below the 4 GiB read.
  EXPECT_LT(peak - before, size_t{600} << 20)
      << "resident set grew from " << (before >> 20) << " MiB to " << (peak >> 20) << " MiB";

  // Shuffled: scattered rows are read without mapping them, so the resident set stays bounded too.
  data::DataLoader shuffled(ds, {.batch_size = 512, .shuffle = true, .num_workers = 2, .seed = 1});
  const size_t before2 = rss_bytes();
  size_t peak2 = before2;
  seen = 0;
  double total = 0;
  for (auto [x, y] : shuffled) {
    peak2 = std::max(peak2, rss_bytes());
    total += sum(x.select(1, 7)).item<float>();
    seen += x.size(0);
  }
  EXPECT_EQ(seen, n);
  EXPECT_EQ(total, 1.0 + 12346 + (n / 2 + 1) + n);  // the marks, found wherever the shuffle put them
  EXPECT_LT(peak2 - before2, size_t{600} << 20)
      << "resident set grew from " << (before2 >> 20) << " MiB to " << (peak2 >> 20) << " MiB (shuffled)";

  // One sample at a time in random order (what a transform or a custom collate does): bounded as well.
  const size_t before3 = rss_bytes();
  size_t peak3 = before3;
  std::vector<int64_t> order = data::shuffled_order(n, 2, 0);
  for (size_t k = 0; k < 60000; ++k) {
    data::Example e = ds.get(order[k]);
    if (k % 512 == 0) peak3 = std::max(peak3, rss_bytes());
  }
  EXPECT_LT(peak3 - before3, size_t{600} << 20)
      << "resident set grew from " << (before3 >> 20) << " MiB to " << (peak3 >> 20) << " MiB (get(i) one by one)";
  fs::remove_all(d);
}
