// tests: the CUDA kernels against the CPU backend, op by op and dtype by dtype, on the paths the float32
// op table (test_ops_vs_cpu.cpp) does not reach: integer, bool, float16 and bfloat16 elementwise ops (wrap,
// NaN, comparisons), the vectorised / scalar-broadcast / strided / misaligned elementwise paths, every
// reduction (incl. prod, argmax ties, the chunked path of large reductions, float16), softmax's row and column
// kernels, matmul (transposed, batch-broadcast, integer, float16, empty K), conv2d in float64 and float16,
// max-pool ties, index_select / index_add for every dtype, argsort (both kernel paths, every dtype, ties, NaN of
// either sign, -0, integer extremes), Philox random numbers (the same as the CPU's for the same seed), and casts
// between every pair of dtypes (the packed contiguous path and the strided one). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <ember/core/backend.h>
#include <ember/core/raw_ops.h>

#include "gpu_or_cpu.h"

namespace ember {
namespace {

// Every dtype, op and reduction comes from the one list (ember/core/op_list.h), so an op added there is
// compared on both devices here without a line of this file changing (as ggml's test-backend-ops).
const std::vector<DType> kAll(kAllDTypes.begin(), kAllDTypes.end());
const std::vector<DType> kFloats = [] {
  std::vector<DType> v;
  for (DType dt : kAllDTypes)
    if (is_floating(dt)) v.push_back(dt);
  return v;
}();

// Ops defined on part of the real line get inputs inside it.
bool positive_domain(UnaryOp op) { return op == UnaryOp::Sqrt || op == UnaryOp::Log || op == UnaryOp::Log1p; }
// Ops raw::unary / raw::binary refuse for a dtype (with a DTypeError; tested in tests/core).
bool refused(UnaryOp op, DType dt) { return dt == kBool && op == UnaryOp::Neg; }
bool refused(BinaryOp op, DType dt) { return dt == kBool && (op == BinaryOp::Sub || op == BinaryOp::Pow); }

// Values that suit `dt`: small signed integers (some repeated: ties), or 0/1 for bool, or floats.
Tensor make(DType dt, const Shape& s, uint64_t seed) {
  manual_seed(seed);
  Tensor x = randn(s, {.dtype = kFloat64}) * 3.0;
  if (dt == kBool) return gt(x, 0.0);
  if (dt == kUInt8) return abs(x).to(kInt64).to(kUInt8);
  if (!is_floating(dt)) return x.to(kInt64).to(dt);
  return x.to(dt);
}

// Tolerance for a result dtype: integers and bools exactly; float16/bfloat16 to about one unit of their
// precision (CUDA and the host libm may round a transcendental differently before the final rounding).
void expect_match(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  ASSERT_EQ(gpu.device(), g_dev) << what;
  ASSERT_EQ(gpu.dtype(), cpu.dtype()) << what;
  double atol = 0, rtol = 0;
  switch (cpu.dtype()) {
    case kFloat32:
      atol = 2e-6, rtol = 1e-5;
      break;
    case kFloat64:
      atol = 1e-12, rtol = 1e-11;
      break;
    case kFloat16:
      atol = 1e-3, rtol = 2e-3;
      break;
    case kBFloat16:
      atol = 1e-2, rtol = 1.6e-2;
      break;
    default:
      break;
  }
  // the absolute floor scales with the tensor (sums in another order cancel to different tiny values)
  const std::vector<double> ref = test::values(cpu);
  double scale = 1;
  for (double v : ref)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  EXPECT_TENSOR_NEAR(gpu, cpu.shape(), ref, atol * scale, rtol) << what;
}

// Runs f on CPU inputs and on the same inputs moved to the device under test, and compares.
template <class F>
void compare(const std::string& what, const std::vector<Tensor>& cpu_in, F f) {
  std::vector<Tensor> gpu_in;
  for (const Tensor& t : cpu_in) gpu_in.push_back(t.to(g_dev));
  expect_match(f(gpu_in), f(cpu_in), what);
}

std::string tag(DType dt) { return detail::str(dt); }

class CudaKernels : public CudaSuite {};

// Each check runs twice: on CUDA (skipped without a GPU), and as CudaKernelsHarnessOnCpu with the CPU in
// the GPU's place, so that the test code itself (inputs, dtype rules, op calls) runs on every machine.
#define KERNEL_TEST(Name) EMBER_GPU_AND_CPU_TEST(CudaKernels, CudaKernelsHarnessOnCpu, Name)

KERNEL_TEST(UnaryEveryDtypeAndLayout) {
  for (DType dt : kAll) {
    for (UnaryOp op : kAllUnaryOps) {
      if (refused(op, dt) || (is_float_op(op) && !is_floating(dt))) continue;
      auto f = [op](const std::vector<Tensor>& in) { return raw::unary(op, in[0]); };
      const std::string w = std::string(name(op)) + " " + tag(dt);
      if (is_float_op(op)) {
        Tensor x = make(dt, {33, 17}, 4);
        if (positive_domain(op)) x = abs(x) + 0.1;
        compare(w, {x}, f);
        compare(w + " strided", {x.t()}, f);
      } else {
        compare(w + " contiguous", {make(dt, {37, 11}, 1)}, f);                // vectorised + tail
        compare(w + " transposed", {make(dt, {11, 37}, 2).t()}, f);            // strided
        compare(w + " misaligned", {make(dt, {401}, 3).slice(0, 1, 401)}, f);  // contiguous, not 16-byte aligned
      }
    }
  }
  // NaN passes through relu, abs and clamp; integer negation wraps
  Tensor nan = tensor<float>({NAN, -1.f, 2.f}, {3});
  compare("relu NaN", {nan}, [](const std::vector<Tensor>& in) { return raw::unary(UnaryOp::Relu, in[0]); });
  compare("clamp NaN", {nan}, [](const std::vector<Tensor>& in) { return raw::clamp(in[0], -0.5, 0.5); });
  compare("neg int32 min", {tensor<int32_t>({INT32_MIN, 5}, {2})},
          [](const std::vector<Tensor>& in) { return raw::unary(UnaryOp::Neg, in[0]); });
}

KERNEL_TEST(ClampAndWhereEveryDtype) {
  for (DType dt : kAll) {
    if (dt != kBool)
      compare("clamp " + tag(dt), {make(dt, {9, 13}, 5)},
              [](const std::vector<Tensor>& in) { return raw::clamp(in[0], -1.5, 2.5); });
    compare("where " + tag(dt), {make(kBool, {9, 13}, 6), make(dt, {9, 13}, 7), make(dt, {13}, 8)},
            [](const std::vector<Tensor>& in) { return where(in[0], in[1], in[2]); });
    compare("where strided " + tag(dt), {make(kBool, {13, 9}, 6).t(), make(dt, {9, 1}, 7), make(dt, {13, 9}, 8).t()},
            [](const std::vector<Tensor>& in) { return where(in[0], in[1], in[2]); });
  }
}

KERNEL_TEST(BinaryEveryDtypeAndBroadcast) {
  for (DType dt : kAll) {
    for (BinaryOp op : kAllBinaryOps) {
      if (refused(op, dt)) continue;
      auto f = [op](const std::vector<Tensor>& in) { return raw::binary(op, in[0], in[1]); };
      const std::string w = std::string(name(op)) + " " + tag(dt);
      Tensor a = make(dt, {21, 19}, 10), b = make(dt, {21, 19}, 11);
      if (op == BinaryOp::Pow && is_floating(dt)) a = abs(a) + 0.5;  // real powers of positive bases
      if (op == BinaryOp::Pow && !is_floating(dt)) b = abs(b);       // (plus negative exponents below)
      compare(w + " same shape", {a, b}, f);                         // vectorised
      compare(w + " scalar rhs", {a, b.slice(0, 0, 1).slice(1, 0, 1).reshape({})}, f);  // stride-0 operand
      compare(w + " row bcast", {a, b.slice(0, 0, 1)}, f);                              // strided (bcast rows)
      compare(w + " transposed", {a.t(), b.t()}, f);
      compare(w + " misaligned", {a.flatten().slice(0, 1, 398), b.flatten().slice(0, 2, 399)}, f);
    }
  }
  // integer edge cases: wrap-around, negative integer exponents, NaN through maximum
  compare("add int64 wraps", {tensor<int64_t>({INT64_MAX, 1}, {2}), tensor<int64_t>({1, 2}, {2})},
          [](const std::vector<Tensor>& in) { return in[0] + in[1]; });
  compare("mul uint8 wraps", {tensor<uint8_t>({200, 3}, {2}), tensor<uint8_t>({2, 100}, {2})},
          [](const std::vector<Tensor>& in) { return in[0] * in[1]; });
  compare("pow int negative exponents",
          {tensor<int64_t>({1, -1, -1, 2, 0}, {5}), tensor<int64_t>({-3, -3, -2, -1, 3}, {5})},
          [](const std::vector<Tensor>& in) { return pow(in[0], in[1]); });
  compare("maximum NaN", {tensor<float>({NAN, 1.f}, {2}), tensor<float>({0.f, NAN}, {2})},
          [](const std::vector<Tensor>& in) { return maximum(in[0], in[1]); });
}

KERNEL_TEST(ReductionsEveryDtype) {
  const std::vector<std::vector<int64_t>> dim_sets = {{}, {0}, {1}, {2}, {0, 2}};
  for (DType dt : kAll) {
    Tensor x = make(dt, {5, 70, 3}, 20);  // dim 1 (70 > 64) takes the block kernel, the others a thread each
    if (dt == kFloat16 || dt == kBFloat16) x = x * 0.3;  // sums stay well inside float16's range
    for (ReduceOp op : kAllReduceOps) {
      if (is_index_reduction(op)) {
        for (int64_t d : {0, 1, 2})  // integer inputs have many ties: the first index must win on both devices
          compare(detail::str(name(op), " ", tag(dt), " dim ", d), {x},
                  [&](const std::vector<Tensor>& in) { return raw::reduce(op, in[0], {d}, false, "arg"); });
        continue;
      }
      if (op == ReduceOp::Prod && is_floating(dt)) x = clamp(x, -1.2, 1.2);  // keep products finite
      for (const auto& dims : dim_sets)
        compare(detail::str(name(op), " ", tag(dt), " dims ", dims.size()), {x},
                [&](const std::vector<Tensor>& in) { return raw::reduce(op, in[0], dims, false, "reduce"); });
      compare(detail::str(name(op), " strided ", tag(dt)), {x.transpose(0, 2)},
              [&](const std::vector<Tensor>& in) { return raw::reduce(op, in[0], {1}, true, "reduce"); });
    }
  }
  // large: the full sum splits into chunks combined in order; a column sum; an argmax over 100000
  Tensor big = make(kFloat32, {1 << 20}, 21);
  compare("sum 2^20", {big}, [](const std::vector<Tensor>& in) { return sum(in[0]); });
  compare("sum int64 2^20", {big.to(kInt64)}, [](const std::vector<Tensor>& in) { return sum(in[0]); });
  compare("column sum", {big.reshape({4096, 256})}, [](const std::vector<Tensor>& in) { return sum(in[0], {0}); });
  compare("max 2^20", {big}, [](const std::vector<Tensor>& in) { return max(in[0]); });
  compare("argmax 1e5", {big.slice(0, 0, 100000).reshape({2, 50000})},
          [](const std::vector<Tensor>& in) { return argmax(in[0], 1); });
  // the same sum twice gives the same bits (no atomics in reductions)
  Tensor g = big.to(g_dev);
  EXPECT_EQ(test::values(sum(g)), test::values(sum(g)));
  compare("empty dim sum", {zeros({3, 0})}, [](const std::vector<Tensor>& in) { return sum(in[0], {1}); });
}

KERNEL_TEST(SoftmaxRowAndColumnKernels) {
  for (DType dt : kFloats) {
    Tensor x = make(dt, {6, 1000}, 30);
    for (bool log : {false, true}) {
      auto f = [log](int64_t d) {
        return [log, d](const std::vector<Tensor>& in) { return log ? log_softmax(in[0], d) : softmax(in[0], d); };
      };
      compare(detail::str("softmax rows ", tag(dt), log), {x}, f(1));
      compare(detail::str("softmax columns ", tag(dt), log), {x}, f(0));
      compare(detail::str("softmax middle ", tag(dt), log), {make(dt, {3, 7, 5}, 31)}, f(1));
    }
  }
  compare("softmax -inf row", {tensor<float>({-INFINITY, -INFINITY, 1.f, 2.f}, {2, 2})},
          [](const std::vector<Tensor>& in) { return softmax(in[0], 1); });
}

// cross_entropy's fused kernels (class indices): the loss per row, the row statistics and the gradient, every
// floating dtype (16-bit read as they are), rows of 1 to 4099 classes (the block's stride loop and its tail), a row
// of large logits and one with -inf entries, one scale and a scale per row.
KERNEL_TEST(ClassCrossEntropyEveryFloatDtype) {
  for (DType dt : kFloats) {
    for (const Shape& s : {Shape{5, 7}, Shape{3, 1}, Shape{2, 4099}, Shape{70, 300}}) {
      Tensor x = make(dt, s, 32);
      if (s[1] > 2) {
        x = x.clone();
        x.select(0, 0).fill_(0.0);
        x.select(0, 0).slice(0, 1, 2).fill_(-INFINITY);  // a -inf entry away from the target
        x.select(0, 1).mul_(300.0);                      // large logits
      }
      manual_seed(33);
      const Tensor t = randint(0, s[1], {s[0]}, {.dtype = kInt64});
      t.select(0, 0).fill_(0);
      const std::string w = detail::str("class_cross_entropy ", tag(dt), " ", s);
      compare(w + " loss", {x, t},
              [](const std::vector<Tensor>& in) { return raw::class_cross_entropy(in[0], in[1]).loss; });
      compare(w + " stats", {x, t},
              [](const std::vector<Tensor>& in) { return raw::class_cross_entropy(in[0], in[1]).stats; });
      const Tensor per_row = make(kFloat32, {s[0]}, 34);
      for (const Tensor& scale : {full(Shape{}, 0.25), per_row})
        compare(w + " gradient", {x, t, scale}, [](const std::vector<Tensor>& in) {
          const Tensor stats = raw::class_cross_entropy(in[0], in[1]).stats;
          return raw::class_cross_entropy_backward(in[0], in[1], stats, in[2]);
        });
    }
  }
}

// Every dtype to every dtype (the cast kernel's 100 pairs): contiguous lengths around its packs (1 to 33 elements
// and 1000: whole packs and tails), a view starting one element in (misaligned: the element-at-a-time path) and a
// strided one. Values in each source type's range; the CPU's conversion rules (saturation, NaN) are the reference.
KERNEL_TEST(CastEveryDtypePairContiguousMisalignedAndStrided) {
  for (DType from : kAll)
    for (DType to : kAll) {
      if (from == to) continue;
      auto f = [to](const std::vector<Tensor>& in) { return raw::cast(in[0], to); };
      const std::string w = tag(from) + " -> " + tag(to);
      for (int64_t n : {1, 7, 8, 9, 16, 33, 1000}) compare(detail::str(w, " n ", n), {make(from, {n}, 60)}, f);
      const Tensor x = make(from, {1001}, 61);
      compare(w + " misaligned", {x},
              [to](const std::vector<Tensor>& in) { return raw::cast(in[0].slice(0, 1, 1001), to); });
      compare(w + " strided", {x},
              [to](const std::vector<Tensor>& in) { return raw::cast(in[0].slice(0, 0, 1001, 3), to); });
    }
}

// BatchNorm in every float dtype (16-bit in and out, float32 statistics) on each path of the CUDA kernels: [N, C]
// rows (one thread per channel), runs at least a block wide (threads stride within a run) and narrower runs (an
// index division per element), each with channels of more than 16384 elements (several parts per channel, added
// in a second kernel); training and evaluation, forward and every gradient; BatchNorm+ReLU on each path too.
KERNEL_TEST(BatchNormEveryFloatDtypeOverManyParts) {
  for (DType dt : kFloats) {
    for (const Shape& s : {Shape{37, 5}, Shape{20000, 2}, Shape{4, 2, 80, 80}, Shape{300, 3, 8, 8}, Shape{3, 2, 130},
                           Shape{8, 5, 40, 40}}) {
      const int64_t c = s[1];
      const Tensor x = (make(dt, s, 50).to(kFloat64) + 2.0).to(dt), g = make(dt, s, 51);
      const DType cd = dt == kFloat64 ? kFloat64 : kFloat32;
      const Tensor w = make(cd, {c}, 52), b = make(cd, {c}, 53), rv = abs(make(cd, {c}, 54)) + 0.5;
      // 4-D also channels-last: the kernels see [N*H*W, C] rows (S == 1, many rows: column parts)
      // batch_norm_relu too: its backward reads the output beside the gradient (the ReLU mask in both passes)
      for (const int mode : s.size() == 4 ? std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7} : std::vector<int>{0, 1, 4, 5}) {
        const bool training = mode % 2 == 0, cl = mode / 2 % 2 == 1, relu = mode >= 4;
        const std::string what = detail::str(relu ? "batch_norm_relu " : "batch_norm ", tag(dt), " ", s,
                                             training ? " training" : " eval", cl ? " channels-last" : "");
        for (int out = 0; out < 5; ++out)
          compare(detail::str(what, " output ", out), {x, w, b, g, rv},
                  [training, cl, relu, out](const std::vector<Tensor>& in) {
                    const Tensor x0 = cl ? in[0].contiguous(MemoryFormat::ChannelsLast) : in[0];
                    const Tensor xi = x0.detach().requires_grad_(), wi = in[1].detach().requires_grad_(),
                                 bi = in[2].detach().requires_grad_();
                    Tensor rm = zeros_like(in[4]), rv = in[4].clone();
                    const Tensor y = relu ? batch_norm_relu(xi, rm, rv, wi, bi, training, 0.1, 1e-5)
                                          : batch_norm(xi, rm, rv, wi, bi, training, 0.1, 1e-5);
                    if (out == 0) return y.detach();
                    if (out == 1) return rv;  // the running variance: the batch's variance in training
                    const auto gr = autograd::grad({y}, {xi, wi, bi}, {in[3]});
                    return gr[static_cast<size_t>(out - 2)];
                  });
      }
    }
  }
}

// LayerNorm's and RMSNorm's gradients with rows enough for several chunks of the weight and bias gradients' two
// passes (64 rows a chunk: 1 to 40 chunks, the last one partial), columns below, at and past a 32-column tile.
KERNEL_TEST(RowNormGradientsOverManyRowChunks) {
  for (DType dt : {kFloat32, kFloat64}) {
    for (const Shape& s : {Shape{1, 5}, Shape{130, 32}, Shape{1000, 50}, Shape{2531, 77}}) {
      const Tensor x = make(dt, s, 40), w = make(dt, {s[1]}, 41), b = make(dt, {s[1]}, 42), g = make(dt, s, 43);
      for (bool rms : {false, true}) {
        compare(detail::str(rms ? "rms_norm" : "layer_norm", " gradients ", tag(dt), " ", s), {x, w, b, g},
                [rms](const std::vector<Tensor>& in) {
                  const Tensor xi = in[0].detach().requires_grad_(), wi = in[1].detach().requires_grad_(),
                               bi = in[2].detach().requires_grad_();
                  const int64_t d = xi.size(1);
                  const Tensor y = rms ? rms_norm(xi, {d}, wi) : layer_norm(xi, {d}, wi, bi);
                  const auto gr = autograd::grad({y}, {xi, wi, bi}, {in[3]}, /*retain_graph=*/false,
                                                 /*allow_unused=*/true);
                  std::vector<Tensor> parts = {gr[0].reshape({-1}), gr[1]};
                  if (!rms) parts.push_back(gr[2]);
                  return cat(parts);
                });
      }
    }
  }
}

// cumsum along every dim, both directions (the reverse one is its gradient), every dtype (integers give int64).
KERNEL_TEST(CumsumEveryDtypeAndDirection) {
  for (DType dt : kAll) {
    for (bool reverse : {false, true}) {
      auto f = [reverse](int64_t d) {
        return [reverse, d](const std::vector<Tensor>& in) { return raw::cumsum(in[0], d, reverse); };
      };
      const std::string w = detail::str("cumsum ", tag(dt), reverse ? " reverse" : "");
      Tensor x = make(dt, {5, 300}, 35);
      compare(w + " rows", {x}, f(1));
      compare(w + " columns", {x}, f(0));
      compare(w + " middle of 3-D, strided", {make(dt, {3, 7, 5}, 36).transpose(0, 2)}, f(1));
    }
  }
}

KERNEL_TEST(Matmul) {
  auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  for (DType dt : kAll) {
    if (dt == kBool) continue;
    const std::string w = "matmul " + tag(dt);
    Tensor a = make(dt, {3, 17, 9}, 40), b = make(dt, {3, 9, 13}, 41);
    compare(w, {a, b}, mm);
    compare(w + " transposed a", {make(dt, {3, 9, 17}, 42).transpose(1, 2), b}, mm);
    compare(w + " transposed b", {a, make(dt, {3, 13, 9}, 43).transpose(1, 2)}, mm);
    compare(w + " batch broadcast", {make(dt, {17, 9}, 44), b}, mm);
    compare(w + " sliced", {make(dt, {17, 20}, 45).slice(1, 0, 18, 2), make(dt, {9, 13}, 46)}, mm);
    compare(w + " vector", {make(dt, {9}, 47), b}, mm);
  }
  compare("matmul empty K", {zeros({4, 0}), zeros({0, 3})}, mm);
}

KERNEL_TEST(Conv2dFloat64AndFloat16) {
  for (DType dt : {kFloat64, kFloat16, kBFloat16}) {
    Tensor x = make(dt, {2, 3, 9, 8}, 50) * 0.3, w = make(dt, {4, 3, 3, 3}, 51) * 0.3, b = make(dt, {4}, 52);
    compare("conv2d " + tag(dt), {x, w, b}, [](const std::vector<Tensor>& in) {
      return conv2d(in[0], in[1], in[2], {2, 1}, {1, 0});
    });
  }
  // gradients in float64 through autograd
  Tensor x = make(kFloat64, {2, 3, 7, 7}, 53), w = make(kFloat64, {4, 3, 3, 3}, 54), b = make(kFloat64, {4}, 55);
  auto grads = [](Tensor x, Tensor w, Tensor b) {
    for (Tensor* t : {&x, &w, &b}) *t = t->detach().requires_grad_();  // fresh leaves on either device
    sum(square(conv2d(x, w, b, {1}, {1}))).backward();
    return std::vector<Tensor>{x.grad(), w.grad(), b.grad()};
  };
  std::vector<Tensor> gc = grads(x, w, b), gg = grads(x.to(g_dev), w.to(g_dev), b.to(g_dev));
  for (size_t i = 0; i < 3; ++i) expect_match(gg[i], gc[i], detail::str("conv2d float64 grad ", i));
  // 16-bit gradients: cuDNN's native 16-bit kernels (float accumulation) against the CPU's float32 and one rounding
  for (DType dt : {kFloat16, kBFloat16}) {
    Tensor xh = make(dt, {2, 3, 7, 7}, 56) * 0.3, wh = make(dt, {4, 3, 3, 3}, 57) * 0.3, bh = make(dt, {4}, 58);
    Tensor gy = make(dt, {2, 4, 4, 7}, 59) * 0.3;
    auto grads16 = [&gy](Tensor x, Tensor w, Tensor b) {
      for (Tensor* t : {&x, &w, &b}) *t = t->detach().requires_grad_();  // fresh leaves on either device
      conv2d(x, w, b, {2, 1}, {1, 1}).backward(gy.to(x.device()));
      return std::vector<Tensor>{x.grad(), w.grad(), b.grad()};
    };
    std::vector<Tensor> hc = grads16(xh, wh, bh), hg = grads16(xh.to(g_dev), wh.to(g_dev), bh.to(g_dev));
    for (size_t i = 0; i < 3; ++i) expect_match(hg[i], hc[i], detail::str("conv2d ", dt, " grad ", i));
    // channels-last, tensor-core-shaped channels (16-bit convolutions run on cuDNN's graph API): forward and both
    // gradients, each in the input's layout
    const MemoryFormat cl = MemoryFormat::ChannelsLast;
    Tensor xl = (make(dt, {2, 8, 9, 7}, 63) * 0.3).contiguous(cl);
    Tensor wl = (make(dt, {16, 8, 3, 3}, 64) * 0.3).contiguous(cl),
           gl = (make(dt, {2, 16, 5, 7}, 65) * 0.3).contiguous(cl);
    auto grads_cl = [&gl](Tensor x, Tensor w) {
      for (Tensor* t : {&x, &w}) *t = t->detach().requires_grad_();
      Tensor y = conv2d(x, w, Tensor(), {2, 1}, {1, 1});
      y.backward(gl.to(x.device()));
      EXPECT_EQ(y.suggest_memory_format(), MemoryFormat::ChannelsLast) << y.device();
      return std::vector<Tensor>{y.detach(), x.grad(), w.grad()};
    };
    std::vector<Tensor> lc = grads_cl(xl, wl), lg = grads_cl(xl.to(g_dev), wl.to(g_dev));
    for (size_t i = 0; i < 3; ++i) expect_match(lg[i], lc[i], detail::str("conv2d channels-last ", dt, " ", i));
  }
}

KERNEL_TEST(PoolingTiesRouteToTheFirstMaximumInBothLayouts) {
  // all-equal windows: the whole gradient goes to the first element of each window, on both devices
  for (DType dt : kFloats) {
    auto grad_of = [](Tensor x) {
      x = x.detach().requires_grad_();  // a fresh leaf: on the CPU, to() hands back the caller's tensor
      sum(max_pool2d(x, {3}, {2}, {1}) * 2.0).backward();
      return x.grad();
    };
    Tensor x = ones({2, 2, 7, 6}, {.dtype = dt});
    expect_match(grad_of(x.to(g_dev)), grad_of(x), "max_pool2d ties " + tag(dt));
    compare("avg_pool2d " + tag(dt), {make(dt, {2, 2, 7, 6}, 60)},
            [](const std::vector<Tensor>& in) { return avg_pool2d(in[0], {3}, {2}, {1}); });
    // channels-last (CUDA's kernels read and write NHWC as it lies; the CPU pools NCHW copies): ties, a NaN, the
    // gradient, both kinds, the output in the input's layout
    Tensor xc = ones({2, 5, 7, 6}, {.dtype = dt}).contiguous(MemoryFormat::ChannelsLast);
    expect_match(grad_of(xc.to(g_dev)), grad_of(xc), "max_pool2d ties channels-last " + tag(dt));
    Tensor r = make(dt, {2, 5, 7, 6}, 61);
    r = where(gt(r, 5.0), full({}, NAN, {.dtype = dt}), r).contiguous(MemoryFormat::ChannelsLast);
    for (bool max : {true, false}) {
      auto pool = [max](const Tensor& t) { return max ? max_pool2d(t, {3}, {2}, {1}) : avg_pool2d(t, {3}, {2}, {1}); };
      const std::string w = detail::str(max ? "max" : "avg", "_pool2d channels-last ", tag(dt));
      compare(w, {r}, [&](const std::vector<Tensor>& in) {
        Tensor leaf = in[0].detach().requires_grad_();
        Tensor y = pool(leaf);
        EXPECT_EQ(y.suggest_memory_format(), MemoryFormat::ChannelsLast) << w << " on " << y.device();
        sum(y * y).backward();
        EXPECT_EQ(leaf.grad().suggest_memory_format(), MemoryFormat::ChannelsLast) << w << " gradient";
        return cat({y.reshape({-1}), leaf.grad().reshape({-1})}, 0);
      });
    }
  }
}

KERNEL_TEST(IndexSelectAndIndexAddEveryDtype) {
  Tensor idx = tensor<int64_t>({3, 0, 3, 1, 3}, {5});  // repeated indices add up in index_add
  for (DType dt : kAll) {
    for (int64_t d : {0, 1, 2})
      compare(detail::str("index_select ", tag(dt), " dim ", d), {make(dt, {4, 5, 6}, 70), idx},
              [d](const std::vector<Tensor>& in) { return index_select(in[0], d, in[1]); });
    compare("index_select strided " + tag(dt), {make(dt, {6, 4}, 71).t(), idx},
            [](const std::vector<Tensor>& in) { return index_select(in[0], 0, in[1]); });
    if (dt == kBool) continue;
    compare("index_add " + tag(dt), {make(dt, {2, 5, 3}, 72), idx}, [](const std::vector<Tensor>& in) {
      return raw::index_add_zeros({2, 4, 3}, 1, in[1], in[0]);
    });
  }
}

// argsort: both CUDA paths (a row of up to 2048 in shared memory, longer rows CUB's radix sort, one row and several),
// every dtype, ties (make() repeats integers; NaNs tie) and both directions. The order is total ((value, index) pairs),
// so the indices must be equal, not just valid. gather / scatter_add (sort's and topk's values) ride on index_select /
// index_add.
KERNEL_TEST(ArgsortEveryDtypeAndRowLength) {
  for (DType dt : kAll) {
    for (bool desc : {false, true}) {
      const std::string w = detail::str("argsort ", tag(dt), desc ? " descending" : "");
      Tensor x = make(dt, {5, 300}, 80);
      if (is_floating(dt)) x = where(gt(abs(x), 2.5), full({}, NAN, {.dtype = dt}), x);
      auto along = [desc](int64_t d) {
        return [desc, d](const std::vector<Tensor>& in) { return raw::argsort(in[0], d, desc); };
      };
      compare(w + " rows", {x}, along(1));
      compare(w + " columns (strided)", {x.t()}, along(1));
      compare(w + " long rows", {make(dt, {3, 5000}, 81)}, along(-1));
      compare(w + " one long row", {make(dt, {1, 70000}, 85)}, along(1));
      compare(w + " one element per row", {make(dt, {7, 1}, 82)}, along(1));
    }
  }
  // The radix keys' corner cases, in short rows (bitonic) and long ones (radix): -0 ties with +0 (by index), NaN
  // of either sign after +inf (first when descending), the integers' extremes.
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> specials = {0.0, -0.0, nan, -nan, inf, -inf, 1.0, -1.0, 1e-30, -1e-30, 0.0, -0.0, nan};
  for (int64_t n : {int64_t{13}, int64_t{3000}}) {
    std::vector<double> row;
    for (int64_t i = 0; i < 2 * n; ++i) row.push_back(specials[static_cast<size_t>(i * 7 % 13)]);
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16})
      for (bool desc : {false, true})
        compare(detail::str("argsort specials ", n, " ", tag(dt), desc ? " descending" : ""),
                {tensor(row, {2, n}).to(dt)},
                [desc](const std::vector<Tensor>& in) { return raw::argsort(in[0], 1, desc); });
    std::vector<int64_t> i64;
    std::vector<int32_t> i32;
    for (int64_t i = 0; i < n; ++i) {
      const int k = static_cast<int>(i % 3);
      i64.push_back(k == 0 ? std::numeric_limits<int64_t>::min() : k == 1 ? std::numeric_limits<int64_t>::max() : -i);
      i32.push_back(k == 0   ? std::numeric_limits<int32_t>::min()
                    : k == 1 ? std::numeric_limits<int32_t>::max()
                             : static_cast<int32_t>(-i));
    }
    for (const Tensor& x : {tensor(i64, {1, n}), tensor(i32, {1, n})})
      for (bool desc : {false, true})
        compare(detail::str("argsort extremes ", n, " ", tag(x.dtype()), desc ? " descending" : ""), {x},
                [desc](const std::vector<Tensor>& in) { return raw::argsort(in[0], 1, desc); });
  }
  compare("sort / topk values", {make(kFloat32, {4, 3000}, 83)}, [](const std::vector<Tensor>& in) {
    return cat({sort(in[0], 1).values, topk(in[0], 7, 1, false).values}, 1);
  });
  compare("gather / scatter_add", {make(kFloat64, {4, 6}, 84), tensor<int64_t>({5, 0, 5, 2, 1, 1}, {2, 3})},
          [](const std::vector<Tensor>& in) { return scatter_add(in[0], 1, in[1], gather(in[0], 1, in[1])); });
}

