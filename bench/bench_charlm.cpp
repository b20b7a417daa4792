// Training throughput and peak memory of examples/charlm's GPT (the same model code): tokens/s of AdamW steps on
// random [batch, context] token windows, and the process's peak resident memory. bench/charlm_table.sh runs it
// beside bench/torch_charlm.py (PyTorch) and bench/torch_charlm.cpp (libtorch), one process each.
//   ember_bench_charlm [--threads N] [--steps N] [--batch B] [--context T] [--d D] [--heads H] [--blocks L]
//                      [--vocab V] [--device cpu|cuda]
#include <ember/ember.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "gpt.h"

using namespace ember;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  int threads = 0, steps = 10;
  charlm::GPTConfig cfg{.vocab = 96};
  int64_t batch = 32;
  Device dev = Device::cpu();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--threads") threads = std::stoi(v);
    else if (k == "--steps") steps = std::stoi(v);
    else if (k == "--batch") batch = std::stoll(v);
    else if (k == "--context") cfg.context = std::stoll(v);
    else if (k == "--d") cfg.d = std::stoll(v);
    else if (k == "--heads") cfg.heads = std::stoll(v);
    else if (k == "--blocks") cfg.blocks = std::stoll(v);
    else if (k == "--vocab") cfg.vocab = std::stoll(v);
    else if (k == "--device") dev = v == "cuda" ? Device::cuda() : Device::cpu();
    else {
      std::fprintf(stderr, "ember_bench_charlm: unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  if (threads > 0) set_num_threads(threads);
  manual_seed(0);
  charlm::GPT model(cfg);
  model.to(dev);
  optim::AdamW opt(model.parameters(), {.lr = 1e-3});
  Tensor x = randint(0, cfg.vocab, {batch, cfg.context}, {.dtype = kInt64, .device = dev});
  Tensor y = randint(0, cfg.vocab, {batch, cfg.context}, {.dtype = kInt64, .device = dev});
  auto step = [&] {
    Tensor logits = model(x);
    Tensor loss = nn::cross_entropy(logits.reshape({-1, cfg.vocab}), y.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss;
  };
  for (int i = 0; i < 3; ++i) step();  // warm-up: caches, allocator, optimiser state
  if (dev.is_cuda()) cuda::synchronize();
  const auto t0 = Clock::now();
  float last = 0;
  for (int i = 0; i < steps; ++i) last = step().cpu().item<float>();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("ember tokens/s %.0f peak_rss_mib %.1f threads %d loss %.4f params %lld\n",
              static_cast<double>(steps) * static_cast<double>(batch * cfg.context) / secs,
              static_cast<double>(ru.ru_maxrss) / 1024.0, get_num_threads(), last,
              static_cast<long long>(model.num_parameters()));
  return 0;
}
