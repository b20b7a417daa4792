// Loading a ~90 MB safetensors checkpoint into a model: time and memory of nn::load (the file memory-mapped, each
// tensor copied once, into its parameter) against reading the whole file into memory first and copying from there
// (what a loader without mmap does; Ember's did before). Each way runs in its own process (this program re-runs
// itself), after the file was read once so both find it in the page cache.
//   ember_bench_load [MB = 90]
// Prints per way: seconds, peak resident set (VmHWM), and the anonymous memory at the end of loading (RssAnon:
// the model's parameters, plus any copy still held).
#include <ember/ember.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace ember;

namespace {

// The model: two Dense layers of (in, out) = (n, n), n chosen so the weights make about `mb` megabytes.
nn::Chain make_model(int64_t mb) {
  const auto n = static_cast<int64_t>(std::sqrt(static_cast<double>(mb) * 1e6 / 4 / 2));
  return nn::Chain{nn::Dense(n, n), nn::Dense(n, n)};
}

long status_kib(const char* key) {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind(key, 0) == 0) return std::strtol(line.c_str() + std::strlen(key), nullptr, 10);
  return 0;
}

// The way Ember's reader worked before it mapped the file (and what a reader without mmap does): each tensor read
// with std::ifstream::read into a fresh tensor, all of them held, then copied into the parameters.
void load_by_reading(nn::Module& m, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  nn::NamedTensors file;
  const nlohmann::json entries = nlohmann::json::parse(header);
  for (auto& [name, info] : entries.items()) {
    if (name == "__metadata__") continue;
    const std::string dtype = info.at("dtype").get<std::string>();
    EMBER_CHECK_VALUE(dtype == "F32", "bench_load: float32 files only, got ", dtype, " for ", name);
    Tensor t = empty(Shape(info.at("shape").get<std::vector<int64_t>>()), {.dtype = kFloat32});
    const auto off = info.at("data_offsets").get<std::vector<uint64_t>>();
    in.seekg(static_cast<std::streamoff>(8 + n + off[0]));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(off[1] - off[0]));
    file.emplace_back(name, t);
  }
  nn::assign_tensors(m, file);
}

int child(const std::string& how, const std::string& path, int64_t mb) {
  nn::Chain model = make_model(mb);
  const auto t0 = std::chrono::steady_clock::now();
  if (how == "mmap") nn::load(model, path);
  else load_by_reading(model, path);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%-8s %6.3f s   peak RSS %6.1f MB   RssAnon at the end %6.1f MB\n", how.c_str(), s,
              status_kib("VmHWM:") / 1024.0, status_kib("RssAnon:") / 1024.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--child") return child(argv[2], argv[3], std::atoll(argv[4]));
  const int64_t mb = argc > 1 ? std::atoll(argv[1]) : 90;
  const std::string path = (std::filesystem::temp_directory_path() / "ember_bench_load.safetensors").string();
  {
    nn::Chain m = make_model(mb);
    nn::save(m, path);
    std::printf("file %s: %.1f MB, model %lld parameters\n", path.c_str(),
                static_cast<double>(std::filesystem::file_size(path)) / 1e6,
                static_cast<long long>(m.num_parameters()));
    nn::load(m, path);  // into the page cache
  }
  for (const char* how : {"mmap", "read", "mmap", "read"}) {
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/proc/self/exe", argv[0], "--child", how, path.c_str(), std::to_string(mb).c_str(),
              static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  std::filesystem::remove(path);
  return 0;
}