KERNEL_TEST(RandomNumbersMatchTheCpuForTheSameSeed) {
  for (DType dt : kFloats) {
    manual_seed(123);
    Tensor c = rand({1001}, {.dtype = dt});
    manual_seed(123);
    Tensor g = rand({1001}, {.dtype = dt, .device = g_dev});
    expect_match(g, c, "rand " + tag(dt));
    manual_seed(124);
    Tensor cn = randn({1003}, {.dtype = dt});
    manual_seed(124);
    Tensor gn = randn({1003}, {.dtype = dt, .device = g_dev});
    expect_match(gn, cn, "randn " + tag(dt));
  }
  for (DType dt : {kInt64, kInt32, kUInt8}) {
    manual_seed(125);
    Tensor c = randint(-3, 7, {999}, {.dtype = dt == kUInt8 ? kInt64 : dt});
    manual_seed(125);
    Tensor g = randint(-3, 7, {999}, {.dtype = dt == kUInt8 ? kInt64 : dt, .device = g_dev});
    expect_match(g, c, "randint " + tag(dt));
  }
  // the generator advances the same way on both devices: a second draw also matches
  manual_seed(5);
  Tensor c1 = rand({10}), c2 = rand({10});
  manual_seed(5);
  Tensor g1 = rand({10}, {.device = g_dev}), g2 = rand({10}, {.device = g_dev});
  expect_match(g2, c2, "second draw");
  expect_match(g1, c1, "first draw");
}

