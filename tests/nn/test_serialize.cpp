// save / load in the safetensors format: exact round trips (buffers included), the on-disk layout, errors
// naming the tensor that differs, truncated and garbage files, atomic replacement, interop with Python's
// safetensors (when /usr/bin/python3 has it), and checkpoints (model + optimiser state + step).
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "file_test_util.h"
#include "test_util.h"

using namespace ember;
using test::values;
namespace fs = std::filesystem;

namespace {

class Serialize : public test::TempDirTest {};
using test::read_bytes;
using test::st_file;
using test::write_bytes;

nn::Chain make_model() { return nn::Chain{nn::Dense(4, 8, nn::relu), nn::BatchNorm1d(8), nn::Dense(8, 3)}; }
// Runs a few training-mode batches so the BatchNorm buffers hold something other than their initial values.
void warm_up(nn::Chain& m) {
  m.train();
  for (int i = 0; i < 3; ++i) m(randn({16, 4}) * 2.0 + 1.0);
}

std::vector<std::vector<double>> all_values(const nn::Module& m) {
  std::vector<std::vector<double>> out;
  for (const auto& [_, t] : m.state_dict()) out.push_back(test::values(t));
  return out;
}

}  // namespace

TEST_F(Serialize, RoundTripReproducesOutputsExactly) {
  manual_seed(1);
  nn::Chain a = make_model();
  warm_up(a);
  a.eval();
  const std::string p = path("model.safetensors");
  nn::save(a, p);

  manual_seed(2);
  nn::Chain b = make_model();
  b.eval();
  Tensor x = randn({5, 4});
  EXPECT_NE(test::values(a(x)), test::values(b(x)));
  std::vector<Tensor> params = b.parameters();
  nn::load(b, p);
  EXPECT_EQ(test::values(a(x)), test::values(b(x)));
  EXPECT_EQ(all_values(a), all_values(b));
  // Loaded in place: the handles taken before still are the parameters, and still require grad.
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(params[i].is_same(b.parameters()[i]));
    EXPECT_TRUE(params[i].requires_grad());
  }
  // Buffers came along: running stats and the batch counter.
  auto bufs = b.named_buffers();
  ASSERT_EQ(bufs.size(), 3u);
  EXPECT_EQ(bufs[0].first, "1.running_mean");
  EXPECT_EQ(bufs[2].second.item<int64_t>(), 3);
  EXPECT_EQ(test::values(bufs[1].second), test::values(a.named_buffers()[1].second));
}

TEST_F(Serialize, FileLayoutIsSafetensors) {
  manual_seed(3);
  nn::Chain m = make_model();
  const std::string p = path("m.safetensors");
  nn::save(m, p);
  const std::string bytes = read_bytes(p);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  ASSERT_LE(8 + n, bytes.size());
  EXPECT_EQ((8 + n) % 8, 0u);  // data 8-byte aligned
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header[0], '{');
  // Names, dtypes ("F32", "I64"), shapes and offsets, in state_dict order.
  EXPECT_NE(header.find(R"("0.weight":{"dtype":"F32","shape":[8,4],"data_offsets":[0,128]})"), std::string::npos)
      << header;
  EXPECT_NE(header.find(R"("0.bias":{"dtype":"F32","shape":[8],"data_offsets":[128,160]})"), std::string::npos);
  EXPECT_NE(header.find(R"("1.num_batches_tracked":{"dtype":"I64","shape":[])"), std::string::npos);
  // The data section holds the raw little-endian values, nothing else.
  uint64_t total = 0;
  for (const auto& [_, t] : m.state_dict()) total += static_cast<uint64_t>(t.numel()) * t.itemsize();
  EXPECT_EQ(bytes.size(), 8 + n + total);
  std::vector<float> w = m.state_dict()[0].second.to_vector<float>();
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n, w.data(), w.size() * sizeof(float)), 0);
  // load_tensors reads back every tensor with its dtype.
  std::map<std::string, std::string> meta;
  nn::NamedTensors back = nn::load_tensors(p, &meta);
  EXPECT_EQ(back.size(), m.state_dict().size());
  EXPECT_EQ(meta["format"], "pt");
  for (const auto& [name, t] : back) EXPECT_EQ(t.dtype(), name == "1.num_batches_tracked" ? kInt64 : kFloat32) << name;
}

