// tests: Backend::gemm_epilogue (a linear layer's GEMM with GELU, its derivative or a bias gradient folded in:
// cuBLASLt's epilogues on CUDA, the composed steps elsewhere) and linear's bias (cuBLASLt's BIAS epilogue on CUDA)
// against float64 references made on the CPU from the same rounded inputs: every epilogue, float32 / bfloat16 /
// float16 / float64, both GELUs, with and without the bias (gradient), a hidden width cuBLASLt takes (8) and one
// it does not (6, CUDA's composed steps), in the layouts the raw ops hand over (transposed views). Each body runs
// on the GPU (skipped without one) and again with the CPU in the GPU's place.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include <ember/core/backend.h>
#include <ember/core/raw_ops.h>

#include "gpu_or_cpu.h"

namespace ember {
namespace {

class GemmEpilogueCuda : public CudaSuite {};

Tensor rnd(const Shape& s, uint64_t seed, DType dt) {
  manual_seed(seed);
  return (randn(s, {.dtype = kFloat64}) * 0.5).to(dt);
}
Tensor f64(const Tensor& t) { return raw::cast(t.to(Device::cpu()), kFloat64); }
Tensor empty_on(const Shape& s, DType dt) { return empty(s, {.dtype = dt, .device = g_dev}); }

// |got - ref| <= tol * (1 + |ref|) elementwise, tol by dtype: float32 and float64 to their GEMM's rounding;
// 16-bit floats to a few units of their last place (cuBLASLt applies GELU to the float accumulator before rounding
// where the composed steps round the GEMM first). A sum of `terms` rounded values (a bias gradient summed from a
// 16-bit output) gets sqrt(terms) times that.
void expect_close(const Tensor& got, const Tensor& ref, const std::string& what, int64_t terms = 1) {
  ASSERT_EQ(got.device(), g_dev) << what;
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  const double tol = (got.dtype() == kFloat64 ? 1e-12 : got.dtype() == kFloat32 ? 2e-5 : 3e-2) *
                     std::sqrt(static_cast<double>(terms));
  const std::vector<double> g = f64(got).to_vector<double>(), r = ref.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::abs(g[i] - r[i]), tol * (1 + std::abs(r[i]))) << what << " at " << i << ": " << g[i] << " vs " << r[i];
}

Tensor gelu_ref(const Tensor& x, bool tanh) { return raw::unary(tanh ? UnaryOp::GeluTanh : UnaryOp::Gelu, x); }
Tensor gelu_grad_ref(const Tensor& x, bool tanh) {
  return raw::unary(tanh ? UnaryOp::GeluTanhGrad : UnaryOp::GeluGrad, x);
}

struct Case {
  DType dt;
  bool tanh, bias;
  int64_t hidden;
  std::string name() const {
    return std::string(ember::name(dt)) + (tanh ? " tanh" : " exact") + (bias ? " bias" : " no bias") + " hidden " +
           std::to_string(hidden);
  }
};
std::vector<Case> cases() {
  std::vector<Case> cs;
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64})
    for (bool tanh : {true, false})
      for (bool bias : {true, false})
        for (int64_t hidden : {8, 6}) cs.push_back({dt, tanh, bias, hidden});
  return cs;
}

// gelu(x w^T + b) and its input, x [rows, in] and w [hidden, in] (b the transposed view w^T, as raw::linear_gelu).
EMBER_GPU_AND_CPU_TEST(GemmEpilogueCuda, GemmEpilogueCpu, BiasGeluMatchesTheFloat64Reference) {
  for (const Case& c : cases()) {
    const int64_t rows = 37, in = 24;
    const Tensor x = rnd({rows, in}, 1, c.dt), w = rnd({c.hidden, in}, 2, c.dt), b = rnd({c.hidden}, 3, c.dt);
    GemmEpilogueArgs a{.epilogue = GemmEpilogue::BiasGelu, .a = x.to(g_dev), .b = raw::transpose(w.to(g_dev), 0, 1),
                       .bias = c.bias ? b.to(g_dev) : Tensor(), .gelu_tanh = c.tanh};
    a.out = empty_on({rows, c.hidden}, c.dt);
    a.aux = empty_on({rows, c.hidden}, c.dt);
    backend_for(g_dev).gemm_epilogue(a);
    Tensor pre = raw::matmul(f64(x), raw::transpose(f64(w), 0, 1));
    if (c.bias) pre = raw::binary(BinaryOp::Add, pre, raw::expand(f64(b), pre.shape()));
    expect_close(a.aux, pre, "BiasGelu aux, " + c.name());
    expect_close(a.out, gelu_ref(pre, c.tanh), "BiasGelu out, " + c.name());
  }
}

