// Files that cannot hang, lie or pile up (issue 55): readers refuse FIFOs and other non-files before reading;
// every bit of a checkpoint's header, metadata and data is covered by a checksum; shapes must be whole numbers;
// names must be JSON text; a killed writer's temporary files are swept by the next save.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "file_test_util.h"
#include "test_util.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

class FileSafety : public test::TempDirTest {};
using test::read_bytes;
using test::st_file;
using test::write_bytes;

uint64_t header_length(const std::string& file) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[static_cast<size_t>(i)]);
  return n;
}

struct Optim {
  Tensor m = zeros({3});
  nn::NamedTensors state_dict() const { return {{"m", m}}; }
  void load_state_dict(const nn::NamedTensors& s) { nn::assign_tensors(state_dict(), s, "Optim"); }
};

}  // namespace

// Every reader that takes a path refuses a FIFO at once instead of waiting for a writer forever. Each call runs in
// a child process under an alarm, so a regression fails the test instead of hanging the suite.
TEST_F(FileSafety, ReadersRefuseAFifoInsteadOfBlocking) {
  const std::string fifo = path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  nn::Chain model{nn::Dense(2, 2)};
  Optim opt;
  const std::vector<std::pair<const char*, std::function<void()>>> readers = {
      {"nn::load", [&] { nn::load(model, fifo); }},
      {"nn::load_tensors", [&] { (void)nn::load_tensors(fifo); }},
      {"load_checkpoint(path, model, opt)", [&] { (void)nn::load_checkpoint(fifo, model, opt); }},
      {"load_checkpoint(path, Checkpoint)", [&] { (void)nn::load_checkpoint(fifo, nn::Checkpoint{.model = &model}); }},
      {"data::read_idx", [&] { (void)data::read_idx(fifo); }},
      {"data::load_npy", [&] { (void)data::load_npy(fifo); }},
  };
  for (const auto& [name, read] : readers) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::alarm(10);  // a blocked open dies of SIGALRM
      try {
        read();
      } catch (const IOError& e) {
        _exit(std::string(e.what()).find("is a FIFO, not a regular file") != std::string::npos ? 0 : 3);
      } catch (...) {
        _exit(4);
      }
      _exit(5);  // read a FIFO without a word
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status)) << name << " blocked (killed by signal " << WTERMSIG(status) << ")";
    if (WIFEXITED(status)) EXPECT_EQ(WEXITSTATUS(status), 0) << name << " (3: another message, 5: no error)";
  }
  EXPECT_THROW_MSG(nn::load_tensors(dir_.string()), IOError, "is a directory, not a regular file");
}

