// GPT-2 with the library's model (models::GPT2), two ways:
//   ember_gpt2 [--data FILE|DIR] [--steps N] ...      train a small byte-level GPT-2 on a text file, then generate
//   ember_gpt2 --pretrained FOLDER --prompt TEXT       generate with a Hugging Face GPT-2 folder (config.json,
//                                                      model.safetensors, vocab.json, merges.txt)
// Options: --steps N --batch-size N --context N --d N --heads N --layers N --lr X --amp none|bf16 --checkpoint
//          --new N --temperature X (0: greedy) --top-k N --seed N --threads N --save FOLDER --max-loss X
// Training draws random windows of the text (bytes as tokens: a vocabulary of 256), AdamW with warmup and cosine
// decay; it prints the loss every tenth of the steps and the held-out loss at the end (--max-loss: exit 1 above it,
// for the tests). --save writes a Hugging Face folder (models::GPT2::save_pretrained).
#include <ember/ember.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bpe.h"

using namespace ember;

namespace {

struct Args {
  std::string data = "/usr/share/games/fortunes", pretrained, prompt = "\n", save, amp = "none";
  int64_t steps = 300, batch_size = 16, context = 128, d = 128, heads = 4, layers = 4, new_tokens = 200, top_k = 40;
  double lr = 2e-3, temperature = 0.8, max_loss = 0;
  bool checkpoint = false;
  uint64_t seed = 0;
  int threads = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "ember_gpt2: " << why << "\n"
            << "usage: ember_gpt2 [--data FILE|DIR] [--steps N] [--batch-size N] [--context N] [--d N] [--heads N]\n"
            << "                  [--layers N] [--lr X] [--amp none|bf16] [--checkpoint] [--save FOLDER]\n"
            << "                  [--max-loss X] | --pretrained FOLDER;  [--prompt TEXT] [--new N]\n"
            << "                  [--temperature X] [--top-k N] [--seed N] [--threads N]\n";
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "-h" || k == "--help") usage("help");
    if (k == "--checkpoint") {
      a.checkpoint = true;
      continue;
    }
    if (i + 1 >= argc) usage("missing value for " + k);
    const std::string v = argv[++i];
    try {
      if (k == "--data") a.data = v;
      else if (k == "--pretrained") a.pretrained = v;
      else if (k == "--prompt") a.prompt = v;
      else if (k == "--save") a.save = v;
      else if (k == "--amp") a.amp = v;
      else if (k == "--steps") a.steps = std::stoll(v);
      else if (k == "--batch-size") a.batch_size = std::stoll(v);
      else if (k == "--context") a.context = std::stoll(v);
      else if (k == "--d") a.d = std::stoll(v);
      else if (k == "--heads") a.heads = std::stoll(v);
      else if (k == "--layers") a.layers = std::stoll(v);
      else if (k == "--new") a.new_tokens = std::stoll(v);
      else if (k == "--top-k") a.top_k = std::stoll(v);
      else if (k == "--lr") a.lr = std::stod(v);
      else if (k == "--temperature") a.temperature = std::stod(v);
      else if (k == "--max-loss") a.max_loss = std::stod(v);
      else if (k == "--seed") a.seed = std::stoull(v);
      else if (k == "--threads") a.threads = std::stoi(v);
      else usage("unknown flag " + k);
    } catch (const std::logic_error&) {
      usage("bad value '" + v + "' for " + k);
    }
  }
  if (a.steps < 1 || a.batch_size < 1 || a.context < 2 || a.layers < 1 || !(a.lr > 0)) usage("bad training options");
  if (a.amp != "none" && a.amp != "bf16") usage("--amp: none or bf16");
  return a;
}

// The text: one file, or the plain files of a folder (Debian's fortunes: no .dat index, no .u8 copy).
std::string read_text(const std::string& where) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  if (fs::is_directory(where)) {
    for (const auto& e : fs::directory_iterator(where))
      if (e.is_regular_file() && !e.path().has_extension()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(where);
  }
  std::string text;
  for (const auto& f : files) text += read_file(f.string(), "ember_gpt2");
  if (text.size() < 10000)
    throw IOError(detail::str("ember_gpt2: ", where, " holds ", text.size(), " bytes; pass --data with more text"));
  return text;
}

// [B, T + 1] windows of bytes at random starts: inputs and next-byte targets.
std::pair<Tensor, Tensor> batch(const std::string& text, size_t lo, size_t hi, int64_t b, int64_t t,
                                std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> start(lo, hi - static_cast<size_t>(t) - 2);
  std::vector<int64_t> x, y;
  for (int64_t i = 0; i < b; ++i) {
    const size_t s = start(rng);
    for (int64_t j = 0; j < t; ++j) {
      x.push_back(static_cast<unsigned char>(text[s + static_cast<size_t>(j)]));
      y.push_back(static_cast<unsigned char>(text[s + static_cast<size_t>(j) + 1]));
    }
  }
  return {tensor<int64_t>(x, {b, t}), tensor<int64_t>(y, {b, t})};
}