TEST_F(Serialize, DifferentArchitectureNamesTheTensor) {
  manual_seed(4);
  const std::string p = path("m.safetensors");
  nn::Chain saved{nn::Dense(4, 8), nn::Dense(8, 3)};
  nn::save(saved, p);

  nn::Chain wider{nn::Dense(4, 6), nn::Dense(6, 3)};
  auto before = all_values(wider);
  EXPECT_THROW_MSG(nn::load(wider, p), IOError, "\"0.weight\"", "[8, 4]", "[6, 4]", p.c_str());
  EXPECT_EQ(all_values(wider), before);  // nothing was half-loaded

  nn::Chain longer{nn::Dense(4, 8), nn::Dense(8, 3), nn::Dense(3, 2)};
  EXPECT_THROW_MSG(nn::load(longer, p), IOError, "\"2.weight\"", "missing");

  nn::Chain shorter{nn::Dense(4, 8)};
  before = all_values(shorter);
  EXPECT_THROW_MSG(nn::load(shorter, p), IOError, "\"1.", "the model does not");
  EXPECT_EQ(all_values(shorter), before);

  nn::Chain no_bias{nn::Dense(4, 8, nn::identity, {.bias = false}), nn::Dense(8, 3)};
  EXPECT_THROW_MSG(nn::load(no_bias, p), IOError, "\"0.bias\"");

  nn::Chain f64{nn::Dense(4, 8), nn::Dense(8, 3)};
  f64.to(kFloat64);
  EXPECT_THROW_MSG(nn::load(f64, p, {.dtype_cast = false}), IOError, "\"0.weight\"", "dtype", "float32", "float64",
                   "dtype_cast");

  EXPECT_THROW_MSG(nn::load(f64, path("absent.safetensors")), IOError, "absent.safetensors");
  EXPECT_THROW_MSG(nn::load(f64, dir_.string()), IOError, "not a regular file");
}

// load as PyTorch's load_state_dict: strict lists every difference at once; not strict loads what matches and
// reports the rest (a checkpoint with a head the model does not use: BERT's pooler); rename maps the file's names.
TEST_F(Serialize, NonStrictRenameAndTheListOfDifferences) {
  manual_seed(6);
  const std::string p = path("m.safetensors");
  nn::Chain saved{nn::Dense(4, 8), nn::Dense(8, 3), nn::Dense(3, 2)};
  nn::save(saved, p);

  nn::Chain two{nn::Dense(4, 8), nn::Dense(8, 3)};
  nn::Chain fewer_inputs{nn::Dense(4, 8), nn::Dense(8, 3), nn::Dense(3, 2), nn::Dense(2, 2)};
  // strict: one error naming all of them
  EXPECT_THROW_MSG(nn::load(two, p), IOError, "2 tensor(s) in the file that the model does not have", "\"2.weight\"",
                   "\"2.bias\"", ".strict = false");
  EXPECT_THROW_MSG(nn::load(fewer_inputs, p), IOError, "2 tensor(s) of the model missing", "\"3.weight\"", "\"3.bias\"");

  const nn::LoadResult r = nn::load(two, p, {.strict = false});
  EXPECT_EQ(r.unexpected, (std::vector<std::string>{"2.bias", "2.weight"}));
  EXPECT_TRUE(r.missing.empty());
  EXPECT_FALSE(r.complete());
  EXPECT_EQ(values(two.state_dict()[0].second), values(saved.state_dict()[0].second));
  const nn::LoadResult r2 = nn::load(fewer_inputs, p, {.strict = false});
  EXPECT_EQ(r2.missing, (std::vector<std::string>{"3.weight", "3.bias"}));
  EXPECT_TRUE(r2.unexpected.empty());

  // rename: a file of another framework's names ("encoder.0.weight") mapped onto the model's; "" drops one
  nn::save_tensors(path("hf.safetensors"), {{"encoder.0.weight", saved.state_dict()[0].second},
                                            {"encoder.0.bias", saved.state_dict()[1].second},
                                            {"encoder.1.weight", saved.state_dict()[2].second},
                                            {"encoder.1.bias", saved.state_dict()[3].second},
                                            {"pooler.weight", zeros({2})}});
  auto hf = [](const std::string& n) { return n.rfind("encoder.", 0) == 0 ? n.substr(8) : std::string(); };
  nn::Chain mapped{nn::Dense(4, 8), nn::Dense(8, 3)};
  EXPECT_TRUE(nn::load(mapped, path("hf.safetensors"), {.rename = hf}).complete());
  EXPECT_EQ(values(mapped.state_dict()[2].second), values(saved.state_dict()[2].second));
  EXPECT_THROW_MSG(nn::load(mapped, path("hf.safetensors"), {.rename = [](const std::string&) { return "x"; }}),
                   IOError, "two tensors of the file are named \"x\"");
  // assign_tensors with the tensors in a vector or a map: the same rules
  EXPECT_TRUE(nn::assign_tensors(mapped, saved.state_dict(), {.strict = false}).unexpected.size() == 2);
  const auto sd = saved.state_dict();
  std::map<std::string, Tensor> as_map(sd.begin(), sd.end());
  nn::Chain from_map{nn::Dense(4, 8), nn::Dense(8, 3), nn::Dense(3, 2)};
  EXPECT_TRUE(nn::assign_tensors(from_map, as_map).complete());
  EXPECT_EQ(values(from_map.state_dict()[5].second), values(sd[5].second));
  nn::save_tensors(path("map.safetensors"), as_map);
  EXPECT_EQ(nn::load_tensors(path("map.safetensors")).size(), 6u);
}

