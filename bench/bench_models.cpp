// The library's models at full size on the CPU: training steps (AdamW) and inference, and the process's peak
// resident memory. bench/models_table.sh runs it beside bench/torch_models.py (timm / transformers on PyTorch,
// eager and torch.compile), one process each.
//   ember_bench_models --model resnet50|vit_b16|gpt2 [--mode train|infer|generate] [--batch B] [--seq T]
//                      [--amp none|bf16] [--threads N] [--steps N] [--warmup N] [--new N]
// Prints one line: "rate R unit U peak_rss_mib M" — images/s or tokens/s (train, infer throughput, generate), or
// ms per batch (infer with --batch 1: latency).
#include <ember/ember.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string model = "resnet50", mode = "train", amp = "none";
  int64_t batch = 32, seq = 256, new_tokens = 64;
  int threads = 0, steps = 3, warmup = 1;
};

double seconds_of(const std::function<void()>& f, int n) {
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) try {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") a.model = v;
    else if (k == "--mode") a.mode = v;
    else if (k == "--amp") a.amp = v;
    else if (k == "--batch") a.batch = std::stoll(v);
    else if (k == "--seq") a.seq = std::stoll(v);
    else if (k == "--new") a.new_tokens = std::stoll(v);
    else if (k == "--threads") a.threads = std::stoi(v);
    else if (k == "--steps") a.steps = std::stoi(v);
    else if (k == "--warmup") a.warmup = std::stoi(v);
    else {
      std::fprintf(stderr, "ember_bench_models: unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  if (a.threads > 0) set_num_threads(a.threads);
  manual_seed(0);
  const bool bf16 = a.amp == "bf16";
  std::shared_ptr<nn::Module> model;
  std::shared_ptr<models::GPT2> gpt;
  Tensor x, y;
  double items = 0;
  if (a.model == "gpt2") {
    gpt = std::make_shared<models::GPT2>(models::gpt2({.dropout = 0.0}));
    model = gpt;
    x = randint(0, 50257, {a.batch, a.seq}, {.dtype = kInt64});
    y = randint(0, 50257, {a.batch, a.seq}, {.dtype = kInt64});
    items = static_cast<double>(a.batch * a.seq);
  } else {
    if (a.model == "resnet50") model = std::make_shared<models::ResNet>(models::resnet50());
    else model = std::make_shared<models::ViT>(models::vit_b16());
    x = randn({a.batch, 3, 224, 224});
    y = randint(0, 1000, {a.batch}, {.dtype = kInt64});
    items = static_cast<double>(a.batch);
  }
  std::function<void()> step;
  std::unique_ptr<optim::AdamW> opt;
  std::string unit = a.model == "gpt2" ? "tokens/s" : "images/s";
  if (a.mode == "train") {
    model->train();
    opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-4});
    step = [&] {
      Tensor loss;
      {
        amp::AutocastGuard ac(kBFloat16, bf16);
        const Tensor out = (*model)(x);
        loss = a.model == "gpt2" ? nn::cross_entropy(out.reshape({-1, out.size(-1)}), y.reshape({-1}))
                                 : nn::cross_entropy(out, y);
      }
      opt->zero_grad();
      loss.backward();
      opt->step();
    };
  } else if (a.mode == "infer") {
    model->eval();
    step = [&] {
      NoGradGuard g;
      amp::AutocastGuard ac(kBFloat16, bf16);
      (void)(*model)(x);
    };
  } else if (a.mode == "generate" && gpt) {
    gpt->eval();
    const Tensor prompt = x.slice(1, 0, std::min<int64_t>(a.seq, 16));
    items = static_cast<double>(a.batch * a.new_tokens);
    step = [&, prompt] { (void)gpt->generate(prompt, {.max_new_tokens = a.new_tokens, .temperature = 0}); };
  } else {
    std::fprintf(stderr, "ember_bench_models: bad --mode %s for %s\n", a.mode.c_str(), a.model.c_str());
    return 2;
  }
  seconds_of(step, a.warmup);  // caches, the allocator, the optimiser's state
  const double secs = seconds_of(step, a.steps) / a.steps;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  if (a.mode == "infer" && a.batch == 1) std::printf("rate %.2f unit ms peak_rss_mib %.0f\n", secs * 1e3, ru.ru_maxrss / 1024.0);
  else std::printf("rate %.2f unit %s peak_rss_mib %.0f\n", items / secs, unit.c_str(), ru.ru_maxrss / 1024.0);
  return 0;
} catch (const Error& e) {
  std::fprintf(stderr, "ember_bench_models: %s\n", e.what());
  return 1;
}
