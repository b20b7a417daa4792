// Ember's side of the GPU op benchmark (bench/torch_gpu_ops.py is PyTorch's, same cases, shapes and timing): the
// ops a full-size training step spends its time in besides matmul (issue 57), each forward + backward. Per case:
// warm-up, then the median over --reps of the mean time of --iters back-to-back iterations between two CUDA events
// (no host sync inside), and the rate from a nominal work count both sides share: FLOPs (attention: 3.5x the forward's
// 4 B H T^2 d, halved when causal; the GEMMs: 3x the forward's) or bytes (the norms and the loss: the passes a fused
// kernel cannot avoid, at the tensor's dtype — so "GB/s" compares, it is not a DRAM counter).
//   ember_bench_gpu_ops [--device cuda|cpu] [--small] [--only attn,layernorm,...] [--reps 5] [--iters 3]
// --small (any device) runs every case at a toy size: a check of the program, not a figure. One JSON line per
// case: {"impl", "device", "case", "ms", "work", "unit", "rate"}, or {"case", "skipped": why}. Without a usable GPU
// (and --device cuda) it says why and exits 3.
#include <ember/ember.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gpu_bench_util.h"

namespace {
using namespace ember;

struct Case {
  std::string name;
  std::function<std::function<void()>()> make;  // builds the inputs, returns one forward + backward
  double work;                                  // FLOPs or bytes per iteration
  std::string unit;                             // "TFLOP/s" or "GB/s"
  std::string skipped;                          // why Ember has no form of this case yet
};

struct Sizes {
  int64_t tokens = 16384;  // B * T of the attention cases, rows of the norm / loss / linear cases
  int64_t width = 1024;    // H * d of the attention cases
  int64_t ln_dim = 768, vocab = 50304, hidden = 3072;
  int64_t conv_n = 256, conv_c = 64, conv_hw = 56;
  std::vector<int64_t> seqs = {1024, 4096};
  std::vector<int64_t> head_dims = {64, 128};
};

Sizes small_sizes() {
  return {.tokens = 128, .width = 32, .ln_dim = 48, .vocab = 100, .hidden = 64,
          .conv_n = 2, .conv_c = 4, .conv_hw = 8, .seqs = {32, 64}, .head_dims = {16}};
}

Tensor leaf(Tensor t) { return t.requires_grad_(true); }

// The gradients of `out` against `inputs` for a fixed output gradient (torch.autograd.grad on the other side:
// nothing accumulates into .grad between iterations).
void backward(const Tensor& out, const std::vector<Tensor>& inputs, const Tensor& gout) {
  (void)autograd::grad({out}, inputs, {gout});
}

std::vector<Case> attention_cases(const Sizes& s, Device dev) {
  std::vector<Case> cases;
  for (int64_t d : s.head_dims)
    for (int64_t t : s.seqs)
      for (bool causal : {true, false}) {
        const int64_t b = std::max<int64_t>(1, s.tokens / t), h = std::max<int64_t>(1, s.width / d);
        const double fwd = 4.0 * b * h * t * t * d * (causal ? 0.5 : 1.0);
        const std::string name = "attn-bf16-d" + std::to_string(d) + "-T" + std::to_string(t) + "-b" +
                                 std::to_string(b) + "h" + std::to_string(h) + (causal ? "-causal" : "-full");
        cases.push_back({name,
                         [=] {
                           const TensorOptions o{.dtype = kBFloat16, .device = dev};
                           Tensor q = leaf(randn({b, h, t, d}, o)), k = leaf(randn({b, h, t, d}, o)),
                                  v = leaf(randn({b, h, t, d}, o)), g = randn({b, h, t, d}, o);
                           return [=] { backward(scaled_dot_product_attention(q, k, v, {.causal = causal}), {q, k, v}, g); };
                         },
                         3.5 * fwd, "TFLOP/s", ""});
      }
  return cases;
}

std::vector<Case> other_cases(const Sizes& s, Device dev) {
  const int64_t n = s.tokens, dm = s.ln_dim;
  const TensorOptions f32{.device = dev}, bf16{.dtype = kBFloat16, .device = dev};
  std::vector<Case> cases;
  // LayerNorm as a transformer runs it (float32 under autocast on both sides): read x, write y; read x and dy,
  // write dx.
  cases.push_back({"layernorm-f32-" + std::to_string(n) + "x" + std::to_string(dm),
                   [=] {
                     Tensor x = leaf(randn({n, dm}, f32)), w = leaf(ones({dm}, f32)), b = leaf(zeros({dm}, f32)),
                            g = randn({n, dm}, f32);
                     return [=] { backward(layer_norm(x, {dm}, w, b), {x, w, b}, g); };
                   },
                   5.0 * n * dm * 4, "GB/s", ""});
  // BatchNorm + ReLU (fused, as ResNet's blocks) on a bf16 convolution's output under bf16 autocast (ResNet-50's
  // first stage), training mode.
  const int64_t cn = s.conv_n, cc = s.conv_c, hw = s.conv_hw;
  const double act = static_cast<double>(cn) * cc * hw * hw;
  cases.push_back({"batchnorm-relu-bf16-" + std::to_string(cn) + "x" + std::to_string(cc) + "x" + std::to_string(hw),
                   [=] {
                     Tensor x = leaf(randn({cn, cc, hw, hw}, bf16)), w = leaf(ones({cc}, f32)),
                            b = leaf(zeros({cc}, f32)), rm = zeros({cc}, f32), rv = ones({cc}, f32),
                            g = randn({cn, cc, hw, hw}, bf16);
                     return [=] {
                       Tensor y;
                       {
                         amp::AutocastGuard ac(kBFloat16);
                         y = batch_norm_relu(x, rm, rv, w, b, /*training=*/true);  // as ResNet's blocks
                       }
                       backward(y, {x, w, b}, g.to(y.dtype()));
                     };
                   },
                   5.0 * act * 2, "GB/s", ""});
  // cross_entropy of bf16 logits from class indices under autocast (GPT-2's loss): read the logits, then read them
  // again and write their gradient.
  const int64_t v = s.vocab;
  cases.push_back({"cross-entropy-bf16-" + std::to_string(n) + "x" + std::to_string(v),
                   [=] {
                     Tensor logits = leaf(randn({n, v}, bf16)),
                            y = randint(0, v, {n}, {.dtype = kInt64, .device = dev});
                     return [=] {
                       Tensor loss;
                       {
                         amp::AutocastGuard ac(kBFloat16);
                         loss = nn::cross_entropy(logits, y);
                       }
                       backward(loss, {logits}, ones_like(loss));
                     };
                   },
                   3.0 * n * v * 2, "GB/s", ""});
  // linear + tanh GELU in bf16 (a transformer MLP's first half): three GEMMs of 2 n dm hidden each.
  const int64_t hid = s.hidden;
  cases.push_back({"linear-gelu-bf16-" + std::to_string(n) + "x" + std::to_string(dm) + "x" + std::to_string(hid),
                   [=] {
                     Tensor x = leaf(randn({n, dm}, bf16)), w = leaf(randn({hid, dm}, bf16) * 0.03),
                            b = leaf(zeros({hid}, bf16)), g = randn({n, hid}, bf16);
                     return [=] {
                       backward(gelu(linear(x, w, b), {.approximate = GeluApproximate::Tanh}), {x, w, b}, g);
                     };
                   },
                   3.0 * 2.0 * n * dm * hid, "TFLOP/s", ""});
  // The whole MLP, fc2(gelu_tanh(fc1(x))), as GPT-2 runs it (one op: cuBLASLt's epilogues fold the biases, GELU,
  // its derivative and the bias gradients into the six GEMMs of 2 n dm hidden each).
  cases.push_back({"mlp-gelu-bf16-" + std::to_string(n) + "x" + std::to_string(dm) + "x" + std::to_string(hid),
                   [=] {
                     Tensor x = leaf(randn({n, dm}, bf16)), w1 = leaf(randn({hid, dm}, bf16) * 0.03),
                            b1 = leaf(zeros({hid}, bf16)), w2 = leaf(randn({dm, hid}, bf16) * 0.02),
                            b2 = leaf(zeros({dm}, bf16)), g = randn({n, dm}, bf16);
                     return [=] {
                       const Tensor y =
                           linear_gelu_linear(x, w1, b1, w2, b2, {.approximate = GeluApproximate::Tanh});
                       backward(y, {x, w1, b1, w2, b2}, g);
                     };
                   },
                   6.0 * 2.0 * n * dm * hid, "TFLOP/s", ""});
  // A 3x3 convolution of ResNet-50's first stage in bf16, no bias: forward, input and weight gradients.
  const double conv_flops = 3.0 * 2.0 * act * cc * 9;
  const std::string conv = "conv3x3-bf16-" + std::to_string(cn) + "x" + std::to_string(cc) + "x" + std::to_string(hw);
  cases.push_back({conv + "-nchw",
                   [=] {
                     Tensor x = leaf(randn({cn, cc, hw, hw}, bf16)), w = leaf(randn({cc, cc, 3, 3}, bf16) * 0.05),
                            g = randn({cn, cc, hw, hw}, bf16);
                     return [=] { backward(conv2d(x, w, {}, {1}, {1}), {x, w}, g); };
                   },
                   conv_flops, "TFLOP/s", ""});
  cases.push_back({conv + "-nhwc",
                   [=] {
                     constexpr MemoryFormat cl = MemoryFormat::ChannelsLast;
                     Tensor x = leaf(randn({cn, cc, hw, hw}, bf16).contiguous(cl)),
                            w = leaf((randn({cc, cc, 3, 3}, bf16) * 0.05).contiguous(cl)),
                            g = randn({cn, cc, hw, hw}, bf16).contiguous(cl);
                     return [=] { backward(conv2d(x, w, {}, {1}, {1}), {x, w}, g); };
                   },
                   conv_flops, "TFLOP/s", ""});
  return cases;
}

// Milliseconds per call of f: the median over `reps` of `iters` back-to-back calls between two events.
double time_ms(const std::function<void()>& f, Device dev, int reps, int iters) {
  f();  // warm-up: kernels' first launches, the caching allocator, cuBLAS / cuDNN handles
  f();
  std::vector<double> per;
  for (int r = 0; r < reps; ++r) {
    if (dev.is_cuda()) {
      cuda::synchronize();
      cuda::Event a({.enable_timing = true}), b({.enable_timing = true});
      a.record();
      for (int i = 0; i < iters; ++i) f();
      b.record();
      per.push_back(a.elapsed_ms(b) / iters);
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) f();
      per.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / iters);
    }
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}


}  // namespace