// dtype_cast (the default): a bfloat16 / float16 file loads into a float32 model and the other way, as PyTorch's copy_.
TEST_F(Serialize, DtypesAreCastOnLoad) {
  manual_seed(7);
  nn::Chain f32{nn::Dense(4, 8), nn::Dense(8, 3)};
  nn::Chain b16 = nn::Chain{nn::Dense(4, 8), nn::Dense(8, 3)};
  b16.to(kBFloat16);
  nn::save(b16, path("bf16.safetensors"));
  nn::load(f32, path("bf16.safetensors"));
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(f32.state_dict()[i].second.dtype(), kFloat32);
    EXPECT_EQ(values(f32.state_dict()[i].second), values(b16.state_dict()[i].second));  // bf16 values are exact in f32
  }
  nn::Chain f16{nn::Dense(4, 8), nn::Dense(8, 3)};
  f16.to(kFloat16);
  nn::save(f32, path("f32.safetensors"));
  nn::load(f16, path("f32.safetensors"));
  EXPECT_EQ(f16.state_dict()[0].second.dtype(), kFloat16);
  EXPECT_EQ(values(f16.state_dict()[0].second), values(f32.state_dict()[0].second.to(kFloat16)));
}

// load_tensors maps the file copy-on-write: writing into a loaded tensor never reaches the file, and the tensors
// outlive nothing they need (the mapping stays while any of them does).
TEST_F(Serialize, MappedTensorsAreCopyOnWrite) {
  const std::string p = path("t.safetensors");
  nn::save_tensors(p, {{"a", arange(6, {.dtype = kFloat32})}, {"b", tensor<int64_t>({7, 8})}});
  const std::string bytes = read_bytes(p);
  Tensor a;
  {
    nn::NamedTensors t = nn::load_tensors(p);
    a = t[0].second;
  }
  a.fill_(-1.0);  // the mapping is private: the file keeps its bytes
  EXPECT_EQ(values(a), std::vector<double>(6, -1.0));
  EXPECT_EQ(read_bytes(p), bytes);
  EXPECT_EQ(values(nn::load_tensors(p)[0].second), (std::vector<double>{0, 1, 2, 3, 4, 5}));
}

