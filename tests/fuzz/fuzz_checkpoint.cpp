// Fuzz target: load_checkpoint's metadata reader (format, step, parts, rng seed/offset, user keys) and its parts
// (model, optimiser, loader), the whole load-or-restore path.
// The first byte picks how the rest is used:
//   even: the rest is the whole file (a damaged checkpoint: the outer reader, the checksums, old files without them);
//   odd:  the rest is metadata, "key\0value\0key\0value...", written with valid tensors by save_tensors, so the
//         checksums hold and the fuzzer reaches the metadata parsing behind them.
// Whatever happens, a failed load must leave the model, optimiser and loader as they were.
#include <cstring>
#include <filesystem>

#include "fuzz_support.h"

namespace {

struct State {
  ember::nn::Chain model{ember::nn::Dense(2, 2)};
  ember::Tensor momentum = ember::zeros({2, 2});
  ember::nn::NamedTensors state_dict() const { return {{"m", momentum}}; }
  void load_state_dict(const ember::nn::NamedTensors& s) { ember::nn::assign_tensors(state_dict(), s, "fuzz optim"); }
};

// A folder in memory where there is one (/dev/shm): the writer fsyncs every file.
std::string scratch_path() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  return (dir / ("ember_fuzz_checkpoint_" + std::to_string(::getpid()) + ".safetensors")).string();
}

std::map<std::string, std::string> metadata_of(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> meta;
  std::string key, cur;
  bool have_key = false;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != 0) {
      cur.push_back(static_cast<char>(data[i]));
      continue;
    }
    if (have_key) meta[key] = cur;
    else key = cur;
    have_key = !have_key;
    cur.clear();
  }
  if (have_key) meta[key] = cur;
  return meta;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static State s;
  static const std::vector<float> model_before = s.model.state_dict()[0].second.to_vector<float>();
  std::string path;
  if (data[0] % 2 == 0) {
    path = fuzz::as_file(data + 1, size - 1);
  } else {
    path = scratch_path();
    const ember::nn::NamedTensors tensors = {{"model.0.weight", ember::ones({2, 2})},
                                             {"model.0.bias", ember::ones({2})},
                                             {"optim.m", ember::ones({2, 2})}};
    try {
      ember::nn::save_tensors(path, tensors, metadata_of(data + 1, size - 1));
    } catch (const ember::Error&) {
      return 0;  // metadata the writer refuses (not UTF-8, a reserved key)
    }
  }
  bool loaded = false;
  fuzz::expect_clean([&] {
    (void)ember::nn::load_checkpoint(path, ember::nn::Checkpoint{.model = &s.model, .optimizer = &s, .rng = true});
    loaded = true;
  });
  // A load that failed changed nothing; one that succeeded is put back for the next input.
  if (!loaded && s.model.state_dict()[0].second.to_vector<float>() != model_before) std::abort();
  if (loaded) {
    ember::NoGradGuard g;
    s.model.state_dict()[0].second.copy_(ember::tensor<float>(model_before, {2, 2}));
  }
  return 0;
}