int main(int argc, char** argv) {
  std::string device = "cuda", only;
  bool small = false;
  int reps = 5, iters = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const bool has_value = i + 1 < argc;
    if (k == "--small") small = true;
    else if (k == "--device" && has_value) device = argv[++i];
    else if (k == "--only" && has_value) only = argv[++i];
    else if (k == "--reps" && has_value) reps = std::max(1, std::atoi(argv[++i]));
    else if (k == "--iters" && has_value) iters = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "ember_bench_gpu_ops: unknown or incomplete flag %s\n", k.c_str());
      return 2;
    }
  }
  if (device == "cuda" && !cuda::is_available()) {
    std::fprintf(stderr, "ember_bench_gpu_ops: no usable GPU: %s\n", cuda::unavailable_reason().c_str());
    return 3;
  }
  try {
    const Device dev = device == "cuda" ? Device::cuda() : Device::cpu();
    if (dev.is_cuda()) cuda::set_allow_tf32(false);
    const std::string device_name = dev.is_cuda() ? cuda::get_device_name(dev.index()) : "cpu";
    const Sizes sizes = small ? small_sizes() : Sizes{};
    std::vector<Case> cases = attention_cases(sizes, dev);
    for (Case& c : other_cases(sizes, dev)) cases.push_back(std::move(c));
    int failed = 0;
    for (const Case& c : cases) {
      if (!bench::selected(only, c.name)) continue;
      if (!c.skipped.empty()) {
        std::printf("{\"impl\": \"ember\", \"case\": \"%s\", \"skipped\": \"%s\"}\n", c.name.c_str(), c.skipped.c_str());
        continue;
      }
      try {
        manual_seed(0);
        const double ms = time_ms(c.make(), dev, reps, iters);
        const double rate = c.work / (ms * 1e-3) / (c.unit == "TFLOP/s" ? 1e12 : 1e9);
        std::printf("{\"impl\": \"ember\", \"device\": \"%s\", \"case\": \"%s\", \"ms\": %.4f, \"work\": %.6g, "
                    "\"unit\": \"%s\", \"rate\": %.3f}\n",
                    device_name.c_str(), c.name.c_str(), ms, c.work, c.unit.c_str(), rate);
      } catch (const std::exception& e) {  // one case's failure (an OOM, a dtype not served) is that case's row
        ++failed;
        std::printf("{\"impl\": \"ember\", \"case\": \"%s\", \"error\": \"%s\"}\n", c.name.c_str(),
                    bench::json_text(e.what()).c_str());
      }
      std::fflush(stdout);
      if (dev.is_cuda()) cuda::empty_cache();
    }
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember_bench_gpu_ops: %s\n", e.what());
    return 1;
  }
}
