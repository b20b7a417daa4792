// Ember's side of the GPU comparison with PyTorch (../shared/device/torch_reference.py is the PyTorch side):
// the same configurations, random inputs with Fashion-MNIST's shapes held on the GPU, Adam 1e-3,
// cross-entropy, TF32 off; per config the median step time by CUDA events (one step between two events),
// samples/s over back-to-back steps (no sync per step, what a training loop sees) and the peak of
// cuda::max_memory_allocated; then host -> device bandwidth from pageable and from pinned memory.
//   ember_bench_gpu [--steps 200] [--warmup 20] [--only mlp-b64,cnn-b64]
// Prints one JSON line per figure (the keys torch_reference.py uses) and a table last. Without a usable GPU it
// says why and exits with status 3.
#include <ember/ember.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "models.h"

namespace {
using namespace ember;
using Clock = std::chrono::steady_clock;

struct Config {
  std::string name;
  std::string model;  // bench::model's name
  int64_t batch;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Row {
  std::string name;
  int64_t batch;
  double step_ms, samples_per_s;
  size_t peak;
};

Row run(const Config& c, int steps, int warmup, Device dev) {
  manual_seed(0);
  nn::Chain model = bench::model(c.model);
  model.to(dev);
  optim::Adam opt(model.parameters(), {.lr = 1e-3});
  const int nb = 16;  // rotate among several batches so inputs are not one cached buffer
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < nb; ++i) {
    xs.push_back(rand({c.batch, 1, 28, 28}, {.device = dev}));
    ys.push_back(randint(0, 10, {c.batch}, {.dtype = kInt64, .device = dev}));
  }
  auto step = [&](int i) {
    Tensor loss = nn::cross_entropy(model(xs[static_cast<size_t>(i % nb)]), ys[static_cast<size_t>(i % nb)]);
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < warmup; ++i) step(i);
  cuda::synchronize();
  cuda::reset_peak_memory_stats(dev);
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    cuda::Event a({.enable_timing = true}), b({.enable_timing = true});
    a.record();
    step(i);
    b.record();
    times.push_back(a.elapsed_ms(b));
  }
  cuda::synchronize();
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) step(i);
  cuda::synchronize();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  return {c.name, c.batch, median(times), static_cast<double>(c.batch) * steps / wall, cuda::max_memory_allocated(dev)};
}

// Median time of a 64 or 256 MiB host -> device copy, pageable or pinned source, as GB/s.
double h2d_gbps(int64_t mib, bool pinned, Device dev) {
  const int64_t n = mib * (int64_t{1} << 20) / 4;
  Tensor src = empty({n});
  if (pinned) src = src.pin_memory();
  Tensor dst = empty({n}, {.device = dev});
  for (int i = 0; i < 3; ++i) dst.copy_(src, /*non_blocking=*/true);
  cuda::synchronize();
  std::vector<double> ms;
  for (int i = 0; i < 10; ++i) {
    cuda::Event a({.enable_timing = true}), b({.enable_timing = true});
    a.record();
    dst.copy_(src, /*non_blocking=*/true);
    b.record();
    ms.push_back(a.elapsed_ms(b));
  }
  return static_cast<double>(mib) * (1 << 20) / (median(ms) / 1000) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 200, warmup = 20;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--warmup")) warmup = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
  }
  if (!cuda::is_available()) {
    std::fprintf(stderr, "ember_bench_gpu: no usable GPU: %s\n", cuda::unavailable_reason().c_str());
    return 3;
  }
  try {
    const Device dev = Device::cuda();
    cuda::set_allow_tf32(false);  // Ember's default; PyTorch's side turns TF32 off too
    const std::vector<Config> configs = {{"mlp-b64", "mlp", 64},
                                         {"mlp-b256", "mlp", 256},
                                         {"mlp-big", "mlp-big", 256},
                                         {"mlp-big-b4096", "mlp-big", 4096},
                                         {"cnn-b64", "cnn", 64}};
    const std::string device_name = cuda::get_device_name(dev.index());
    std::vector<Row> rows;
    for (const Config& c : configs) {
      if (!only.empty() && ("," + only + ",").find("," + c.name + ",") == std::string::npos) continue;
      Row r = run(c, steps, warmup, dev);
      std::printf(
          "{\"impl\": \"ember\", \"device\": \"%s\", \"config\": \"%s\", \"batch\": %lld, "
          "\"median_step_ms\": %.4f, \"samples_per_s\": %.1f, \"peak_bytes\": %zu}\n",
          device_name.c_str(), r.name.c_str(), static_cast<long long>(r.batch), r.step_ms, r.samples_per_s, r.peak);
      std::fflush(stdout);
      rows.push_back(r);
    }
    for (int64_t mib : {64, 256})
      for (bool pinned : {false, true})
        std::printf("{\"impl\": \"ember\", \"config\": \"h2d-%s-%lldMiB\", \"GBps\": %.2f}\n",
                    pinned ? "pinned" : "pageable", static_cast<long long>(mib), h2d_gbps(mib, pinned, dev));
    std::printf("%-16s%6s%16s%12s%10s\n", "config", "batch", "median step ms", "samples/s", "peak MiB");
    for (const Row& r : rows)
      std::printf("%-16s%6lld%16.3f%12.0f%10.1f\n", r.name.c_str(), static_cast<long long>(r.batch), r.step_ms,
                  r.samples_per_s, static_cast<double>(r.peak) / (1 << 20));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember_bench_gpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