// BatchNorm's batch statistics far from zero (|mean| >> std): the variance is a second pass over the deviations on the
// CPU and the sums of squares are shifted by the channel's first element on CUDA, so nothing cancels. Float64 at mean
// 1e6, std 1e-3 is where an unshifted one-pass E[x^2] - mean^2 (even in double) goes negative,
// clamps to 0 and gives invstd = 1/sqrt(eps); float32 at mean 1e3, std 1e-2 is the everyday case of it.
KERNEL_TEST(BatchNormStatisticsFarFromZero) {
  struct Case {
    DType dt;
    double mean, std, tol;
  };
  const double eps = 1e-5;
  for (const Case& k : {Case{kFloat32, 1e3, 1e-2, 2e-2}, Case{kFloat64, 1e6, 1e-3, 1e-5}}) {
    for (const Shape& shape : {Shape{64, 3}, Shape{8, 3, 5, 5}}) {
      manual_seed(77);
      Tensor x = (randn(shape, {.dtype = kFloat64}) * k.std + k.mean).to(k.dt);
      // the float64 reference from the values x holds: per-channel mean, then the mean squared deviation
      const std::vector<double> xv = test::values(x);
      const int64_t c_n = shape[1], s_n = shape.size() == 4 ? shape[2] * shape[3] : 1, n_n = shape[0];
      std::vector<double> mu(c_n, 0), var(c_n, 0);
      for (int pass = 0; pass < 2; ++pass)
        for (int64_t n = 0; n < n_n; ++n)
          for (int64_t c = 0; c < c_n; ++c)
            for (int64_t i = 0; i < s_n; ++i) {
              const double v = xv[static_cast<size_t>((n * c_n + c) * s_n + i)];
              if (pass == 0) mu[c] += v / static_cast<double>(n_n * s_n);
              else var[c] += (v - mu[c]) * (v - mu[c]) / static_cast<double>(n_n * s_n);
            }
      std::vector<double> want(xv.size()), want_rv(c_n);
      for (size_t j = 0; j < xv.size(); ++j) {
        const size_t c = j / static_cast<size_t>(s_n) % static_cast<size_t>(c_n);
        want[j] = (xv[j] - mu[c]) / std::sqrt(var[c] + eps);
      }
      const double m = static_cast<double>(n_n * s_n);
      for (int64_t c = 0; c < c_n; ++c) want_rv[c] = var[c] * m / (m - 1);
      Tensor rm = zeros({c_n}, {.dtype = k.dt, .device = g_dev}), rv = ones({c_n}, {.dtype = k.dt, .device = g_dev});
      Tensor y = batch_norm(x.to(g_dev), rm, rv, Tensor(), Tensor(), true, /*momentum=*/1.0, eps);
      const std::string w = tag(k.dt) + " " + detail::str(shape);
      EXPECT_TENSOR_NEAR(y, shape, want, k.tol) << w;
      // momentum 1: the running variance is the batch's unbiased variance
      EXPECT_TENSOR_NEAR(rv, Shape{c_n}, want_rv, 1e-3 * k.std * k.std, 1e-3) << w;
    }
  }
}

