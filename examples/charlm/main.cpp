// Trains a small character-level GPT on the fortune-cookie files of Debian's `fortunes` package and prints
// generated text:
//   ember_charlm --epochs 3 --steps 200 --batch-size 32 --context 128 --d 128 --heads 4 --blocks 4 --lr 2e-3
//                --device cpu|cuda|auto --checkpoint --temperature 0.8 --top-k 20 --sample 400 --data DIR|FILE
//                --amp none|bf16|f16   (mixed precision: autocast, with a GradScaler for f16; docs/amp.md)
// Every epoch is `--steps` AdamW steps on random windows of the training text (the first 90%), then the loss on
// fixed windows of the held-out 10%, printed beside the corpus's unigram entropy (what a model that ignores
// context reaches). Learning rate: linear warmup, then cosine decay to a tenth.
#include <ember/ember.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpt.h"

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string device = "auto", data = "/usr/share/games/fortunes", prompt = "\n", save, amp = "none";
  std::string logdir;  // --logdir: TensorBoard logs
  int epochs = 3, steps = 200, threads = 0, sample = 400, top_k = 20;
  int64_t batch_size = 32, context = 128, d = 128, heads = 4, blocks = 4;
  double lr = 2e-3, dropout = 0, temperature = 0.8, weight_decay = 0.1;
  bool checkpoint = false;
  uint64_t seed = 0;
  double max_val_ratio = 0;  // > 0: exit 1 unless val loss <= this fraction of the unigram entropy (the tests)
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "ember_charlm: " << why << "\n"
            << "usage: ember_charlm [--epochs N] [--steps N] [--batch-size N] [--context N] [--d N] [--heads N]\n"
            << "                    [--blocks N] [--lr X] [--dropout X] [--weight-decay X] [--device cpu|cuda|auto]\n"
            << "                    [--threads N] [--checkpoint] [--amp none|bf16|f16] [--seed N] [--sample N] "
               "[--temperature X]\n"
            << "                    [--top-k N] [--prompt TEXT] [--save PATH] [--data DIR|FILE] [--max-val-ratio X]\n"
            << "                    [--logdir DIR]\n";
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
      if (k == "--epochs") a.epochs = std::stoi(v);
      else if (k == "--amp") a.amp = v;
      else if (k == "--steps") a.steps = std::stoi(v);
      else if (k == "--batch-size") a.batch_size = std::stoll(v);
      else if (k == "--context") a.context = std::stoll(v);
      else if (k == "--d") a.d = std::stoll(v);
      else if (k == "--heads") a.heads = std::stoll(v);
      else if (k == "--blocks") a.blocks = std::stoll(v);
      else if (k == "--lr") a.lr = std::stod(v);
      else if (k == "--dropout") a.dropout = std::stod(v);
      else if (k == "--weight-decay") a.weight_decay = std::stod(v);
      else if (k == "--device") a.device = v;
      else if (k == "--threads") a.threads = std::stoi(v);
      else if (k == "--seed") a.seed = std::stoull(v);
      else if (k == "--sample") a.sample = std::stoi(v);
      else if (k == "--temperature") a.temperature = std::stod(v);
      else if (k == "--top-k") a.top_k = std::stoi(v);
      else if (k == "--prompt") a.prompt = v;
      else if (k == "--save") a.save = v;
      else if (k == "--logdir") a.logdir = v;
      else if (k == "--data") a.data = v;
      else if (k == "--max-val-ratio") a.max_val_ratio = std::stod(v);
      else usage("unknown flag " + k);
    } catch (const std::logic_error&) {
      usage("bad value '" + v + "' for " + k);
    }
  }
  if (a.epochs < 1 || a.steps < 1 || a.batch_size < 1 || a.context < 2 || a.d < 1 || a.blocks < 1 || !(a.lr > 0))
    usage("--epochs, --steps, --batch-size, --d, --blocks and --lr must be positive, --context at least 2");
  if (a.d % a.heads != 0) usage("--d must be a multiple of --heads");
  if (!(a.temperature > 0)) usage("--temperature must be positive");
  if (a.amp != "none" && a.amp != "bf16" && a.amp != "f16") usage("--amp must be none, bf16 or f16");
  return a;
}