TEST_F(Serialize, TruncatedAndGarbageFilesThrow) {
  manual_seed(5);
  nn::Chain m = make_model();
  const std::string p = path("m.safetensors");
  nn::save(m, p);
  const std::string good = read_bytes(p);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(good[i]);

  auto expect_bad = [&](const std::string& bytes, const char* what) {
    const std::string q = path("bad.safetensors");
    write_bytes(q, bytes);
    nn::Chain fresh = make_model();
    auto before = all_values(fresh);
    try {
      nn::load(fresh, q);
      ADD_FAILURE() << what << ": no exception";
    } catch (const IOError& e) {
      EXPECT_NE(std::string(e.what()).find(q), std::string::npos) << what << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": expected IOError, got " << e.what();
    }
    EXPECT_EQ(all_values(fresh), before) << what;
  };
  expect_bad("", "empty");
  expect_bad(good.substr(0, 5), "shorter than the length");
  expect_bad(good.substr(0, 8 + n / 2), "truncated header");
  expect_bad(good.substr(0, 8 + n + 10), "truncated data");
  expect_bad(good.substr(0, good.size() - 1), "one byte short");
  expect_bad(std::string(200, 'x'), "text");
  std::string noise(300, '\0');
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 7919 + 13) % 251);
  expect_bad(noise, "noise");
  expect_bad(st_file("{not json"), "malformed JSON");
  expect_bad(st_file("[1, 2, 3]"), "not an object");
  expect_bad(st_file(R"({"0.weight": 5})"), "entry not an object");
  expect_bad(st_file(R"({"0.weight": {"dtype": "X7", "shape": [1], "data_offsets": [0, 4]}})", std::string(4, '\0')),
             "unknown dtype");
  expect_bad(st_file(R"({"0.weight": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", std::string(8, '\0')),
             "offsets do not match the shape");
  expect_bad(st_file(R"({"0.weight": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", std::string(8, '\0')),
             "negative size");
  expect_bad(st_file(R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 0]}})"),
             "size overflow");
  expect_bad(st_file(R"({"w": {"dtype": "F32", "shape": [0, 4611686018427387904, 4611686018427387904], "data_offsets": [0, 0]}})"),
             "empty, but its strides would overflow");
  expect_bad(st_file(R"({"0.weight": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", std::string(4, '\0')),
             "offsets past the end");
  nn::Chain other = make_model();
  EXPECT_THROW(nn::load(other, dir_.string()), IOError);  // a directory
  // Bool bytes other than 0/1 load as true (a C++ bool holding 7 would be undefined behaviour later).
  write_bytes(path("b.safetensors"),
              st_file(R"({"m": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}})", std::string("\x00\x07\x01", 3)));
  nn::NamedTensors bools = nn::load_tensors(path("b.safetensors"));
  EXPECT_EQ(bools.at(0).second.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1}));
  // A good file still loads after all that.
  nn::Chain fresh = make_model();
  nn::load(fresh, p);
  EXPECT_EQ(all_values(fresh), all_values(m));
}

TEST_F(Serialize, WriteIsAtomicAndReplaces) {
  manual_seed(6);
  nn::Chain a = make_model(), b = make_model();
  const std::string p = path("model.safetensors");
  nn::save(a, p);
  EXPECT_EQ(files(), std::vector<std::string>{"model.safetensors"});  // no *.tmp.* left behind
  nn::save(b, p);                                                     // over an existing file
  EXPECT_EQ(files(), std::vector<std::string>{"model.safetensors"});
  nn::Chain c = make_model();
  nn::load(c, p);
  EXPECT_EQ(all_values(c), all_values(b));
  // A failing save (no such directory) leaves nothing, and the old file is untouched.
  EXPECT_THROW_MSG(nn::save(a, path("no/such/dir/model.safetensors")), IOError, "no/such/dir");
  EXPECT_EQ(files(), std::vector<std::string>{"model.safetensors"});
  nn::load(c, p);
  EXPECT_EQ(all_values(c), all_values(b));
}