// ||gpu - cpu|| / ||cpu|| below tol (float32 sums in another order over d = 256 drift past expect_match's rtol).
void expect_rel_near(const Tensor& gpu, const Tensor& cpu, double tol, const std::string& what) {
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  const std::vector<double> g = test::values(gpu), c = test::values(cpu);
  double diff = 0, ref = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    diff += (g[i] - c[i]) * (g[i] - c[i]);
    ref += c[i] * c[i];
  }
  EXPECT_LE(std::sqrt(diff), tol * std::sqrt(ref)) << what << ": relative error " << std::sqrt(diff / ref);
}

// Attention at the head sizes models use (the op table's rows have d <= 4): each register width the kernels are
// built for (32, 64, 128, 256; d != dv), T across several row blocks and tiles, causal and not, forward and the
// three gradients. float64 to 1e-10, float32 to 1e-5, float16 to 5e-3 (relative to the CPU's result).
KERNEL_TEST(AttentionHeadSizesUpTo256) {
  struct Size {
    int64_t d, dv, tq, tk;
  };
  for (const Size& z : {Size{64, 64, 150, 133}, Size{128, 128, 70, 70}, Size{80, 96, 33, 97}, Size{256, 200, 40, 41},
                        Size{20, 24, 300, 260}}) {
    for (DType dt : {kFloat64, kFloat32, kFloat16}) {
      for (bool causal : {false, true}) {
        const std::string w =
            detail::str(tag(dt), " d=", z.d, " dv=", z.dv, " Tq=", z.tq, " Tk=", z.tk, causal ? " causal" : "");
        const double tol = dt == kFloat64 ? 1e-10 : dt == kFloat32 ? 1e-5 : 5e-3;
        Tensor q = make(dt, {2, 3, z.tq, z.d}, 60) * 0.1, k = make(dt, {2, 3, z.tk, z.d}, 61) * 0.1;
        Tensor v = make(dt, {2, 3, z.tk, z.dv}, 62), gy = make(dt, {2, 3, z.tq, z.dv}, 63);
        auto run = [&](Device dev) {
          Tensor qd = q.to(dev).detach().requires_grad_(), kd = k.to(dev).detach().requires_grad_();
          Tensor vd = v.to(dev).detach().requires_grad_();
          Tensor out = scaled_dot_product_attention(qd, kd, vd, {.causal = causal});
          out.backward(gy.to(dev));
          return std::vector<Tensor>{out, qd.grad(), kd.grad(), vd.grad()};
        };
        const std::vector<Tensor> c = run(Device::cpu()), g = run(g_dev);
        const char* names[] = {"out", "dq", "dk", "dv"};
        for (size_t i = 0; i < 4; ++i) expect_rel_near(g[i], c[i], tol, w + " " + names[i]);
      }
    }
  }
}