// (g w) * gelu'(pre) and its column sums, g [rows, out] and w [out, hidden] both as they lie.
EMBER_GPU_AND_CPU_TEST(GemmEpilogueCuda, GemmEpilogueCpu, DGeluMatchesTheFloat64Reference) {
  for (const Case& c : cases()) {
    const int64_t rows = 41, out = 16;
    const Tensor g = rnd({rows, out}, 4, c.dt), w = rnd({out, c.hidden}, 5, c.dt), pre = rnd({rows, c.hidden}, 6, c.dt);
    GemmEpilogueArgs a{.epilogue = GemmEpilogue::DGelu, .a = g.to(g_dev), .b = w.to(g_dev), .aux = pre.to(g_dev),
                       .gelu_tanh = c.tanh};
    a.out = empty_on({rows, c.hidden}, c.dt);
    if (c.bias) a.bias_grad = empty_on({c.hidden}, c.dt);
    backend_for(g_dev).gemm_epilogue(a);
    const Tensor ref = raw::binary(BinaryOp::Mul, raw::matmul(f64(g), f64(w)), gelu_grad_ref(f64(pre), c.tanh));
    expect_close(a.out, ref, "DGelu out, " + c.name());
    if (c.bias) expect_close(a.bias_grad, raw::sum(ref, {0}), "DGelu bias_grad, " + c.name(), rows);
  }
}

// g^T x and g's column sums, g [rows, out] handed over as the view g^T (as raw::linear_weight_grads).
EMBER_GPU_AND_CPU_TEST(GemmEpilogueCuda, GemmEpilogueCpu, BGradAMatchesTheFloat64Reference) {
  for (const Case& c : cases()) {
    if (c.tanh) continue;  // no GELU here: one pass per dtype, bias and width
    const int64_t rows = 45, in = c.hidden;
    const Tensor g = rnd({rows, 16}, 7, c.dt), x = rnd({rows, in}, 8, c.dt);
    GemmEpilogueArgs a{.epilogue = GemmEpilogue::BGradA, .a = raw::transpose(g.to(g_dev), 0, 1), .b = x.to(g_dev)};
    a.out = empty_on({16, in}, c.dt);
    if (c.bias) a.bias_grad = empty_on({16}, c.dt);
    backend_for(g_dev).gemm_epilogue(a);
    expect_close(a.out, raw::matmul(raw::transpose(f64(g), 0, 1), f64(x)), "BGradA out, " + c.name());
    if (c.bias) expect_close(a.bias_grad, raw::sum(f64(g), {0}), "BGradA bias_grad, " + c.name());
  }
}

// linear with a bias (cuBLASLt's BIAS epilogue on CUDA for float32 / 16-bit floats), plain and on a transposed
// input, against the float64 product plus bias.
EMBER_GPU_AND_CPU_TEST(GemmEpilogueCuda, GemmEpilogueCpu, LinearBiasMatchesTheFloat64Reference) {
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64})
    for (bool transposed : {false, true}) {
      const Tensor x = transposed ? raw::transpose(rnd({24, 33}, 9, dt), 0, 1) : rnd({33, 24}, 9, dt);
      const Tensor w = rnd({10, 24}, 10, dt), b = rnd({10}, 11, dt);
      const Tensor y = raw::linear(x.to(g_dev), w.to(g_dev), b.to(g_dev));
      Tensor ref = raw::matmul(f64(x), raw::transpose(f64(w), 0, 1));
      ref = raw::binary(BinaryOp::Add, ref, raw::expand(f64(b), ref.shape()));
      expect_close(y, ref, std::string("linear + bias, ") + ember::name(dt) + (transposed ? " transposed x" : ""));
    }
}

}  // namespace
}  // namespace ember