// A single flipped bit anywhere in a training checkpoint — the step, the random seed and offset, a shape, a name,
// a weight — is an IOError at load naming the file, never a silently different value; the model and optimiser are
// left as they were. (Before: 19 of 48 flips in step/seed/offset loaded, e.g. step 3 -> 2, seed 1234 -> 234.)
TEST_F(FileSafety, EveryBitFlipOfACheckpointIsCaught) {
  manual_seed(1234);
  nn::Chain model{nn::Dense(3, 2)};
  Optim opt;
  opt.m = tensor<float>({1, 2, 3});
  const std::string p = path("ckpt.safetensors");
  nn::save_checkpoint(p, nn::Checkpoint{.model = &model, .optimizer = &opt, .step = 3, .rng = true});
  const std::string good = read_bytes(p);
  const uint64_t n = header_length(good);
  const std::string header = good.substr(8, n);
  ASSERT_NE(header.find("\"step\":\"3\""), std::string::npos) << header;
  ASSERT_NE(header.find("\"rng.seed\":\"1234\""), std::string::npos) << header;

  // The bytes to flip: every byte of the values of step, rng.seed, rng.offset, plus the first byte of each name,
  // shape digit and the data.
  std::vector<size_t> at;
  for (const char* key : {"\"step\":\"", "\"rng.seed\":\"", "\"rng.offset\":\""}) {
    const size_t k = header.find(key);
    ASSERT_NE(k, std::string::npos) << key;
    for (size_t i = k + std::strlen(key); header[i] != '"'; ++i) at.push_back(8 + i);
  }
  for (const char* s : {"\"model.0.weight\"", "\"shape\":[2,3]", "\"format\""}) {
    const size_t k = header.find(s);
    ASSERT_NE(k, std::string::npos) << s;
    at.push_back(8 + k + 2);
  }
  at.push_back(8 + n);                // the first weight's first byte
  at.push_back(good.size() - 1);      // the optimiser state's last byte
  const auto before = model.state_dict()[0].second.to_vector<float>();
  size_t caught = 0, flips = 0;
  for (size_t pos : at)
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[pos] = static_cast<char>(bad[pos] ^ (1 << bit));
      const std::string q = path("flipped.safetensors");
      write_bytes(q, bad);
      ++flips;
      try {
        (void)nn::load_checkpoint(q, nn::Checkpoint{.model = &model, .optimizer = &opt, .rng = true});
        ADD_FAILURE() << "a flip of bit " << bit << " at byte " << pos << " loaded";
      } catch (const IOError& e) {
        ++caught;
        EXPECT_NE(std::string(e.what()).find(q), std::string::npos) << e.what();
      }
    }
  EXPECT_EQ(caught, flips);
  EXPECT_EQ(model.state_dict()[0].second.to_vector<float>(), before);
  EXPECT_EQ(opt.m.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  // What disagreed is named.
  std::string bad = good;
  bad[header.find("\"step\":\"") + 8 + 8] = '2';
  write_bytes(path("step.safetensors"), bad);
  EXPECT_THROW_MSG(nn::load_checkpoint(path("step.safetensors"), model, opt), IOError, "checksum mismatch",
                   "the header", "step.safetensors");
  bad = good;
  bad[8 + n + 1] = static_cast<char>(bad[8 + n + 1] ^ 0x10);
  write_bytes(path("data.safetensors"), bad);
  EXPECT_THROW_MSG(nn::load_checkpoint(path("data.safetensors"), model, opt), IOError, "checksum mismatch",
                   "tensor data");
  // The intact file loads, and gives back the step.
  EXPECT_EQ(nn::load_checkpoint(p, model, opt), 3);
}

// A checkpoint written before the checksums existed (no checksum keys) still loads; the checksums never show in
// the metadata a user reads.
TEST_F(FileSafety, FilesWithoutChecksumsStillLoad) {
  nn::Chain model{nn::Dense(2, 1)};
  const std::string header =
      R"({"model.0.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},)"
      R"("model.0.bias":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
      R"("__metadata__":{"format":"ember-checkpoint","step":"41","parts":"model"}})";
  const float values[3] = {0.5f, -1.5f, 2.0f};
  write_bytes(path("old.safetensors"), st_file(header, std::string(reinterpret_cast<const char*>(values), 12)));
  const nn::LoadedCheckpoint got = nn::load_checkpoint(path("old.safetensors"), nn::Checkpoint{.model = &model, .rng = false});
  EXPECT_EQ(got.step, 41);
  EXPECT_EQ(model.state_dict()[0].second.to_vector<float>(), (std::vector<float>{0.5f, -1.5f}));

  nn::save_tensors(path("new.safetensors"), {{"w", ones({2})}}, {{"note", "x"}});
  std::map<std::string, std::string> meta;
  (void)nn::load_tensors(path("new.safetensors"), &meta);
  EXPECT_EQ(meta, (std::map<std::string, std::string>{{"note", "x"}}));
  // Only one of the two checksums: a damaged header.
  std::string s = read_bytes(path("new.safetensors"));
  const size_t k = s.find("ember.crc32c.data");
  ASSERT_NE(k, std::string::npos);
  s[k + 6] = 'C';
  write_bytes(path("one.safetensors"), s);
  EXPECT_THROW_MSG(nn::load_tensors(path("one.safetensors")), IOError, "only one of its two checksums");
}

