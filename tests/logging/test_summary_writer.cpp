// Tests of SummaryWriter (ember/logging/summary_writer.h) with a reader of its own: the TFRecord framing and both
// masked CRC-32Cs of every record (a CRC written here, not the library's), and the protobuf fields of the Events
// (wall time, step, tag, simple_value, histogram, text). Then TensorBoard's own reader (tests/tools/
// read_tensorboard.py) when the tensorboard package is installed (make tensorboard), and the bad inputs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"

namespace fs = std::filesystem;

namespace ember {
namespace {

// --- an independent reader: CRC-32C bit by bit, records, protobuf fields

uint32_t crc32c_bitwise(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}
uint32_t masked(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xA282EAD8u; }
uint64_t le(const std::string& s, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<size_t>(i)]);
  return v;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The records of an event file; every length and data CRC checked.
std::vector<std::string> records(const fs::path& p) {
  const std::string s = read_file(p);
  std::vector<std::string> out;
  size_t at = 0;
  while (at < s.size()) {
    EXPECT_LE(at + 12, s.size()) << "a truncated record header in " << p;
    const uint64_t len = le(s, at, 8);
    EXPECT_EQ(le(s, at + 8, 4), masked(crc32c_bitwise(s.substr(at, 8)))) << "length CRC of record " << out.size();
    EXPECT_LE(at + 12 + len + 4, s.size()) << "a truncated record in " << p;
    const std::string data = s.substr(at + 12, len);
    EXPECT_EQ(le(s, at + 12 + len, 4), masked(crc32c_bitwise(data))) << "data CRC of record " << out.size();
    out.push_back(data);
    at += 12 + len + 4;
  }
  return out;
}

// One protobuf field: its number, wire type, and its value (varint / fixed bits, or the bytes).
struct Field {
  int number, wire;
  uint64_t num = 0;
  std::string bytes;
};
std::vector<Field> fields(const std::string& m) {
  std::vector<Field> out;
  size_t at = 0;
  auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0; at < m.size(); shift += 7) {
      const auto b = static_cast<unsigned char>(m[at++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) break;
    }
    return v;
  };
  while (at < m.size()) {
    const uint64_t key = varint();
    Field f{static_cast<int>(key >> 3), static_cast<int>(key & 7)};
    if (f.wire == 0) f.num = varint();
    if (f.wire == 1) f.num = le(m, at, 8), at += 8;
    if (f.wire == 5) f.num = le(m, at, 4), at += 4;
    if (f.wire == 2) {
      const uint64_t n = varint();
      f.bytes = m.substr(at, n);
      at += n;
    }
    out.push_back(f);
  }
  return out;
}
const Field* field(const std::vector<Field>& fs, int number) {
  for (const Field& f : fs)
    if (f.number == number) return &f;
  return nullptr;
}
double as_double(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
float as_float(uint64_t bits) {
  const auto b = static_cast<uint32_t>(bits);
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// The one Summary.Value of an Event, and its step.
struct Value {
  int64_t step;
  std::vector<Field> fields;
};
Value value_of(const std::string& event) {
  const auto ev = fields(event);
  EXPECT_NE(field(ev, 1), nullptr) << "wall_time";
  const Field* summary = field(ev, 5);
  EXPECT_NE(summary, nullptr);
  const auto values = fields(summary ? summary->bytes : "");
  EXPECT_EQ(values.size(), 1u);
  return {field(ev, 2) ? static_cast<int64_t>(field(ev, 2)->num) : 0, fields(values.empty() ? "" : values[0].bytes)};
}

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      out.push_back(e.path());
  return out;
}

// The run read back by both readers: 5 points of loss/train, two add_scalars curves, a histogram of 0..0.999, text.
void write_run(const fs::path& dir) {
  SummaryWriter w(dir.string());
  for (int s = 0; s < 5; ++s) w.add_scalar("loss/train", 1.0 / (s + 1), s);
  w.add_scalars("acc", {{"train", 0.5}, {"test", 0.75}}, 7);
  w.add_histogram("weights", arange(0, 1000, 1, {.dtype = kFloat32}) / 1000.0, 3, 10);
  w.add_text("config", "Adam lr 1e-3, batch 64", 0);
  w.close();
}

TEST(SummaryWriter, RecordsAreFramedWithBothCrcsAndHoldTheEvents) {
  const fs::path dir = test::tmpdir("RecordsAreFramedWithBothCrcsAndHoldTheEvents");
  write_run(dir);
  const auto files = event_files(dir);
  ASSERT_EQ(files.size(), 1u);
  const auto recs = records(files[0]);
  ASSERT_EQ(recs.size(), 1u + 5 + 1 + 1);
  EXPECT_EQ(field(fields(recs[0]), 3)->bytes, "brain.Event:2");
  for (int s = 0; s < 5; ++s) {
    const Value v = value_of(recs[1 + static_cast<size_t>(s)]);
    EXPECT_EQ(v.step, s);
    EXPECT_EQ(field(v.fields, 1)->bytes, "loss/train");
    EXPECT_EQ(as_float(field(v.fields, 2)->num), static_cast<float>(1.0 / (s + 1)));
  }
  const Value h = value_of(recs[6]);
  EXPECT_EQ(h.step, 3);
  const auto histo = fields(field(h.fields, 5)->bytes);
  EXPECT_EQ(as_double(field(histo, 1)->num), 0.0);            // min
  EXPECT_NEAR(as_double(field(histo, 2)->num), 0.999, 1e-6);  // max (float32 values)
  EXPECT_EQ(as_double(field(histo, 3)->num), 1000.0);         // num
  const std::string counts = field(histo, 7)->bytes;          // packed doubles: a first empty bucket, then 10 of 100
  ASSERT_EQ(counts.size(), 11u * 8);
  EXPECT_EQ(as_double(le(counts, 0, 8)), 0.0);
  for (size_t i = 1; i < 11; ++i) EXPECT_EQ(as_double(le(counts, i * 8, 8)), 100.0) << "bucket " << i;
  const Value t = value_of(recs[7]);
  EXPECT_EQ(field(t.fields, 1)->bytes, "config/text_summary");
  EXPECT_EQ(field(fields(field(t.fields, 8)->bytes), 8)->bytes, "Adam lr 1e-3, batch 64");
  // add_scalars: one folder per curve, the main tag as the tag
  for (const auto& [key, want] : std::map<std::string, float>{{"train", 0.5f}, {"test", 0.75f}}) {
    const auto sub = event_files(dir / ("acc_" + key));
    ASSERT_EQ(sub.size(), 1u) << key;
    const auto r = records(sub[0]);
    ASSERT_EQ(r.size(), 2u);
    const Value v = value_of(r[1]);
    EXPECT_EQ(v.step, 7);
    EXPECT_EQ(field(v.fields, 1)->bytes, "acc");
    EXPECT_EQ(as_float(field(v.fields, 2)->num), want);
  }
}

TEST(SummaryWriter, FlushWritesWholeRecordsAndCloseEndsTheWriter) {
  const fs::path dir = test::tmpdir("FlushWritesWholeRecordsAndCloseEndsTheWriter");
  SummaryWriter w(dir.string(), {.flush_every = 100});
  const fs::path file = w.file_path();
  EXPECT_EQ(records(file).size(), 1u);  // the file-version record is written at once
  w.add_scalar("x", 1, 0);
  w.add_scalar("x", 2, 1);
  EXPECT_EQ(records(file).size(), 1u) << "buffered until flush";
  w.flush();
  EXPECT_EQ(records(file).size(), 3u);
  w.close();
  w.close();  // twice is fine
  EXPECT_THROW_MSG(w.add_scalar("x", 3, 2), ValueError, "after close");
  EXPECT_EQ(records(file).size(), 3u);
}

TEST(SummaryWriter, BadInputsAreClearErrorsAndWriteNothing) {
  const fs::path dir = test::tmpdir("BadInputsAreClearErrorsAndWriteNothing");
  const fs::path blocker = dir / "a_file";
  std::ofstream(blocker) << "not a folder";
  EXPECT_THROW_MSG(SummaryWriter((blocker / "run").string()), IOError, "SummaryWriter", "a_file");
  EXPECT_THROW_MSG(SummaryWriter("/proc/ember_summary_writer_test"), IOError, "SummaryWriter");
  EXPECT_THROW_MSG(SummaryWriter(""), ValueError, "empty");
  EXPECT_THROW_MSG(SummaryWriter(dir.string(), {.flush_every = 0}), ValueError, "flush_every");
  SummaryWriter w((dir / "run").string(), {.flush_every = 1});
  const size_t before = records(w.file_path()).size();
  const Tensor nan = tensor<float>({1.f, NAN});
  EXPECT_THROW_MSG(w.add_histogram("h", nan, 0), ValueError, "add_histogram", "'h'", "nan");
  EXPECT_THROW_MSG(w.add_histogram("h", zeros({0}), 0), ValueError, "no elements");
  EXPECT_THROW_MSG(w.add_histogram("h", ones({3}), 0, 0), ValueError, "bins");
  EXPECT_THROW_MSG(w.add_histogram("h", Tensor(), 0), Error, "undefined");
  EXPECT_THROW_MSG(w.add_scalar("", 1, 0), ValueError, "add_scalar", "tag");
  EXPECT_THROW_MSG(w.add_scalars("m", {{"", 1.0}}, 0), ValueError, "add_scalars", "key");
  EXPECT_EQ(records(w.file_path()).size(), before) << "a refused call writes nothing";
}

// Values at the ends of the double range: the bucket arithmetic must not overflow into NaN.
TEST(SummaryWriter, HistogramOfExtremeValues) {
  const fs::path dir = test::tmpdir("HistogramOfExtremeValues");
  SummaryWriter w(dir.string(), {.flush_every = 1});
  w.add_histogram("wide", tensor<double>({-1e308, 0.0, 1e308}), 0, 4);
  const auto recs = records(w.file_path());
  ASSERT_EQ(recs.size(), 2u);
  const auto histo = fields(field(value_of(recs[1]).fields, 5)->bytes);
  const std::string counts = field(histo, 7)->bytes;
  ASSERT_EQ(counts.size(), 5u * 8);
  std::vector<double> c;
  for (size_t i = 0; i < 5; ++i) c.push_back(as_double(le(counts, i * 8, 8)));
  EXPECT_EQ(c, (std::vector<double>{0, 1, 0, 1, 1}));  // -1e308 | 0 (third bucket's start) | 1e308 in the last
}

// TensorBoard's own reader, when installed (make tensorboard puts it in build/venv-tensorboard).
TEST(SummaryWriterTensorBoard, TheRunReadsBackInTensorBoard) {
  std::string python = "/usr/bin/python3";
  if (fs::exists(EMBER_BINARY_DIR "/venv-tensorboard/bin/python"))
    python = EMBER_BINARY_DIR "/venv-tensorboard/bin/python";
  if (const char* p = std::getenv("EMBER_TENSORBOARD_PYTHON")) python = p;
  if (std::system((python + " -c 'import tensorboard' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << python << " cannot import tensorboard (make tensorboard installs it)";
  const fs::path dir = test::tmpdir("TheRunReadsBackInTensorBoard");
  write_run(dir);
  const std::string cmd = python + " " + EMBER_SOURCE_DIR + "/tests/tools/read_tensorboard.py " + dir.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace ember