TEST_F(Serialize, SaveTensorsRejectsBadInput) {
  EXPECT_THROW_MSG(nn::save_tensors(path("x.safetensors"), {{"a", zeros({2})}, {"a", zeros({2})}}), Error, "\"a\"",
                   "twice");
  EXPECT_THROW_MSG(nn::save_tensors(path("x.safetensors"), {{"a", Tensor()}}), Error, "\"a\"", "undefined");
  EXPECT_TRUE(files().empty());
  // Non-contiguous tensors and every dtype round-trip.
  Tensor t = arange(12).to(kFloat64).reshape({3, 4}).t();
  nn::NamedTensors in = {{"t", t},
                         {"i32", tensor<int32_t>({1, -2, 3}, {3})},
                         {"u8", tensor<uint8_t>({0, 255}, {2})},
                         {"b", tensor<bool>({true, false, true}, {3})},
                         {"h", tensor<float>({1.5f, -2.0f}, {2}).to(kFloat16)},
                         {"bf", tensor<float>({1.5f, -2.0f}, {2}).to(kBFloat16)},
                         {"empty", zeros({0, 3})}};
  nn::save_tensors(path("x.safetensors"), in, {{"note", "hello"}});
  std::map<std::string, std::string> meta;
  nn::NamedTensors out = nn::load_tensors(path("x.safetensors"), &meta);
  EXPECT_EQ(meta["note"], "hello");
  std::map<std::string, Tensor> got(out.begin(), out.end());
  ASSERT_EQ(got.size(), in.size());
  for (const auto& [name, v] : in) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(got[name].dtype(), v.dtype()) << name;
    EXPECT_EQ(got[name].shape(), v.shape()) << name;
    EXPECT_EQ(test::values(got[name]), test::values(v)) << name;
  }
}

// ----------------------------------------------------------------------------------- Python interop

TEST_F(Serialize, PythonSafetensorsReadsAndWritesOurFiles) {
  // Prefer torch; numpy is enough to exercise the format.
  std::string framework;
  if (std::system("/usr/bin/python3 -c 'import safetensors, torch' >/dev/null 2>&1") == 0) framework = "torch";
  else if (std::system("/usr/bin/python3 -c 'import safetensors, numpy' >/dev/null 2>&1") == 0) framework = "numpy";
  if (framework.empty()) GTEST_SKIP() << "/usr/bin/python3 cannot import safetensors with torch or numpy";

  manual_seed(7);
  nn::Chain m = make_model();
  warm_up(m);
  const std::string src = path("ember.safetensors"), dst = path("python.safetensors"), script = path("check.py");
  nn::save(m, src);

  std::ostringstream py;
  py << "import json, struct, sys\n"
     << "framework = '" << framework << "'\n"
     << "if framework == 'torch':\n"
     << "    import torch\n    from safetensors.torch import load_file, save_file\n"
     << "    kind = {'F32': torch.float32, 'I64': torch.int64}\n"
     << "    double = lambda v: v * 2\n"
     << "else:\n"
     << "    import numpy as np\n    from safetensors.numpy import load_file, save_file\n"
     << "    kind = {'F32': np.float32, 'I64': np.int64}\n"
     << "    double = lambda v: np.asarray(v * 2)  # a 0-d array times 2 is a numpy scalar\n"
     << "src, dst = sys.argv[1], sys.argv[2]\n"
     << "expected = {\n";
  for (const auto& [name, t] : m.state_dict()) {
    py << "    '" << name << "': ([";
    for (int64_t d = 0; d < t.dim(); ++d) py << (d ? ", " : "") << t.size(d);
    py << "], '" << (t.dtype() == kFloat32 ? "F32" : "I64") << "'),\n";
  }
  py << "}\n"
     << "raw = open(src, 'rb').read()\n"
     << "n = struct.unpack('<Q', raw[:8])[0]\n"
     << "header = json.loads(raw[8:8 + n])\n"
     << "tensors = load_file(src)\n"
     << "assert set(tensors) == set(expected), (sorted(tensors), sorted(expected))\n"
     << "for name, (shape, dtype) in expected.items():\n"
     << "    assert header[name]['dtype'] == dtype, (name, header[name])\n"
     << "    assert list(tensors[name].shape) == shape, (name, tensors[name].shape, shape)\n"
     << "    assert tensors[name].dtype == kind[dtype], (name, tensors[name].dtype)\n"
     << "save_file({k: double(v) for k, v in tensors.items()}, dst)\n"
     << "print('ok', len(tensors))\n";
  write_bytes(script, py.str());
  const std::string cmd = "/usr/bin/python3 " + script + " " + src + " " + dst + " > " + path("py.log") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_EQ(rc, 0) << "python failed:\n" << read_bytes(path("py.log"));
  EXPECT_NE(read_bytes(path("py.log")).find("ok " + std::to_string(m.state_dict().size()) + "\n"), std::string::npos);

  nn::Chain back = make_model();
  nn::load(back, dst);
  auto orig = m.state_dict(), got = back.state_dict();
  ASSERT_EQ(orig.size(), got.size());
  for (size_t i = 0; i < orig.size(); ++i) {
    std::vector<double> want = test::values(orig[i].second);
    for (double& v : want) v *= 2;
    EXPECT_EQ(test::values(got[i].second), want) << orig[i].first;
  }
}

