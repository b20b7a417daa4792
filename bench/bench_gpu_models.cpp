// The library's models at full size on one GPU (issue 57, item 8); bench/torch_gpu_models.py is PyTorch's side,
// the same models defined in plain PyTorch (the device's PyTorch has no torchvision or timm). Each case trains with
// AdamW under bf16 autocast on one fixed batch: two warm-up steps, then the median of --steps steps, each between two
// CUDA events; items/s from the median; MFU against --peak-tflops (989: H100/H200 SXM dense bf16); the peak of
// cuda::max_memory_allocated from before the model was made; and beside it Ember's memory plan of the same
// construction and two steps (memory::plan, no real run).
//   ember_bench_gpu_models [--device cuda|cpu] [--small] [--only resnet50,vit_b16,gpt2] [--steps 5]
//                          [--peak-tflops 989] [--no-plan]
// --small runs toy sizes (a check of the program). One JSON line per case: {"impl", "device", "case", "batch",
// "items", "step_ms", "items_per_s", "mfu", "peak_bytes", "planned_peak_bytes"}, or {"case", "skipped": why}, or
// {"case", "error": what}. Without a usable GPU (and --device cuda) it says why and exits 3.
#include <ember/ember.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpu_bench_util.h"

namespace {
using namespace ember;

// What a case builds: the model, its batch, and a training step.
struct Built {
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::AdamW> opt;
  std::function<void()> step;
};

struct Case {
  std::string name;
  int64_t batch;
  double items;           // images or tokens per step
  double flops_per_step;  // forward + backward, about 3x the forward's
  std::function<std::shared_ptr<nn::Module>()> make_model;
  std::function<std::pair<Tensor, Tensor>(Device)> make_batch;
  bool sequence_loss = false;  // GPT-2: logits [B, T, V] against tokens [B, T]
  std::string skipped;
  bool channels_last = false;  // the model and its images in MemoryFormat::ChannelsLast
};

Built build(const Case& c, Device dev) {
  Built b;
  b.model = c.make_model();
  b.model->to(dev, c.channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous);
  b.model->train();
  b.opt = std::make_unique<optim::AdamW>(b.model->parameters(), optim::AdamWOptions{.lr = 1e-4});
  auto [x, y] = c.make_batch(dev);
  if (c.channels_last) x = x.contiguous(MemoryFormat::ChannelsLast);
  nn::Module* model = b.model.get();
  optim::AdamW* opt = b.opt.get();
  const bool seq = c.sequence_loss;
  b.step = [model, opt, x, y, seq] {
    Tensor loss;
    {
      amp::AutocastGuard ac(kBFloat16);
      const Tensor out = (*model)(x);
      loss = seq ? nn::cross_entropy(out.reshape({-1, out.size(-1)}), y.reshape({-1})) : nn::cross_entropy(out, y);
    }
    opt->zero_grad();
    loss.backward();
    opt->step();
  };
  return b;
}

// ViT's forward FLOPs per image: the blocks' weights once per token (2 FLOPs per weight), attention's two products.
double vit_forward_flops(const models::ViTConfig& v) {
  const double tokens = static_cast<double>((v.image_size / v.patch_size) * (v.image_size / v.patch_size) + 1);
  const double block_weights = static_cast<double>(v.depth) * (4 + 2 * v.mlp_ratio) * v.dim * v.dim;
  const double patch_weights = 3.0 * v.patch_size * v.patch_size * v.dim;
  return 2 * block_weights * tokens + 2 * patch_weights * (tokens - 1) + 4.0 * v.depth * tokens * tokens * v.dim;
}

// GPT-2's forward FLOPs per token (nanoGPT's estimate: 2 per weight, the position table excluded, and 4 L T d for
// attention's products at full length).
double gpt2_forward_flops(const models::GPT2Config& g, int64_t t) {
  const double weights = static_cast<double>(g.n_layer) * 12 * g.n_embd * g.n_embd + double(g.vocab_size) * g.n_embd;
  return 2 * weights + 4.0 * g.n_layer * t * g.n_embd;
}

std::vector<Case> cases(bool small) {
  std::vector<Case> out;
  const int64_t rb = small ? 2 : 256, res = small ? 64 : 224;
  // ResNet-50: 4.09 G multiply-adds per 224x224 image (torchvision), scaling with the pixel count.
  const double resnet_fwd = 2 * 4.09e9 * (double(res) * res) / (224.0 * 224.0);
  auto image_batch = [](int64_t n, int64_t r, int64_t classes) {
    return [=](Device dev) {
      return std::pair{randn({n, 3, r, r}, {.device = dev}), randint(0, classes, {n}, {.dtype = kInt64, .device = dev})};
    };
  };
  out.push_back({"resnet50-b" + std::to_string(rb) + "-bf16-nchw", rb, double(rb), 3 * resnet_fwd * rb,
                 [] { return std::make_shared<models::ResNet>(models::resnet50()); }, image_batch(rb, res, 1000)});
  out.push_back({"resnet50-b" + std::to_string(rb) + "-bf16-channels-last", rb, double(rb), 3 * resnet_fwd * rb,
                 [] { return std::make_shared<models::ResNet>(models::resnet50()); }, image_batch(rb, res, 1000), false,
                 "", true});
  const models::ViTConfig vit = small ? models::ViTConfig{.image_size = 32, .patch_size = 8, .dim = 64, .depth = 2,
                                                          .heads = 4, .num_classes = 10}
                                      : models::ViTConfig{};
  const int64_t vb = small ? 2 : 128;
  for (bool ckpt : {false, true})
    out.push_back({"vit_b16-b" + std::to_string(vb) + "-bf16" + (ckpt ? "-checkpointed" : ""), vb, double(vb),
                   (ckpt ? 4.0 : 3.0) * vit_forward_flops(vit) * vb,
                   [vit, ckpt] {
                     auto m = std::make_shared<models::ViT>(vit);
                     m->set_grad_checkpointing(ckpt);
                     return std::shared_ptr<nn::Module>(m);
                   },
                   image_batch(vb, vit.image_size, vit.num_classes)});
  const models::GPT2Config gpt = small ? models::GPT2Config{.vocab_size = 100, .n_positions = 64, .n_embd = 32,
                                                            .n_layer = 2, .n_head = 2, .dropout = 0.0}
                                       : models::GPT2Config{.dropout = 0.0};
  const int64_t gb = small ? 2 : 16, gt = small ? 32 : 1024;
  const double tokens = double(gb) * gt;
  Case g{std::string(small ? "gpt2-small" : "gpt2-124M") + "-b" + std::to_string(gb) + "-T" + std::to_string(gt) + "-bf16", gb, tokens,
         3 * gpt2_forward_flops(gpt, gt) * tokens,
         [gpt] { return std::shared_ptr<nn::Module>(std::make_shared<models::GPT2>(gpt)); },
         [=](Device dev) {
           const TensorOptions o{.dtype = kInt64, .device = dev};
           return std::pair{randint(0, gpt.vocab_size, {gb, gt}, o), randint(0, gpt.vocab_size, {gb, gt}, o)};
         }};
  g.sequence_loss = true;
  out.push_back(g);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Milliseconds of each of `steps` steps (CUDA events on a GPU, the host's clock on the CPU).
std::vector<double> step_times(const std::function<void()>& step, Device dev, int steps) {
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    if (dev.is_cuda()) {
      cuda::Event a({.enable_timing = true}), b({.enable_timing = true});
      a.record();
      step();
      b.record();
      ms.push_back(a.elapsed_ms(b));
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      step();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  return ms;
}

struct Result {
  double step_ms;
  size_t peak, planned;
};

Result run(const Case& c, Device dev, int steps, bool with_plan) {
  size_t planned = 0;
  if (with_plan) {
    manual_seed(0);
    planned = memory::plan(dev, [&] {
      Built b = build(c, dev);
      b.step();
      b.step();
    }).peak_bytes;
  }
  if (dev.is_cuda()) {
    cuda::synchronize();
    cuda::empty_cache();
    cuda::reset_peak_memory_stats(dev);
  }
  manual_seed(0);
  Built b = build(c, dev);
  b.step();  // the optimiser's state, cuBLAS / cuDNN handles and workspaces, the allocator's blocks
  b.step();
  const double ms = median(step_times(b.step, dev, steps));
  if (dev.is_cuda()) cuda::synchronize();
  return {ms, dev.is_cuda() ? cuda::max_memory_allocated(dev) : 0, planned};
}



}  // namespace

int main(int argc, char** argv) {
  std::string device = "cuda", only;
  bool small = false, with_plan = true;
  int steps = 5;
  double peak_tflops = 989;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const bool has_value = i + 1 < argc;
    if (k == "--small") small = true;
    else if (k == "--no-plan") with_plan = false;
    else if (k == "--device" && has_value) device = argv[++i];
    else if (k == "--only" && has_value) only = argv[++i];
    else if (k == "--steps" && has_value) steps = std::max(1, std::atoi(argv[++i]));
    else if (k == "--peak-tflops" && has_value) peak_tflops = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "ember_bench_gpu_models: unknown or incomplete flag %s\n", k.c_str());
      return 2;
    }
  }
  if (device == "cuda" && !cuda::is_available()) {
    std::fprintf(stderr, "ember_bench_gpu_models: no usable GPU: %s\n", cuda::unavailable_reason().c_str());
    return 3;
  }
  const Device dev = device == "cuda" ? Device::cuda() : Device::cpu();
  const std::string device_name = dev.is_cuda() ? cuda::get_device_name(dev.index()) : "cpu";
  int failed = 0;
  for (const Case& c : cases(small)) {
    if (!bench::selected(only, c.name)) continue;
    if (!c.skipped.empty()) {
      std::printf("{\"impl\": \"ember\", \"case\": \"%s\", \"skipped\": \"%s\"}\n", c.name.c_str(), c.skipped.c_str());
      continue;
    }
    try {
      const Result r = run(c, dev, steps, with_plan);
      const double per_s = c.items / (r.step_ms * 1e-3);
      const double mfu = c.flops_per_step / (r.step_ms * 1e-3) / (peak_tflops * 1e12);
      std::printf("{\"impl\": \"ember\", \"device\": \"%s\", \"case\": \"%s\", \"batch\": %lld, \"items\": %.0f, "
                  "\"step_ms\": %.3f, \"items_per_s\": %.1f, \"mfu\": %.4f, \"peak_bytes\": %zu, "
                  "\"planned_peak_bytes\": %zu}\n",
                  device_name.c_str(), c.name.c_str(), static_cast<long long>(c.batch), c.items, r.step_ms, per_s,
                  mfu, r.peak, r.planned);
    } catch (const std::exception& e) {  // an out-of-memory or a missing kernel is that case's row
      ++failed;
      std::printf("{\"impl\": \"ember\", \"case\": \"%s\", \"error\": \"%s\"}\n", c.name.c_str(),
                  bench::json_text(e.what()).c_str());
    }
    std::fflush(stdout);
    if (dev.is_cuda()) cuda::empty_cache();
  }
  return failed ? 1 : 0;
}
