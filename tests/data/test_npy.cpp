// .npy / .npz: round trips for every dtype, hand-made headers (Fortran order, big-endian, widened integers, format
// 2.0), memory mapping, NumPy interop both ways (python3 + numpy; skipped when absent), and malformed files: each a
// clear IOError, never a crash or an allocation of the declared size.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "test_util.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

fs::path tmpdir(const std::string& tag) { return test::tmpdir("npy_" + tag); }

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// A format 1.0 .npy with this header dict and data bytes.
std::string npy(const std::string& dict, const std::string& data, int major = 1) {
  std::string h = dict;
  const size_t pre = major == 1 ? 10 : 12;
  while ((pre + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out += static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

template <class T>
std::string bytes_of(const std::vector<T>& v, bool big_endian = false) {
  std::string s(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  if (big_endian)
    for (size_t i = 0; i < v.size(); ++i) std::reverse(s.begin() + i * sizeof(T), s.begin() + (i + 1) * sizeof(T));
  return s;
}

// Debian's interpreter first: python3-numpy installs there, whatever python3 comes first on PATH.
std::string python3() { return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3"; }

bool have_numpy() { return std::system((python3() + " -c 'import numpy' > /dev/null 2>&1").c_str()) == 0; }

int run_python(const std::string& code) {
  const fs::path script = fs::temp_directory_path() / ("ember_npy_" + std::to_string(::getpid()) + ".py");
  write_file(script, code);
  const int rc = std::system((python3() + " " + script.string()).c_str());
  fs::remove(script);
  return rc;
}

}  // namespace

TEST(Npy, RoundTripsEveryNumpyDtypeAndShape) {
  const fs::path d = tmpdir("roundtrip");
  std::vector<Tensor> ts = {randn({3, 4}),
                            randn({2, 3, 5}, {.dtype = kFloat64}),
                            randn({7}).to(kFloat16),
                            randint(-1000, 1000, {4, 2}),
                            randint(-5, 5, {6}, {.dtype = kInt32}),
                            randint(0, 256, {2, 2, 2}, {.dtype = kUInt8}),
                            randint(0, 2, {5}).to(kBool),
                            full(Shape{}, 3.5),
                            zeros({0, 3}),
                            randn({4, 6}).t()};  // non-contiguous: saved in C order
  for (size_t i = 0; i < ts.size(); ++i) {
    const fs::path p = d / ("t" + std::to_string(i) + ".npy");
    data::save_npy(p.string(), ts[i]);
    Tensor back = data::load_npy(p.string());
    EXPECT_EQ(back.dtype(), ts[i].dtype()) << i;
    EXPECT_EQ(back.shape(), ts[i].shape()) << i;
    EXPECT_EQ(test::values(back), test::values(ts[i])) << i;
    // The data starts on a 64-byte boundary, as NumPy writes it.
    EXPECT_EQ(data::parse_npy_header(read_file(p).data(), fs::file_size(p), p.string()).data_offset % 64, 0u);
    Tensor mapped = data::load_npy(p.string(), {.mmap = true});
    EXPECT_EQ(test::values(mapped), test::values(ts[i])) << i;
  }
  EXPECT_THROW_MSG(data::save_npy((d / "b.npy").string(), zeros({2}).to(kBFloat16)), DTypeError, "bfloat16",
                   "kFloat32");
  EXPECT_THROW_MSG(data::save_npy((d / "no" / "dir" / "x.npy").string(), zeros({2})), IOError, "save_npy: cannot create", "no/dir/x.npy");
  fs::remove_all(d);
}

TEST(Npy, ReadsFortranOrderBigEndianWidenedAndVersion2Headers) {
  // Fortran order: the 2x3 matrix [[0 1 2] [3 4 5]] is stored column by column.
  const std::string fb =
      npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", bytes_of<float>({0, 3, 1, 4, 2, 5}));
  Tensor f = data::parse_npy(fb.data(), fb.size());
  EXPECT_TRUE(test::tensor_near(f, {2, 3}, {0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(f.is_contiguous());
  // Big-endian int64 and float64.
  std::string be =
      npy("{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }", bytes_of<int64_t>({1, -2, 1LL << 40}, true));
  EXPECT_EQ(data::parse_npy(be.data(), be.size()).to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 1LL << 40}));
  be = npy("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", bytes_of<double>({1.5, -0.25}, true));
  EXPECT_EQ(test::values(data::parse_npy(be.data(), be.size())), (std::vector<double>{1.5, -0.25}));
  // int16 / uint16 / int8 widen to int32, uint32 to int64.
  std::string s = npy("{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }", bytes_of<int16_t>({-7, 300, 5}));
  Tensor w = data::parse_npy(s.data(), s.size());
  EXPECT_EQ(w.dtype(), kInt32);
  EXPECT_EQ(w.to_vector<int32_t>(), (std::vector<int32_t>{-7, 300, 5}));
  s = npy("{'descr': '>u2', 'fortran_order': False, 'shape': (2,), }", bytes_of<uint16_t>({65535, 2}, true));
  EXPECT_EQ(data::parse_npy(s.data(), s.size()).to_vector<int32_t>(), (std::vector<int32_t>{65535, 2}));
  // Found by fuzzing: a width spelled "02" is 2 bytes (the decoder once matched the spelling and read 4).
  s = npy("{'descr': '<u02', 'fortran_order': False, 'shape': (3,), }", bytes_of<uint16_t>({7, 8, 9}));
  EXPECT_EQ(data::parse_npy(s.data(), s.size()).to_vector<int32_t>(), (std::vector<int32_t>{7, 8, 9}));
  s = npy("{'descr': '|i1', 'fortran_order': False, 'shape': (2,), }", bytes_of<int8_t>({-128, 127}));
  EXPECT_EQ(data::parse_npy(s.data(), s.size()).to_vector<int32_t>(), (std::vector<int32_t>{-128, 127}));
  s = npy("{'descr': '<u4', 'fortran_order': False, 'shape': (1,), }", bytes_of<uint32_t>({4000000000u}));
  Tensor u = data::parse_npy(s.data(), s.size());
  EXPECT_EQ(u.dtype(), kInt64);
  EXPECT_EQ(u.to_vector<int64_t>(), (std::vector<int64_t>{4000000000LL}));
  // Bool bytes other than 0/1 become true; format 2.0 (4-byte header length); key order and quotes vary.
  s = npy("{'shape': (3,), \"descr\": '|b1', 'fortran_order': False}", std::string("\x00\x01\x07", 3), 2);
  EXPECT_EQ(data::parse_npy(s.data(), s.size()).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1}));
}

TEST(Npy, MemoryMappingSharesThePageCacheAndNeverWritesTheFile) {
  const fs::path d = tmpdir("mmap");
  const std::string p = (d / "x.npy").string();
  Tensor x = arange(0, 24, 1, {.dtype = kFloat32}).reshape({2, 3, 4});
  data::save_npy(p, x);
  Tensor m = data::load_npy(p, {.mmap = true});
  EXPECT_EQ(test::values(m), test::values(x));
  m.fill_(7.0);  // copy-on-write: this process only
  EXPECT_EQ(test::values(data::load_npy(p)), test::values(x));
  // Fortran order maps as a transposed view.
  write_file(d / "f.npy",
             npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", bytes_of<float>({0, 3, 1, 4, 2, 5})));
  Tensor f = data::load_npy((d / "f.npy").string(), {.mmap = true});
  EXPECT_FALSE(f.is_contiguous());
  EXPECT_TRUE(test::tensor_near(f, {2, 3}, {0, 1, 2, 3, 4, 5}));
  // What a mapping cannot do is an IOError that says to load without .mmap.
  write_file(d / "be.npy",
             npy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", bytes_of<float>({1}, true)));
  EXPECT_THROW_MSG(data::load_npy((d / "be.npy").string(), {.mmap = true}), IOError, "byte swapping", "without .mmap");
  write_file(d / "b.npy", npy("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\x01\x02", 2)));
  EXPECT_THROW_MSG(data::load_npy((d / "b.npy").string(), {.mmap = true}), IOError, "byte 2", "without .mmap");
  fs::remove_all(d);
}

TEST(Npy, MalformedFilesAreClearIOErrors) {
  auto bad = [](const std::string& bytes) { return data::parse_npy(bytes.data(), bytes.size(), "f.npy"); };
  EXPECT_THROW_MSG(bad("hello world, not numpy"), IOError, "f.npy", "not a .npy file");
  EXPECT_THROW_MSG(bad(""), IOError, "not a .npy file");
  std::string v9 = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", bytes_of<float>({1}));
  v9[6] = 9;
  EXPECT_THROW_MSG(bad(v9), IOError, "version 9");
  std::string ok = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", bytes_of<float>({1, 2, 3, 4}));
  EXPECT_THROW_MSG(bad(ok.substr(0, 40)), IOError, "truncated", "header");
  EXPECT_THROW_MSG(bad(ok.substr(0, ok.size() - 1)), IOError, "truncated", "16 data bytes", "15 follow");
  // A huge declared shape fails on the size check, before any allocation.
  EXPECT_THROW_MSG(bad(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 1024), }", "x")), IOError,
                   "truncated");
  EXPECT_THROW_MSG(
      bad(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (281474976710656, 281474976710656, 65536), }", "")),
      IOError, "overflows");
  EXPECT_THROW_MSG(
      bad(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 281474976710656, 281474976710656), }", "")),
      IOError, "overflows");  // empty, but its strides would overflow
  EXPECT_THROW_MSG(bad(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }", "")),
                   IOError, "malformed", "2^48");
  EXPECT_THROW_MSG(bad(npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", "")), IOError, "'|O'");
  EXPECT_THROW_MSG(bad(npy("{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }", "")), IOError, "uint64");
  EXPECT_THROW_MSG(bad(npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", "")), IOError, "complex");
  EXPECT_THROW_MSG(bad(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "")), IOError,
                   "structured");
  EXPECT_THROW_MSG(bad(npy("{'descr': '<f4', 'shape': (1,), }", "")), IOError, "fortran_order");
  EXPECT_THROW_MSG(bad(npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", "")), IOError, "True or False");
  EXPECT_THROW_MSG(bad(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "")), IOError,
                   "unknown key 'extra'");
  EXPECT_THROW_MSG(bad(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "")), IOError, "non-negative");
  EXPECT_THROW_MSG(data::load_npy("/nonexistent/x.npy"), IOError, "cannot open", "/nonexistent/x.npy");
  EXPECT_THROW_MSG(data::load_npy("/tmp"), IOError, "not a regular file");
}

TEST(Npz, MalformedArchivesAreClearIOErrors) {
  auto bad = [](const std::string& bytes) { return data::parse_npz(bytes.data(), bytes.size(), "a.npz"); };
  EXPECT_THROW_MSG(bad("PK"), IOError, "a.npz", "not a ZIP");
  EXPECT_THROW_MSG(bad(std::string(100, 'x')), IOError, "no end-of-central-directory");
  // An end record pointing past the end of the file.
  std::string eocd("PK\x05\x06\0\0\0\0\x01\0\x01\0\x2e\0\0\0\xff\xff\0\0\0\0", 22);
  EXPECT_THROW_MSG(bad(eocd), IOError, "central directory", "past the end");
  EXPECT_THROW_MSG(data::load_npz("/nonexistent.npz"), IOError, "cannot open");
}

TEST(Npz, NumpyInteropBothWays) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy is not installed (apt-get install python3-numpy)";
  const fs::path d = tmpdir("interop");
  const std::string dir = d.string();
  // NumPy writes: plain, Fortran, big-endian, int16, and both kinds of archive.
  ASSERT_EQ(run_python("import numpy as np\n"
                       "a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7\n"
                       "np.save('" +
                       dir +
                       "/a.npy', a)\n"
                       "np.save('" +
                       dir +
                       "/f.npy', np.asfortranarray(a.astype(np.float64)))\n"
                       "np.save('" +
                       dir +
                       "/be.npy', np.arange(5, dtype='>i4'))\n"
                       "np.save('" +
                       dir +
                       "/i16.npy', np.array([-3, 9], dtype=np.int16))\n"
                       "np.savez('" +
                       dir +
                       "/s.npz', a=a, b=np.array([True, False]))\n"
                       "np.savez_compressed('" +
                       dir +
                       "/c.npz', a=a, z=np.zeros((100, 100), np.float32), "
                       "h=np.array([1.5, -2], np.float16))\n"),
            0);
  std::vector<double> a;
  for (int i = 0; i < 12; ++i) a.push_back(static_cast<float>(i) / 7.0f);
  EXPECT_TRUE(test::tensor_near(data::load_npy(dir + "/a.npy"), {3, 4}, a, 0, 0));
  EXPECT_TRUE(test::tensor_near(data::load_npy(dir + "/f.npy"), {3, 4}, a, 0, 0));
  EXPECT_TRUE(test::tensor_near(data::load_npy(dir + "/f.npy", {.mmap = true}), {3, 4}, a, 0, 0));
  EXPECT_EQ(data::load_npy(dir + "/be.npy").to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(data::load_npy(dir + "/i16.npy").to_vector<int32_t>(), (std::vector<int32_t>{-3, 9}));
  for (const char* archive : {"/s.npz", "/c.npz"}) {
    auto m = data::load_npz(dir + archive);
    EXPECT_TRUE(test::tensor_near(m.at("a"), {3, 4}, a, 0, 0)) << archive;
  }
  auto s = data::load_npz(dir + "/s.npz");
  EXPECT_EQ(s.at("b").dtype(), kBool);
  auto c = data::load_npz(dir + "/c.npz");
  EXPECT_EQ(c.at("z").shape(), (Shape{100, 100}));
  EXPECT_EQ(test::values(c.at("h")), (std::vector<double>{1.5, -2}));

  // A corrupted deflated member fails its CRC or its inflate; a forged size is refused before allocating.
  std::string bytes = read_file(d / "c.npz");
  const size_t at = bytes.find("z.npy") + 40;
  std::string corrupt = bytes;
  corrupt[at] ^= 0x55;
  EXPECT_THROW(data::parse_npz(corrupt.data(), corrupt.size(), "c.npz"), IOError);
  std::string truncated = bytes.substr(0, bytes.size() / 2);
  EXPECT_THROW(data::parse_npz(truncated.data(), truncated.size(), "c.npz"), IOError);

  // Forged archives (written with Python's zipfile, then patched): a deflated member declaring far more than its
  // compressed bytes can hold is refused before allocating; two directory entries sharing one member's bytes (an
  // "overlapping zip bomb") are refused.
  ASSERT_EQ(run_python("import struct, zipfile\n"
                       "z = zipfile.ZipFile('" +
                       dir +
                       "/one.npz', 'w', zipfile.ZIP_DEFLATED)\n"
                       "z.writestr('a.npy', open('" +
                       dir +
                       "/a.npy', 'rb').read()); z.close()\n"
                       "b = bytearray(open('" +
                       dir +
                       "/one.npz', 'rb').read())\n"
                       "cd = b.rfind(b'PK\\x01\\x02')\n"
                       "big = bytearray(b); big[cd + 24:cd + 28] = struct.pack('<I', 0xfffffff0)\n"
                       "open('" +
                       dir +
                       "/forged.npz', 'wb').write(big)\n"
                       "eocd = b.rfind(b'PK\\x05\\x06'); entry = b[cd:eocd]\n"
                       "twin = bytearray(entry); twin[46:47] = b'b'\n"
                       "out = b[:eocd] + twin + b[eocd:]\n"
                       "e = len(out) - 22\n"
                       "out[e + 8:e + 12] = struct.pack('<HH', 2, 2)\n"
                       "out[e + 12:e + 16] = struct.pack('<I', 2 * len(entry))\n"
                       "open('" +
                       dir + "/overlap.npz', 'wb').write(out)\n"),
            0);
  EXPECT_EQ(data::load_npz(dir + "/one.npz").size(), 1u);
  EXPECT_THROW_MSG(data::load_npz(dir + "/forged.npz"), IOError, "a.npy", "not possible with deflate");
  EXPECT_THROW_MSG(data::load_npz(dir + "/overlap.npz"), IOError, "overlap");

  // Ember writes, NumPy reads and checks.
  data::save_npy(dir + "/e32.npy", arange(0, 6, 1, {.dtype = kFloat32}).reshape({2, 3}) * 0.5);
  data::save_npy(dir + "/e64.npy", arange(0, 4, 1, {.dtype = kInt64}));
  data::save_npy(dir + "/ebool.npy", tensor(std::vector<int64_t>{0, 3}).to(kBool));
  data::save_npy(dir + "/eh.npy", full({2}, 0.5).to(kFloat16));
  data::save_npy(dir + "/escalar.npy", full(Shape{}, 2.0, {.dtype = kFloat64}));
  EXPECT_EQ(run_python("import numpy as np\n"
                       "a = np.load('" +
                       dir +
                       "/e32.npy'); assert a.dtype == np.float32 and a.shape == (2, 3)\n"
                       "assert (a == np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5).all()\n"
                       "b = np.load('" +
                       dir +
                       "/e64.npy'); assert b.dtype == np.int64 and list(b) == [0, 1, 2, 3]\n"
                       "c = np.load('" +
                       dir +
                       "/ebool.npy'); assert c.dtype == bool and list(c) == [False, True]\n"
                       "h = np.load('" +
                       dir +
                       "/eh.npy'); assert h.dtype == np.float16 and list(h) == [0.5, 0.5]\n"
                       "s = np.load('" +
                       dir + "/escalar.npy'); assert s.shape == () and s == 2.0\n"),
            0);
  fs::remove_all(d);
}

// save_npy replaces a file atomically, as save() does: a failing write (here: the tensor cannot be written, a
// folder that does not exist) leaves the old file whole and no partial or temporary file behind.
TEST(Npy, SaveIsAtomic) {
  const fs::path d = tmpdir("atomic");
  const std::string p = (d / "x.npy").string();
  data::save_npy(p, arange(10).to(kFloat32));
  const std::string before = read_file(p);
  EXPECT_THROW(data::save_npy(p, arange(4).to(kBFloat16)), DTypeError);  // refused before anything is written
  EXPECT_EQ(read_file(p), before);
  // A write that fails half way: /dev/full as the folder's stand-in is not possible, so a file too large for the
  // process's file-size limit makes write() fail after the header.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct rlimit lim = {4096, 4096};
    ::signal(SIGXFSZ, SIG_IGN);  // write() fails with EFBIG instead of killing the process
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(2);
    try {
      data::save_npy(p, zeros({100000}));
    } catch (const IOError& e) {
      _exit(std::string(e.what()).find("save_npy") != std::string::npos ? 0 : 3);
    }
    _exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(read_file(p), before);  // the old file, whole
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(d)) entries += e.path().filename() != "x.npy";
  EXPECT_EQ(entries, 0u);  // no partial or temporary file left
  EXPECT_EQ(data::load_npy(p).to_vector<float>(), arange(10).to(kFloat32).to_vector<float>());
  fs::remove_all(d);
}