// The corpus: one file, or every fortune file of a directory (the plain text files: no .dat index, no .u8 copy).
std::string read_corpus(const std::string& where) {
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
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    text += ss.str();
  }
  if (text.size() < 10000)
    throw IOError(detail::str("ember_charlm: ", where, " holds ", text.size(),
                              " bytes of text; install Debian's fortunes package (scripts/install-deps.sh does) or "
                              "pass --data"));
  return text;
}

// Byte-level vocabulary: the bytes that occur, in order.
struct Vocab {
  std::vector<int> id_of = std::vector<int>(256, -1);
  std::string chars;
  explicit Vocab(const std::string& text) {
    std::vector<bool> seen(256, false);
    for (unsigned char c : text) seen[c] = true;
    for (int c = 0; c < 256; ++c)
      if (seen[static_cast<size_t>(c)]) {
        id_of[static_cast<size_t>(c)] = static_cast<int>(chars.size());
        chars.push_back(static_cast<char>(c));
      }
  }
  int64_t size() const { return static_cast<int64_t>(chars.size()); }
};

// The entropy (nats) of the training text's character frequencies: the loss of the best context-free model.
double unigram_entropy(const std::vector<int64_t>& ids, int64_t vocab) {
  std::vector<double> count(static_cast<size_t>(vocab), 0);
  for (int64_t t : ids) count[static_cast<size_t>(t)] += 1;
  double h = 0;
  for (double c : count)
    if (c > 0) {
      const double p = c / static_cast<double>(ids.size());
      h -= p * std::log(p);
    }
  return h;
}

// Inputs and next-character targets of the windows starting at `starts`: two [B, T] int64 tensors.
std::pair<Tensor, Tensor> windows(const std::vector<int64_t>& ids, const std::vector<int64_t>& starts, int64_t T) {
  std::vector<int64_t> x, y;
  for (int64_t s : starts) {
    x.insert(x.end(), ids.begin() + s, ids.begin() + s + T);
    y.insert(y.end(), ids.begin() + s + 1, ids.begin() + s + T + 1);
  }
  const int64_t B = static_cast<int64_t>(starts.size());
  return {tensor<int64_t>(x, {B, T}), tensor<int64_t>(y, {B, T})};
}

// --amp: the forward and the loss under autocast in `low` (the weights stay float32).
struct Precision {
  bool autocast = false;
  DType low = kBFloat16;
};

Tensor lm_loss(charlm::GPT& model, const Tensor& x, const Tensor& y, Precision prec) {
  amp::AutocastGuard ac(x.device(), prec.low, prec.autocast);
  Tensor logits = model(x);
  return nn::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
}

// The mean loss over fixed, evenly spaced windows of the validation text.
double validation_loss(charlm::GPT& model, const std::vector<int64_t>& val, int64_t T, int64_t batch, Device dev,
                       Precision prec) {
  NoGradGuard no_grad;
  model.eval();
  const int64_t n_windows = std::min<int64_t>(256, static_cast<int64_t>(val.size()) - T - 1);
  double total = 0;
  int64_t batches = 0;
  for (int64_t w0 = 0; w0 < n_windows; w0 += batch) {
    std::vector<int64_t> starts;
    for (int64_t w = w0; w < std::min(n_windows, w0 + batch); ++w)
      starts.push_back(w * (static_cast<int64_t>(val.size()) - T - 1) / n_windows);
    auto [x, y] = windows(val, starts, T);
    total += lm_loss(model, x.to(dev), y.to(dev), prec).cpu().item<float>();
    ++batches;
  }
  model.train();
  return total / static_cast<double>(batches);
}