// The cases cuDNN's fused attention serves on a GPU (float16 / bfloat16, d = dv in {64, 128}, causal or none;
// docs/attention.md): self-attention with the heads read in place from a fused [B, T, 3, H, hd] projection, and
// causal cross-attention (Tq != Tk, top-left), against the CPU — the output, cuDNN's statistics as the lse the
// backward reads, and the three gradients. With use_deterministic_algorithms the backward twice gives the same bits.
KERNEL_TEST(AttentionFusedPathCasesMatchTheCpu) {
  for (DType dt : {kBFloat16, kFloat16})
    for (int64_t hd : {64, 128})
      for (bool causal : {false, true}) {
        const std::string w = detail::str(tag(dt), " hd=", hd, causal ? " causal" : "");
        const double tol = dt == kBFloat16 ? 2e-2 : 5e-3;
        const int64_t B = 2, T = 200, H = 3;
        const Tensor qkv = make(dt, {B, T, 3, H, hd}, 70) * 0.1, gy = make(dt, {B, H, T, hd}, 71);
        auto run = [&](Device dev) {
          Tensor x = qkv.to(dev).detach().requires_grad_();
          const Tensor q = x.select(2, 0).transpose(1, 2), k = x.select(2, 1).transpose(1, 2),
                       v = x.select(2, 2).transpose(1, 2);  // [B, H, T, hd] views, rows 3 H hd apart
          Tensor out = scaled_dot_product_attention(q, k, v, {.causal = causal});
          out.backward(gy.to(dev));
          const Tensor lse = raw::attention(q.detach(), k.detach(), v.detach(), Tensor(), 0, causal).lse;
          return std::vector<Tensor>{out, lse, x.grad()};
        };
        const std::vector<Tensor> c = run(Device::cpu()), g = run(g_dev);
        const char* names[] = {"out", "lse", "dqkv"};
        for (size_t i = 0; i < 3; ++i) expect_rel_near(g[i], c[i], i == 1 ? 1e-3 : tol, w + " " + names[i]);
        // cross-attention: Tq != Tk, contiguous heads
        const Tensor q2 = make(dt, {B, H, 70, hd}, 72) * 0.1, k2 = make(dt, {B, H, 90, hd}, 73) * 0.1;
        const Tensor v2 = make(dt, {B, H, 90, hd}, 74), g2 = make(dt, {B, H, 70, hd}, 75);
        auto run2 = [&](Device dev) {
          Tensor qd = q2.to(dev).detach().requires_grad_(), kd = k2.to(dev).detach().requires_grad_();
          Tensor vd = v2.to(dev).detach().requires_grad_();
          Tensor out = scaled_dot_product_attention(qd, kd, vd, {.causal = causal});
          out.backward(g2.to(dev));
          return std::vector<Tensor>{out, qd.grad(), kd.grad(), vd.grad()};
        };
        const std::vector<Tensor> c2 = run2(Device::cpu()), g2v = run2(g_dev);
        for (size_t i = 0; i < 4; ++i) expect_rel_near(g2v[i], c2[i], tol, detail::str(w, " cross ", i));
        use_deterministic_algorithms(true);
        const std::vector<Tensor> r1 = run2(g_dev), r2 = run2(g_dev);
        use_deterministic_algorithms(false);
        for (size_t i = 1; i < 4; ++i)
          EXPECT_EQ(test::values(r1[i]), test::values(r2[i])) << w << " deterministic gradient " << i;
      }
}