// Shapes and offsets are whole non-negative numbers: 2.9 is not 2, 1e30 is not cast, and two tensors cannot share
// bytes.
TEST_F(FileSafety, HeaderNumbersMustBeWholeAndOffsetsDisjoint) {
  const std::string data(16, '\0');
  auto bad = [&](const std::string& header, const char* what) {
    write_bytes(path("h.safetensors"), st_file(header, data));
    SCOPED_TRACE(header);
    EXPECT_THROW_MSG(nn::load_tensors(path("h.safetensors")), IOError, what);
  };
  bad(R"({"w":{"dtype":"F32","shape":[2.9],"data_offsets":[0,8]}})", "non-negative integer");
  bad(R"({"w":{"dtype":"F32","shape":[1e30],"data_offsets":[0,8]}})", "non-negative integer");
  bad(R"({"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", "non-negative integer");
  bad(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "non-negative integer");
  bad(R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", "not a list");
  bad(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0.0,8]}})", "non-negative integer");
  bad(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      "overlapping");
  // Whole numbers load.
  write_bytes(path("ok.safetensors"), st_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data));
  EXPECT_EQ(nn::load_tensors(path("ok.safetensors"))[0].second.shape(), Shape({2}));
}

// Names and metadata the JSON header cannot hold are refused with an ember::Error naming the file, before anything
// is written; "__metadata__" is the format's own key, not a tensor name.
TEST_F(FileSafety, NamesThatTheHeaderCannotHoldAreRefused) {
  const std::string p = path("x.safetensors");
  const std::string bad_utf8 = "w\xff\xfe";
  EXPECT_THROW_MSG(nn::save_tensors(p, {{bad_utf8, zeros({1})}}), ValueError, "not valid UTF-8", p.c_str());
  EXPECT_THROW_MSG(nn::save_tensors(p, {{"w", zeros({1})}}, {{"note", bad_utf8}}), ValueError, "metadata entry",
                   "\"note\"", "not valid UTF-8");
  EXPECT_THROW_MSG(nn::save_tensors(p, {{"__metadata__", zeros({1})}}), ValueError, "__metadata__", "reserves");
  EXPECT_THROW_MSG(nn::save_tensors(p, {{"w", zeros({1})}}, {{"ember.crc32c.data", "0"}}), ValueError, "reserved");
  // An overlong encoding and a lone surrogate are not UTF-8 either.
  EXPECT_THROW(nn::save_tensors(p, {{"w\xc0\xaf", zeros({1})}}), ValueError);
  EXPECT_THROW(nn::save_tensors(p, {{"w\xed\xa0\x80", zeros({1})}}), ValueError);
  // A module parameter with such a name: save and save_checkpoint say so too.
  struct Odd : nn::Module {
    explicit Odd(const std::string& n) { register_parameter(n, zeros({1})); }
  };
  Odd odd(bad_utf8);
  EXPECT_THROW_MSG(nn::save(odd, p), ValueError, "not valid UTF-8");
  Optim opt;
  EXPECT_THROW_MSG(nn::save_checkpoint(p, odd, opt, 1), ValueError, "not valid UTF-8");
  nn::Chain fine{nn::Dense(1, 1)};
  EXPECT_THROW_MSG(nn::save_checkpoint(p, nn::Checkpoint{.model = &fine, .metadata = {{"run", bad_utf8}}}), ValueError,
                   "\"user.run\"", "not valid UTF-8");
  EXPECT_TRUE(files().empty());
  // Valid UTF-8 beyond ASCII round-trips.
  nn::save_tensors(p, {{"gewicht_\xc3\xa4\xe2\x82\xac\xf0\x9f\x94\xa5", ones({1})}}, {{"n\xc3\xb6te", "\xe2\x9c\x93"}});
  std::map<std::string, std::string> meta;
  EXPECT_EQ(nn::load_tensors(p, &meta)[0].first, "gewicht_\xc3\xa4\xe2\x82\xac\xf0\x9f\x94\xa5");
  EXPECT_EQ(meta["n\xc3\xb6te"], "\xe2\x9c\x93");
}

