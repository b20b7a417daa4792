// Op-level benchmarks of the CPU backend: GEMM (GFLOP/s, against OpenBLAS sgemm in the same run when it is
// installed; and bfloat16, cpu_bf16_gemm()), elementwise add/mul/relu (GB/s), softmax, conv2d, and the end-to-end cost
// of one tiny op. Every benchmark runs on one thread unless its name says threads:2.
#include <benchmark/benchmark.h>
#include <ember/ember.h>
#include <ember/core/raw_ops.h>

#ifdef EMBER_BENCH_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

using namespace ember;

namespace {
void set_threads(const benchmark::State& s) { set_num_threads(static_cast<int>(s.range(1))); }

void BM_matmul(benchmark::State& s) {
  set_threads(s);
  const int64_t n = s.range(0);
  manual_seed(0);
  Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : s) benchmark::DoNotOptimize(matmul(a, b).data_ptr());
  s.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// The GEMM shapes of the training benchmarks (bench/train_table.sh): forward, input gradient and weight gradient of
// mlp-big's linears (batch 256) and of charlm's (4096 tokens, d 128), and the CNN's second convolution per image.
// Operands are the views the layers pass (x @ W^T, dy^T @ x); bench/torch_gemm_shapes.py times MKL on the same list.
struct GemmShape {
  const char* name;
  int64_t M, N, K;
  bool trans_a, trans_b;
};
constexpr GemmShape kGemmShapes[] = {
    {"cube1024", 1024, 1024, 1024, false, false},   {"mlp_fwd1", 256, 1024, 784, false, true},
    {"mlp_fwd2", 256, 1024, 1024, false, true},     {"mlp_dx2", 256, 1024, 1024, false, false},
    {"mlp_dw1", 1024, 784, 256, true, false},       {"mlp_dw2", 1024, 1024, 256, true, false},
    {"lm_qkv", 4096, 384, 128, false, true},        {"lm_proj", 4096, 128, 128, false, true},
    {"lm_up", 4096, 512, 128, false, true},         {"lm_down", 4096, 128, 512, false, true},
    {"lm_dx_up", 4096, 128, 512, false, false},     {"lm_dx_down", 4096, 512, 128, false, false},
    {"lm_dw_up", 512, 128, 4096, true, false},      {"lm_dw_down", 128, 512, 4096, true, false},
    {"lm_dw_qkv", 384, 128, 4096, true, false},     {"conv2_fwd", 64, 196, 800, false, false},
};

void BM_matmul_shape(benchmark::State& s) {
  set_threads(s);
  const GemmShape& g = kGemmShapes[s.range(0)];
  manual_seed(0);
  Tensor a = g.trans_a ? randn({g.K, g.M}).t() : randn({g.M, g.K});
  Tensor b = g.trans_b ? randn({g.N, g.K}).t() : randn({g.K, g.N});
  for (auto _ : s) benchmark::DoNotOptimize(matmul(a, b).data_ptr());
  s.SetLabel(g.name);
  s.counters["GFLOP/s"] = benchmark::Counter(2.0 * g.M * g.N * g.K, benchmark::Counter::kIsIterationInvariantRate,
                                             benchmark::Counter::kIs1000);
}

// bfloat16 operands and result; the label names the path (cpu_bf16_gemm(): "off" widens to float32).
void BM_matmul_bf16(benchmark::State& s) {
  set_threads(s);
  const int64_t n = s.range(0);
  manual_seed(0);
  Tensor a = randn({n, n}).to(kBFloat16), b = randn({n, n}).to(kBFloat16);
  for (auto _ : s) benchmark::DoNotOptimize(matmul(a, b).data_ptr());
  s.SetLabel("bf16 gemm: " + cpu_bf16_gemm() + ", isa: " + cpu_isa());
  s.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

#ifdef EMBER_BENCH_OPENBLAS
void BM_openblas_sgemm(benchmark::State& s) {
  openblas_set_num_threads(static_cast<int>(s.range(1)));
  const int64_t n = s.range(0);
  manual_seed(0);
  Tensor a = randn({n, n}), b = randn({n, n}), c = zeros({n, n});
  for (auto _ : s) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(n),
                static_cast<int>(n), 1.0f, a.data<float>(), static_cast<int>(n), b.data<float>(), static_cast<int>(n),
                0.0f, c.data<float>(), static_cast<int>(n));
    benchmark::ClobberMemory();
  }
  s.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
#endif

// Bytes moved per element: two reads and one write for binary ops, one read and one write for unary.
template <int Op>
void BM_elementwise(benchmark::State& s) {
  set_threads(s);
  const int64_t n = s.range(0);
  Tensor a = randn({n}), b = randn({n});
  for (auto _ : s) {
    Tensor y = Op == 0 ? a + b : (Op == 1 ? a * b : relu(a));
    benchmark::DoNotOptimize(y.data_ptr());
  }
  const double bytes = (Op == 2 ? 2.0 : 3.0) * 4.0 * static_cast<double>(n);
  s.counters["GB/s"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void BM_softmax(benchmark::State& s) {
  set_threads(s);
  Tensor x = randn({s.range(0), 1000});
  for (auto _ : s) benchmark::DoNotOptimize(softmax(x, 1).data_ptr());
  s.counters["GB/s"] =
      benchmark::Counter(8.0 * x.numel(), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// The example CNN's first two convolutions on a batch of 64.
void BM_conv2d(benchmark::State& s) {
  set_threads(s);
  const int64_t c = s.range(0), hw = c == 1 ? 28 : 14, oc = c == 1 ? 32 : 64;
  Tensor x = randn({64, c, hw, hw}), w = randn({oc, c, 5, 5}), b = randn({oc});
  for (auto _ : s) benchmark::DoNotOptimize(conv2d(x, w, b, {1}, {2}).data_ptr());
  s.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * 64 * oc * hw * hw * c * 25, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// Their gradients one at a time (input_grad 0: the weight's and the bias's; 1: the input's), the forward untimed.
void BM_conv2d_grad(benchmark::State& s) {
  set_threads(s);
  const int64_t c = s.range(0), hw = c == 1 ? 28 : 14, oc = c == 1 ? 32 : 64;
  const bool input = s.range(2) == 1;
  Tensor x = randn({64, c, hw, hw}).requires_grad_(input), w = randn({oc, c, 5, 5}).requires_grad_(!input),
         b = randn({oc}).requires_grad_(!input), gy = randn({64, oc, hw, hw});
  for (auto _ : s) {
    s.PauseTiming();
    Tensor y = conv2d(x, w, b, {1}, {2});
    s.ResumeTiming();
    y.backward(gy);
    s.PauseTiming();
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    b.set_grad(Tensor());
    s.ResumeTiming();
  }
  s.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * 64 * oc * hw * hw * c * 25, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// The charlm GPT's activation layers at its shapes (batch 32 x context 128 tokens), forward and backward: GELU on
// the MLP's [4096, 512], LayerNorm (with weight and bias) on [4096, 128]. bench/torch_ops_norm.py times PyTorch's.
// scale 6: inputs spread to |x| > 13 (3% of them), where float32 GELU's tail once went subnormal (~3.5x slower)
void BM_gelu_fwd_bwd(benchmark::State& s) {
  set_threads(s);
  manual_seed(0);
  Tensor x = (randn({4096, 512}) * static_cast<double>(s.range(2))).requires_grad_(true), g = randn({4096, 512});
  for (auto _ : s) {
    gelu(x).backward(g);
    x.set_grad(Tensor());
  }
}
void BM_layer_norm_fwd_bwd(benchmark::State& s) {
  set_threads(s);
  manual_seed(0);
  Tensor x = randn({4096, 128}).requires_grad_(true), g = randn({4096, 128});
  nn::LayerNorm ln(128);
  for (auto _ : s) {
    ln(x).backward(g);
    x.set_grad(Tensor());
  }
}

// cross_entropy from class indices, forward and backward: the fused kernels (nn::cross_entropy) against the
// composite they replaced (log_softmax, the picked entries by index_select; softmax scaled, one subtraction per row
// by index_add), on charlm's [4096, 96] and a GPT-2-sized [1024, 50257], float32 and bfloat16 (the composite
// widening bfloat16 to float32 first, as autocast's cast did). Args: rows, threads, classes, bf16.
void BM_cross_entropy(benchmark::State& s, bool fused) {
  set_threads(s);
  manual_seed(0);
  const int64_t n = s.range(0), c = s.range(2);
  const DType dt = s.range(3) ? kBFloat16 : kFloat32;
  Tensor z = randn({n, c}, {.dtype = dt}).requires_grad_(true);
  const Tensor y = randint(0, c, {n}, {.dtype = kInt64});
  const Tensor pos = arange(n, {.dtype = kInt64}) * c + y;
  for (auto _ : s) {
    if (fused) {
      nn::cross_entropy(z, y).backward();
    } else {
      const Tensor zf = z.detach().to(kFloat32);
      const Tensor loss = -raw::sum(raw::index_select(raw::reshape(raw::log_softmax(zf, 1), {-1}), 0, pos)) / n;
      Tensor d = raw::softmax(zf, 1);
      raw::binary_(BinaryOp::Mul, d, Scalar(1.0 / n));
      Tensor flat = raw::reshape(d, {-1});
      raw::index_add_(flat, 0, pos, full({n}, -1.0 / n));
      benchmark::DoNotOptimize(loss.data_ptr());
      z.set_grad(d.to(dt));
    }
    z.set_grad(Tensor());
  }
}

// End-to-end cost of one small op (checks, allocation from the cache, kernel, handle): add of two [64].
void BM_tiny_add(benchmark::State& s) {
  set_num_threads(1);
  Tensor a = randn({64}), b = randn({64});
  for (auto _ : s) benchmark::DoNotOptimize((a + b).data_ptr());
}
}  // namespace

BENCHMARK(BM_tiny_add);
BENCHMARK(BM_matmul)
    ->ArgsProduct({{64, 128, 256, 512, 1024, 2048}, {1}})
    ->ArgNames({"n", "threads"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_matmul_shape)
    ->ArgsProduct({benchmark::CreateDenseRange(0, std::size(kGemmShapes) - 1, 1), {1}})
    ->ArgNames({"shape", "threads"})
    ->Unit(benchmark::kMicrosecond);
#ifdef EMBER_BENCH_OPENBLAS
BENCHMARK(BM_openblas_sgemm)
    ->ArgsProduct({{64, 128, 256, 512, 1024, 2048}, {1}})
    ->ArgNames({"n", "threads"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_openblas_sgemm)->Args({1024, 2})->ArgNames({"n", "threads"})->Unit(benchmark::kMicrosecond);
#endif
BENCHMARK(BM_matmul)->Args({1024, 2})->ArgNames({"n", "threads"})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_matmul_bf16)
    ->ArgsProduct({{256, 1024}, {1, 2}})
    ->ArgNames({"n", "threads"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_elementwise<0>)
    ->Name("BM_add")
    ->ArgsProduct({{1 << 10, 1 << 16, 1 << 22}, {1}})
    ->ArgNames({"n", "threads"});
BENCHMARK(BM_elementwise<1>)
    ->Name("BM_mul")
    ->ArgsProduct({{1 << 10, 1 << 16, 1 << 22}, {1}})
    ->ArgNames({"n", "threads"});
BENCHMARK(BM_elementwise<2>)
    ->Name("BM_relu")
    ->ArgsProduct({{1 << 10, 1 << 16, 1 << 22}, {1}})
    ->ArgNames({"n", "threads"});
BENCHMARK(BM_elementwise<0>)->Name("BM_add")->Args({1 << 22, 2})->ArgNames({"n", "threads"});
BENCHMARK(BM_softmax)->ArgsProduct({{64, 1024}, {1}})->ArgNames({"rows", "threads"})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_gelu_fwd_bwd)
    ->ArgsProduct({{4096}, {1}, {1, 6}})
    ->ArgNames({"rows", "threads", "scale"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_cross_entropy, fused, true)
    ->ArgsProduct({{4096}, {1}, {96}, {0}})
    ->Args({1024, 1, 50257, 0})
    ->Args({1024, 1, 50257, 1})
    ->ArgNames({"rows", "threads", "classes", "bf16"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_cross_entropy, composite, false)
    ->ArgsProduct({{4096}, {1}, {96}, {0}})
    ->Args({1024, 1, 50257, 0})
    ->Args({1024, 1, 50257, 1})
    ->ArgNames({"rows", "threads", "classes", "bf16"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_layer_norm_fwd_bwd)->Args({4096, 1})->ArgNames({"rows", "threads"})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_conv2d)->ArgsProduct({{1, 32}, {1, 2}})->ArgNames({"in_ch", "threads"})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_conv2d_grad)
    ->ArgsProduct({{1, 32}, {1}, {0, 1}})
    ->ArgNames({"in_ch", "threads", "input_grad"})
    ->Unit(benchmark::kMillisecond);