Tensor lm_loss(const models::GPT2& gpt, const Tensor& x, const Tensor& y, bool bf16) {
  amp::AutocastGuard ac(x.device(), kBFloat16, bf16);
  const Tensor logits = gpt(x);
  return nn::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
}

int train(const Args& a) {
  const std::string text = read_text(a.data);
  const size_t split = text.size() * 9 / 10;
  models::GPT2 gpt({.vocab_size = 256, .n_positions = a.context, .n_embd = a.d, .n_layer = a.layers,
                    .n_head = a.heads, .dropout = 0.0});
  gpt.set_grad_checkpointing(a.checkpoint);
  optim::AdamW opt(gpt.parameters(), {.lr = a.lr, .weight_decay = 0.1});
  const int64_t warmup = std::max<int64_t>(1, a.steps / 20);
  optim::LambdaLR sched(opt, [&](int64_t s) {
    if (s < warmup) return static_cast<double>(s + 1) / static_cast<double>(warmup);
    const double p = static_cast<double>(s - warmup) / static_cast<double>(std::max<int64_t>(1, a.steps - warmup));
    return 0.1 + 0.45 * (1 + std::cos(3.141592653589793 * std::min(p, 1.0)));
  });
  std::printf("GPT-2 of %lld parameters (%lld layers, width %lld, context %lld) on %zu bytes, %d threads%s%s\n",
              static_cast<long long>(gpt.num_parameters()), static_cast<long long>(a.layers),
              static_cast<long long>(a.d), static_cast<long long>(a.context), text.size(), get_num_threads(),
              a.amp == "bf16" ? ", bf16 autocast" : "", a.checkpoint ? ", checkpointed blocks" : "");
  std::mt19937_64 rng(a.seed);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = 1; step <= a.steps; ++step) {
    auto [x, y] = batch(text, 0, split, a.batch_size, a.context, rng);
    const Tensor loss = lm_loss(gpt, x, y, a.amp == "bf16");
    opt.zero_grad();
    loss.backward();
    nn::clip_grad_norm_(gpt.parameters(), 1.0);
    opt.step();
    sched.step();
    if (step % std::max<int64_t>(1, a.steps / 10) == 0 || step == a.steps) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("step %lld: loss %.4f, %.0f tokens/s\n", static_cast<long long>(step), loss.item<float>(),
                  static_cast<double>(step * a.batch_size * a.context) / secs);
    }
  }
  gpt.eval();
  double held_out = 0;
  {
    NoGradGuard g;
    std::mt19937_64 val_rng(12345);
    for (int i = 0; i < 8; ++i) {
      auto [x, y] = batch(text, split, text.size(), a.batch_size, a.context, val_rng);
      held_out += lm_loss(gpt, x, y, a.amp == "bf16").item<float>() / 8;
    }
  }
  std::printf("held-out loss %.4f (nats per byte)\n", held_out);
  std::vector<int64_t> prompt;
  for (unsigned char c : a.prompt) prompt.push_back(c);
  const int64_t room = a.context - static_cast<int64_t>(prompt.size());
  const Tensor out = gpt.generate(tensor<int64_t>(prompt, {1, static_cast<int64_t>(prompt.size())}),
                                  {.max_new_tokens = std::min(a.new_tokens, std::max<int64_t>(room, 0)),
                                   .temperature = a.temperature, .top_k = a.top_k, .seed = a.seed});
  std::string sample;
  for (int64_t id : out.to_vector<int64_t>()) sample.push_back(static_cast<char>(id));
  std::printf("--- sample ---\n%s\n--------------\n", sample.c_str());
  if (!a.save.empty()) {
    gpt.save_pretrained(a.save);
    std::printf("saved %s\n", a.save.c_str());
  }
  return a.max_loss > 0 && !(held_out <= a.max_loss) ? 1 : 0;
}

int pretrained(const Args& a) {
  const auto t0 = std::chrono::steady_clock::now();
  models::GPT2 gpt = models::GPT2::from_pretrained(a.pretrained);
  const gpt2_example::Bpe bpe(a.pretrained);
  std::printf("loaded %s (%lld parameters) in %.2f s\n", a.pretrained.c_str(),
              static_cast<long long>(gpt.num_parameters()),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  const std::vector<int64_t> ids = bpe.encode(a.prompt);
  const auto t1 = std::chrono::steady_clock::now();
  const Tensor out = gpt.generate(tensor<int64_t>(ids, {1, static_cast<int64_t>(ids.size())}),
                                  {.max_new_tokens = a.new_tokens, .temperature = a.temperature, .top_k = a.top_k,
                                   .seed = a.seed});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::printf("%s\n(%lld new tokens in %.2f s: %.1f tokens/s)\n", bpe.decode(out.to_vector<int64_t>()).c_str(),
              static_cast<long long>(a.new_tokens), secs, static_cast<double>(a.new_tokens) / secs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    if (args.threads > 0) set_num_threads(args.threads);
    manual_seed(args.seed);
    return args.pretrained.empty() ? train(args) : pretrained(args);
  } catch (const Error& e) {
    std::cerr << "ember_gpt2: " << e.what() << "\n";
    return 1;
  }
}
