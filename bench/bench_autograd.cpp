// Autograd overhead: forward + backward of a chain of 1,000 tiny ops on a [64] float32 tensor (the ops
// cycle through mul-by-scalar, add, tanh), in Ember and — when built with libtorch — in libtorch, alternating
// the two in one run. Prints the median time per recorded op over several repetitions, and the ratio.
#include <ember/ember.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#ifdef EMBER_BENCH_TORCH
#include <torch/torch.h>
#endif

namespace {
constexpr int kOps = 1000, kReps = 15, kInner = 20;

template <class F>
double median_ns_per_op(F&& run_chain) {
  std::vector<double> t;
  for (int r = 0; r < kReps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kInner; ++i) run_chain();
    t.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
                (kInner * kOps));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double ember_chain() {
  ember::set_num_threads(1);
  ember::Tensor x = ember::randn({64}).requires_grad_();
  ember::Tensor c = ember::randn({64});
  return median_ns_per_op([&] {
    ember::Tensor y = x;
    for (int i = 0; i < kOps; ++i) y = i % 3 == 0 ? y * 0.999 : (i % 3 == 1 ? y + c : ember::tanh(y));
    ember::sum(y).backward();
    x.set_grad({});
  });
}

#ifdef EMBER_BENCH_TORCH
double torch_chain() {
  torch::set_num_threads(1);
  torch::Tensor x = torch::randn({64}).requires_grad_();
  torch::Tensor c = torch::randn({64});
  return median_ns_per_op([&] {
    torch::Tensor y = x;
    for (int i = 0; i < kOps; ++i) y = i % 3 == 0 ? y * 0.999 : (i % 3 == 1 ? y + c : torch::tanh(y));
    y.sum().backward();
    x.mutable_grad().reset();
  });
}
#endif
}  // namespace

int main() {
  std::vector<double> e, t;
  for (int round = 0; round < 3; ++round) {  // alternate the frameworks
    e.push_back(ember_chain());
#ifdef EMBER_BENCH_TORCH
    t.push_back(torch_chain());
#endif
  }
  std::sort(e.begin(), e.end());
  std::printf("ember:    %.0f ns per recorded op (forward + backward, median)\n", e[1]);
#ifdef EMBER_BENCH_TORCH
  std::sort(t.begin(), t.end());
  std::printf("libtorch: %.0f ns per recorded op (forward + backward, median)\n", t[1]);
  std::printf("ratio libtorch/ember: %.2fx (higher: ember lighter)\n", t[1] / e[1]);
#else
  std::printf("libtorch: not built (install libtorch-dev and reconfigure to compare)\n");
#endif
  return 0;
}