// cumsum along the last dim of rows longer than 64: the block scan (tiles of 256, a carry between them, a partial
// last tile), forward and reverse, floating and int64 (exact), against the CPU; a middle dim stays on the column path.
KERNEL_TEST(CumsumLongRowsScanInBlocks) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kInt64})
    for (const Shape& s : {Shape{3, 65}, Shape{2, 1000}, Shape{5, 3, 777}, Shape{4, 300, 2}})
      for (bool reverse : {false, true}) {
        const Tensor x = make(dt, s, 95);
        const int64_t dim = s.size() == 3 && s[2] == 2 ? 1 : static_cast<int64_t>(s.size()) - 1;
        compare(detail::str("cumsum ", tag(dt), " ", s, reverse ? " reverse" : ""), {x},
                [dim, reverse](const std::vector<Tensor>& in) { return raw::cumsum(in[0], dim, reverse); });
      }
}

// More rows than the shared-memory sort's grid (65535 blocks): the blocks take further rows in turn.
KERNEL_TEST(ArgsortMoreRowsThanBlocks) {
  const Tensor x = make(kFloat32, {70001, 5}, 90);
  compare("argsort 70001 rows", {x}, [](const std::vector<Tensor>& in) { return raw::argsort(in[0], 1); });
  compare("argsort 70001 rows descending", {x},
          [](const std::vector<Tensor>& in) { return raw::argsort(in[0], 1, true); });
}

