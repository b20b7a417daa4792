// Peak memory and time of one forward + backward of attention over [1, H, T, d], tiled
// (scaled_dot_product_attention) against the plain composite softmax(q k^T / sqrt(d)) v, for T = 512 ... 8192.
// The peak is the CPU caching allocator's high-water mark above what was live before the step (q, k, v), so it
// counts exactly the op's own tensors: outputs, saved activations, gradients and temporaries.
//   ember_bench_attention [--batch B] [--heads H] [--d D] [--min-t T] [--max-t T] [--causal] [--device cpu|cuda]
#include <ember/ember.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

Tensor naive(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  Tensor s = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  if (causal) {
    Tensor i = arange(q.size(-2), {.dtype = kInt64, .device = q.device()}).unsqueeze(1);
    Tensor j = arange(k.size(-2), {.dtype = kInt64, .device = q.device()}).unsqueeze(0);
    s = where(le(j, i), s, full({}, -INFINITY, {.device = q.device()}));
  }
  return matmul(softmax(s, -1), v);
}

size_t live_bytes(Device dev) {
  return dev.is_cuda() ? cuda::memory_allocated(dev) : cpu_memory_stats().bytes_in_use;
}
size_t peak_bytes(Device dev) {
  return dev.is_cuda() ? cuda::max_memory_allocated(dev) : cpu_memory_stats().peak_bytes_in_use;
}
void reset_peak(Device dev) {
  if (dev.is_cuda()) cuda::reset_peak_memory_stats(dev);
  else cpu_reset_peak_memory_stats();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 1, heads = 4, d = 64, min_t = 512, max_t = 8192;
  bool causal = false;
  Device dev = Device::cpu();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--causal") causal = true;
    else if (a == "--heads" && i + 1 < argc) heads = std::stoll(argv[++i]);
    else if (a == "--d" && i + 1 < argc) d = std::stoll(argv[++i]);
    else if (a == "--max-t" && i + 1 < argc) max_t = std::stoll(argv[++i]);
    else if (a == "--min-t" && i + 1 < argc) min_t = std::stoll(argv[++i]);
    else if (a == "--batch" && i + 1 < argc) batch = std::stoll(argv[++i]);
    else if (a == "--device" && i + 1 < argc) dev = std::string(argv[++i]) == "cuda" ? Device::cuda() : Device::cpu();
    else {
      std::fprintf(stderr, "usage: ember_bench_attention [--batch B] [--heads H] [--d D] [--min-t T] [--max-t T] [--causal] [--device cpu|cuda]\n");
      return 2;
    }
  }
  std::printf("attention forward + backward, [%lld, %lld, T, %lld] float32, %s, on %s, %d threads\n",
              static_cast<long long>(batch), static_cast<long long>(heads), static_cast<long long>(d), causal ? "causal" : "no mask",
              dev.to_string().c_str(), get_num_threads());
  std::printf("| T | tiled peak (MiB) | composite peak (MiB) | tiled ms | composite ms |\n|---|---|---|---|---|\n");
  for (int64_t T = min_t; T <= max_t; T *= 2) {
    manual_seed(0);
    const TensorOptions o{.device = dev};
    Tensor q = randn({batch, heads, T, d}, o).requires_grad_(true), k = randn({batch, heads, T, d}, o).requires_grad_(true),
           v = randn({batch, heads, T, d}, o).requires_grad_(true);
    double peak[2], ms[2];
    for (int impl = 0; impl < 2; ++impl) {
      for (int rep = 0; rep < 2; ++rep) {  // the second run is measured (the first warms the caches)
        q.set_grad({});
        k.set_grad({});
        v.set_grad({});
        if (dev.is_cuda()) cuda::synchronize();
        const size_t base = live_bytes(dev);
        reset_peak(dev);
        const auto t0 = Clock::now();
        Tensor y = impl == 0 ? scaled_dot_product_attention(q, k, v, {.causal = causal}) : naive(q, k, v, causal);
        sum(y).backward();
        if (dev.is_cuda()) cuda::synchronize();
        ms[impl] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        peak[impl] = static_cast<double>(peak_bytes(dev) - base) / (1 << 20);
      }
    }
    std::printf("| %lld | %.1f | %.1f | %.1f | %.1f |\n", static_cast<long long>(T), peak[0], peak[1], ms[0], ms[1]);
    std::fflush(stdout);
  }
  return 0;
}