// A writer killed during save leaves "<path>.tmp.<pid>.<n>"; the next save to that path removes the ones no live
// writer holds (writers hold an open-file-description lock, which dies with them) once they are a minute old, and
// leaves a live writer's, other files' and recent ones alone.
TEST_F(FileSafety, TheNextSaveSweepsAKilledWritersTemporaryFiles) {
  const std::string p = path("ckpt.safetensors");
  auto make_old = [](const std::string& f) {
    fs::last_write_time(f, fs::file_time_type::clock::now() - std::chrono::minutes(5));
  };
  for (int i = 0; i < 3; ++i) {
    write_bytes(p + ".tmp.4000001." + std::to_string(i), "partial");  // what killed writers left
    make_old(p + ".tmp.4000001." + std::to_string(i));
  }
  write_bytes(p + ".tmp.4000002.0", "just created");  // too recent to judge: its writer may not have locked it yet
  const std::string live = p + ".tmp.4000003.0";
  write_bytes(live, "in progress");
  make_old(live);
  write_bytes(path("other.safetensors.tmp.4000001.0"), "someone else's file");
  make_old(path("other.safetensors.tmp.4000001.0"));
  write_bytes(p + ".tmp.notapid.0", "not ours");
  make_old(p + ".tmp.notapid.0");
  // A live writer in another process holds its file's lock while it writes.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    const int fd = ::open(live.c_str(), O_RDWR);
    struct flock l {};
    l.l_type = F_WRLCK;
    l.l_whence = SEEK_SET;
    const char ok = fd >= 0 && ::fcntl(fd, F_OFD_SETLK, &l) == 0 ? 1 : 0;
    (void)!::write(ready[1], &ok, 1);
    ::pause();
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 1);
  nn::Chain model{nn::Dense(2, 2)};
  Optim opt;
  nn::save_checkpoint(p, model, opt, 1);
  EXPECT_EQ(files(), (std::vector<std::string>{"ckpt.safetensors", "ckpt.safetensors.tmp.4000002.0",
                                               "ckpt.safetensors.tmp.4000003.0", "ckpt.safetensors.tmp.notapid.0",
                                               "other.safetensors.tmp.4000001.0"}));
  ::kill(writer, SIGKILL);
  ::waitpid(writer, nullptr, 0);
  EXPECT_EQ(remove_stale_temp_files(p), 1);  // the writer is gone now: its lock with it
  ::close(ready[0]);
  ::close(ready[1]);
}

// A real kill: a child saving a large checkpoint in a loop is killed at a random moment; the file under the final
// name is always a whole checkpoint, and a later save leaves no temporary file behind.
TEST_F(FileSafety, KilledWritersLeaveWholeFilesAndNoLeftovers) {
  const std::string p = path("big.safetensors");
  nn::Chain model{nn::Dense(512, 512)};
  Optim opt;
  nn::save_checkpoint(p, model, opt, 0);
  for (int round = 0; round < 5; ++round) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int64_t step = 1;; ++step) nn::save_checkpoint(p, model, opt, step);
    }
    ::usleep(static_cast<useconds_t>(2000 + 3000 * round));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    EXPECT_NO_THROW((void)nn::load_checkpoint(p, model, opt)) << "round " << round;
  }
  // The killed writers' temporary files, once a minute old, are gone after the next save.
  for (const std::string& f : files())
    if (f != "big.safetensors")
      fs::last_write_time(dir_ / f, fs::file_time_type::clock::now() - std::chrono::minutes(2));
  nn::save_checkpoint(p, model, opt, 99);
  EXPECT_EQ(files(), std::vector<std::string>{"big.safetensors"});
  EXPECT_EQ(nn::load_checkpoint(p, model, opt), 99);
}