// cuda::set_cudnn_benchmark(true): the convolution algorithms are timed once per shape and the fastest kept (with
// use_deterministic_algorithms, the fastest deterministic one); the results still match the CPU's, forward and both
// gradients, float32 and bfloat16.
KERNEL_TEST(Conv2dWithCudnnBenchmark) {
  EXPECT_FALSE(cuda::cudnn_benchmark());
  for (bool deterministic : {false, true})
    for (DType dt : {kFloat32, kBFloat16}) {
      cuda::set_cudnn_benchmark(true);
      use_deterministic_algorithms(deterministic);
      const Tensor x = make(dt, {4, 8, 14, 14}, 96) * 0.3, w = make(dt, {16, 8, 3, 3}, 97) * 0.3;
      const Tensor gy = make(dt, {4, 16, 14, 14}, 98) * 0.3;
      auto run = [&](Device dev) {
        Tensor xd = x.to(dev).detach().requires_grad_(), wd = w.to(dev).detach().requires_grad_();
        Tensor y = conv2d(xd, wd, Tensor(), {1}, {1});
        y.backward(gy.to(dev));
        return std::vector<Tensor>{y, xd.grad(), wd.grad()};
      };
      const std::vector<Tensor> c = run(Device::cpu()), g = run(g_dev);
      cuda::set_cudnn_benchmark(false);
      use_deterministic_algorithms(false);
      for (size_t i = 0; i < 3; ++i)
        expect_rel_near(g[i], c[i], dt == kFloat32 ? 1e-5 : 2e-2,
                        detail::str("conv2d benchmark ", tag(dt), deterministic ? " deterministic " : " ", i));
    }
  EXPECT_FALSE(cuda::cudnn_benchmark());
}