// Samples `n` characters after `prompt`: the last position's logits / temperature, the top k kept, softmax, draw.
std::string generate(charlm::GPT& model, const Vocab& vocab, const std::string& prompt, int n, double temperature,
                     int top_k, Device dev, std::mt19937_64& rng) {
  NoGradGuard no_grad;
  model.eval();
  std::vector<int64_t> ctx;
  for (unsigned char c : prompt)
    if (vocab.id_of[c] >= 0) ctx.push_back(vocab.id_of[c]);
  if (ctx.empty()) ctx.push_back(0);
  std::string out;
  for (int i = 0; i < n; ++i) {
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(ctx.size()), model.cfg.context);
    std::vector<int64_t> window(ctx.end() - T, ctx.end());
    Tensor logits = model(tensor<int64_t>(window, {1, T}).to(dev)).select(1, T - 1).reshape({-1});
    // the k most likely characters, renormalised
    const int64_t k = top_k > 0 ? std::min<int64_t>(top_k, logits.size(0)) : logits.size(0);
    SortResult best = topk(logits / temperature, k);
    const std::vector<float> p = softmax(best.values, 0).cpu().to_vector<float>();
    const std::vector<int64_t> idx = best.indices.cpu().to_vector<int64_t>();
    std::discrete_distribution<int64_t> pick(p.begin(), p.end());
    const int64_t next = idx[static_cast<size_t>(pick(rng))];
    ctx.push_back(next);
    out.push_back(vocab.chars[static_cast<size_t>(next)]);
  }
  model.train();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    if (args.threads > 0) set_num_threads(args.threads);
    Device dev = Device::cpu();
    if (args.device == "cuda" || (args.device == "auto" && cuda::is_available())) dev = Device::cuda();
    else if (args.device != "cpu" && args.device != "auto") usage("--device must be cpu, cuda or auto");
    manual_seed(args.seed);
    std::mt19937_64 rng(args.seed);

    const std::string text = read_corpus(args.data);
    const Vocab vocab(text);
    std::vector<int64_t> ids;
    ids.reserve(text.size());
    for (unsigned char c : text) ids.push_back(vocab.id_of[c]);
    const size_t split = ids.size() * 9 / 10;
    const std::vector<int64_t> train(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(split)),
        val(ids.begin() + static_cast<std::ptrdiff_t>(split), ids.end());
    const double h_unigram = unigram_entropy(train, vocab.size());

    charlm::GPT model({.vocab = vocab.size(),
                       .context = args.context,
                       .d = args.d,
                       .heads = args.heads,
                       .blocks = args.blocks,
                       .dropout = args.dropout,
                       .checkpoint = args.checkpoint});
    model.to(dev);
    // AdamW with weight decay on the matrices only (not on biases and LayerNorm gains), as GPT-2 / nanoGPT
    std::vector<Tensor> decay, no_decay;
    for (const Tensor& p : model.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    optim::AdamW opt({{decay, {.weight_decay = args.weight_decay}}, {no_decay, {.weight_decay = 0.0}}},
                     {.lr = args.lr, .beta2 = 0.99});
    const Precision prec{.autocast = args.amp != "none", .low = args.amp == "f16" ? kFloat16 : kBFloat16};
    amp::GradScaler scaler({.enabled = args.amp == "f16"});
    const int64_t total_steps = static_cast<int64_t>(args.epochs) * args.steps;
    const int64_t warmup = std::max<int64_t>(1, total_steps / 20);
    optim::LambdaLR sched(opt, [=](int64_t s) {
      if (s < warmup) return static_cast<double>(s + 1) / static_cast<double>(warmup);
      const double t =
          static_cast<double>(s - warmup) / static_cast<double>(std::max<int64_t>(1, total_steps - warmup));
      return 0.1 + 0.45 * (1 + std::cos(M_PI * std::min(1.0, t)));
    });

    std::cout << model << "\n"
              << "corpus " << args.data << ": " << text.size() << " characters, vocabulary " << vocab.size()
              << ", unigram entropy " << h_unigram << " nats (" << h_unigram / std::log(2.0) << " bits) per char\n"
              << "GPT on " << dev << ", " << get_num_threads() << " threads, batch " << args.batch_size << " x "
              << args.context << " tokens, AdamW lr " << args.lr
              << (args.checkpoint ? ", activation checkpointing" : "")
              << (prec.autocast ? ", autocast " + args.amp : std::string()) << "\n";

    std::uniform_int_distribution<int64_t> start_of(0, static_cast<int64_t>(train.size()) - args.context - 1);
    double val_loss = 0;
    std::unique_ptr<SummaryWriter> log;  // --logdir: `tensorboard --logdir DIR` shows the curves
    if (!args.logdir.empty()) log = std::make_unique<SummaryWriter>(args.logdir);
    for (int epoch = 1; epoch <= args.epochs; ++epoch) {
      const auto t0 = Clock::now();
      Tensor running_sum = zeros({}, {.device = dev});
      // On stderr: redrawn in place on a terminal, one line per 5% into a log. A step is batch x context tokens.
      ProgressBar bar(args.steps,
                      {.desc = "epoch " + std::to_string(epoch) + "/" + std::to_string(args.epochs), .unit = "step"});
      for (int step = 1; step <= args.steps; ++step) {
        std::vector<int64_t> starts(static_cast<size_t>(args.batch_size));
        for (auto& s : starts) s = start_of(rng);
        auto [x, y] = windows(train, starts, args.context);
        Tensor loss = lm_loss(model, x.to(dev), y.to(dev), prec);
        opt.zero_grad();
        scaler.scale(loss).backward();
        scaler.unscale_(opt);  // clipping sees the true gradients
        nn::clip_grad_norm_(model.parameters(), 1.0);
        scaler.step(opt);  // skipped when (f16) a gradient overflowed
        scaler.update();
        sched.step();
        running_sum = running_sum + loss.detach();
        // the loss is read back only when printed (reading it each step would make the host wait for a GPU)
        if (bar.due()) bar.set_postfix({{"loss", running_sum.cpu().item<float>() / step}});
        bar.update();
      }
      bar.close();
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      val_loss = validation_loss(model, val, args.context, args.batch_size, dev, prec);
      const double train_loss = running_sum.cpu().item<float>() / args.steps;
      const double tokens_per_s =
          static_cast<double>(args.steps) * static_cast<double>(args.batch_size * args.context) / secs;
      std::printf("epoch %d: train loss %.4f, val loss %.4f nats (unigram entropy %.4f), %.0f tokens/s\n", epoch,
                  train_loss, val_loss, h_unigram, tokens_per_s);
      if (log) {
        const int64_t step = static_cast<int64_t>(epoch) * args.steps;
        log->add_scalars("loss", {{"train", train_loss}, {"val", val_loss}}, step);
        log->add_scalar("lr", sched.get_last_lr(), step);
        log->add_scalar("tokens_per_second", tokens_per_s, step);
        // device-agnostic: cuda::max_memory_allocated reads 0 without a GPU
        log->add_scalar("memory/peak_mib",
                        static_cast<double>(dev.is_cuda() ? cuda::max_memory_allocated(dev.index())
                                                          : cpu_memory_stats().peak_bytes_in_use) /
                            1048576,
                        step);
        log->flush();
      }
    }
    std::printf("val loss %.4f nats = %.1f%% of the unigram entropy\n", val_loss, 100 * val_loss / h_unigram);
    if (dev.is_cuda()) std::cout << cuda::memory_summary(dev);
    if (!args.save.empty()) {
      nn::save(model, args.save);
      std::cout << "saved " << args.save << "\n";
    }
    if (args.sample > 0) {
      std::cout << "--- sample (temperature " << args.temperature << ", top-k " << args.top_k << ")\n"
                << args.prompt
                << generate(model, vocab, args.prompt, args.sample, args.temperature, args.top_k, dev, rng) << "\n";
    }
    if (args.max_val_ratio > 0 && !(val_loss <= args.max_val_ratio * h_unigram)) {
      std::cerr << "ember_charlm: val loss " << val_loss << " is above " << args.max_val_ratio
                << " x the unigram entropy " << h_unigram << "\n";
      return 1;
    }
  } catch (const Error& e) {
    std::cerr << "ember_charlm: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