// --------------------------------------------------------------------------------------- checkpoints

namespace {
// The smallest optimiser-like thing a checkpoint needs: state_dict() / load_state_dict().
struct FakeOptimizer {
  Tensor momentum = zeros({8, 4});
  Tensor lr = full({}, 0.1, {.dtype = kFloat64});
  nn::NamedTensors state_dict() const { return {{"momentum", momentum}, {"lr", lr}}; }
  void load_state_dict(const nn::NamedTensors& s) { nn::assign_tensors(state_dict(), s, "FakeOptimizer"); }
};
}  // namespace

TEST_F(Serialize, CheckpointRoundTrip) {
  manual_seed(8);
  nn::Chain m = make_model();
  warm_up(m);
  FakeOptimizer opt;
  opt.momentum = randn({8, 4});
  opt.lr.fill_(0.025);
  const std::string p = path("ckpt.safetensors");
  nn::save_checkpoint(p, m, opt, 1234567890123);
  EXPECT_EQ(files(), std::vector<std::string>{"ckpt.safetensors"});

  manual_seed(9);
  nn::Chain m2 = make_model();
  FakeOptimizer opt2;
  const int64_t step = nn::load_checkpoint(p, m2, opt2);
  EXPECT_EQ(step, 1234567890123);
  EXPECT_EQ(all_values(m2), all_values(m));
  EXPECT_EQ(test::values(opt2.momentum), test::values(opt.momentum));
  EXPECT_EQ(opt2.lr.item(), 0.025);

  // A plain model file is not a checkpoint, and a checkpoint is not a plain model file.
  nn::save(m, path("model.safetensors"));
  EXPECT_THROW_MSG(nn::load_checkpoint(path("model.safetensors"), m2, opt2), IOError, "not an ember checkpoint");
  EXPECT_THROW_MSG(nn::load(m2, p), IOError, "\"0.weight\"", "missing");
  // A checkpoint of another architecture names the model tensor.
  nn::Chain other{nn::Dense(4, 5)};
  EXPECT_THROW_MSG(nn::load_checkpoint(p, other, opt2), IOError, "\"0.weight\"");
  // An optimiser whose state does not match says so.
  struct OtherOptimizer {
    Tensor v = zeros({3});
    nn::NamedTensors state_dict() const { return {{"v", v}}; }
    void load_state_dict(const nn::NamedTensors& s) { nn::assign_tensors(state_dict(), s, "OtherOptimizer"); }
  } other_opt;
  EXPECT_THROW_MSG(nn::load_checkpoint(p, m2, other_opt), IOError, "OtherOptimizer", "\"v\"");
}

TEST_F(Serialize, CheckpointOfAMissingFileNamesTheCall) {
  nn::Chain m{nn::Dense(2, 2)};
  EXPECT_THROW_MSG(nn::load_checkpoint(path("absent.safetensors"), nn::Checkpoint{.model = &m}), IOError,
                   "load_checkpoint: cannot open", "absent.safetensors");
}

TEST_F(Serialize, CheckpointWithBadStepMetadataThrowsIOError) {
  const std::string p = path("weird.safetensors");
  nn::save_tensors(p, {{"model.w", zeros({1})}}, {{"format", "ember-checkpoint"}, {"step", "twelve"}});
  struct M : nn::Module {
    M() { register_parameter("w", zeros({1})); }
  } m;
  FakeOptimizer opt;
  EXPECT_THROW_MSG(nn::load_checkpoint(p, m, opt), IOError, "step", "twelve");
}