// cuDNN's 32-bit sizes: a batch over the element limit runs as slices of it. EMBER_CUDNN_MAX_ELEMENTS lowers the
// limit so that the slicing runs here on small tensors (ctest: test_cuda_kernels_vs_cpu_cudnn_slices; the GPU
// check runs it too): forward, data and filter gradients (the filter's summed over the slices) against the CPU.
KERNEL_TEST(Conv2dBatchSlices) {
  const Tensor x = make(kFloat32, {5, 3, 9, 8}, 91) * 0.3, w = make(kFloat32, {4, 3, 3, 3}, 92) * 0.3;
  const Tensor gy = make(kFloat32, {5, 4, 9, 8}, 93) * 0.3;
  auto run = [&](Device dev) {
    Tensor xd = x.to(dev).detach().requires_grad_(), wd = w.to(dev).detach().requires_grad_();
    Tensor y = conv2d(xd, wd, Tensor(), {1}, {1});
    y.backward(gy.to(dev));
    return std::vector<Tensor>{y, xd.grad(), wd.grad()};
  };
  const std::vector<Tensor> c = run(Device::cpu()), g = run(g_dev);
  for (size_t i = 0; i < 3; ++i) expect_rel_near(g[i], c[i], 1e-5, detail::str("conv2d sliced ", i));
}
}  // namespace
}  // namespace ember
