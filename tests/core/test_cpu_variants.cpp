// tests: the CPU kernel variants (core/cpu/isa.h). The AVX-512 variant's own code paths — the 6 x 32 GEMM kernel,
// 32-column packing, conv2d's packed paths at that width — are compiled here for AVX2 (the `widetest` variant:
// the kernel sources with EMBER_SGEMM_WIDE, tests/CMakeLists.txt), so that every machine checks their logic
// against the variant in use, backend method by backend method. Also: the variant choice and its override, and
// that libember itself holds no AVX-512 instruction (that code lives only in the plugin).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

#include "../../core/cpu/cpu_backend.h"
#include "../../core/cpu/gemm.h"
#include "../../core/cpu/vec_math.h"
#include "test_util.h"

static_assert(ember::cpu::widetest::kSgemmNR == 32, "the widetest variant is the AVX-512 variant's 32-column GEMM");

namespace ember::cpu::widetest {
CpuBackend& variant_backend();
}

namespace ember {
namespace {

Backend& wide() { return cpu::widetest::variant_backend(); }
Backend& active() { return backend_for(Device::cpu()); }

Tensor rnd(const Shape& s, uint64_t seed) {
  manual_seed(seed);
  return randn(s);
}

// Both backends' results, within float32 rounding of different summation orders.
void expect_same(const Tensor& a, const Tensor& b, const std::string& what, double rtol = 2e-5) {
  const std::vector<double> ref = test::values(b);
  double scale = 1;
  for (double v : ref) scale = std::max(scale, std::fabs(v));
  EXPECT_TENSOR_NEAR(a, b.shape(), ref, 1e-5 * scale, rtol) << what;
}

TEST(CpuVariants, WideGemmMatchesOnEveryEdge) {
  for (int64_t m : {1, 5, 6, 7, 13, 70})
    for (int64_t n : {1, 15, 16, 17, 31, 32, 33, 100})
      for (int64_t k : {1, 7, 256, 300}) {
        Tensor a = rnd({2, m, k}, 1), b = rnd({2, k, n}, 2);
        for (bool ta : {false, true}) {
          const Tensor av = ta ? rnd({2, k, m}, 3).transpose(1, 2) : a, bv = ta ? rnd({2, n, k}, 4).transpose(1, 2) : b;
          Tensor o1 = zeros({2, m, n}), o2 = zeros({2, m, n});
          wide().matmul(o1, av, bv, Tensor());
          active().matmul(o2, av, bv, Tensor());
          expect_same(o1, o2, detail::str("matmul ", m, "x", n, "x", k, ta ? " transposed" : ""));
        }
      }
}

// Both variants against float64 products, A read in place (row-major, also a column slice of a wider matrix, so
// that its row stride is not K; column-major with a column stride of m, read in place for every m here, N being
// small, m = 128 included) and all with a ragged last sliver of rows (a last sliver of exactly 4 rows, m = 10 and
// 64, is read in place too, by the 4-row kernel).
TEST(CpuVariants, GemmMatchesFloat64WhereverAIsRead) {
  for (int64_t m : {1, 6, 10, 11, 64, 128, 150})
    for (int64_t n : {3, 32, 45})
      for (int64_t k : {5, 128, 513}) {
        const Tensor wide_a = rnd({m, k + 7}, 7), col_a = rnd({k, m}, 8).t(), b = rnd({k, n}, 9);
        const Tensor as[] = {rnd({m, k}, 10), wide_a.slice(1, 3, 3 + k), col_a};
        for (const Tensor& a : as) {
          const Tensor ref = matmul(a.to(kFloat64), b.to(kFloat64)).to(kFloat32);
          for (Backend* be : {&wide(), &active()}) {
            Tensor o = zeros({1, m, n});
            be->matmul(o, a.unsqueeze(0), b.unsqueeze(0), Tensor());
            expect_same(o.squeeze(0), ref, detail::str("matmul ", m, "x", n, "x", k, " a strides ", a.stride(0), ",",
                                                       a.stride(1), be == &wide() ? " wide" : " active"),
                        1e-4);
          }
        }
      }
}

// vec_math.h's float row reductions (one vector register with a masked tail; here the AVX2 build, the AVX-512 one
// runs in the attention suites on an AVX-512 machine) against the generic lane-array templates, for every length
// 0..40 (whole vectors and every tail). The floats past n hold 1e30: a tail that reads past the row changes every
// result. row_max also with a -inf entry, a NaN (skipped, as by the template) and an init above every value.
TEST(CpuVariants, FloatRowReductionsMatchTheGenericTemplates) {
  namespace vm = cpu::widetest;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<float> a(48, 1e30f), b(48, 1e30f);
    double mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      a[static_cast<size_t>(i)] = 10 * normal(rng), b[static_cast<size_t>(i)] = normal(rng);
      mag += std::fabs(a[static_cast<size_t>(i)]) * (1 + std::fabs(b[static_cast<size_t>(i)]));
    }
    const float ninf = -std::numeric_limits<float>::infinity();
    EXPECT_EQ(vm::row_max(a.data(), n, ninf), vm::row_max<float>(a.data(), n, ninf)) << n;
    EXPECT_EQ(vm::row_max(a.data(), n, 1e20f), 1e20f) << n;
    EXPECT_NEAR(vm::row_sum(a.data(), n), vm::row_sum<float>(a.data(), n), 1e-6 * mag + 1e-30) << n;
    EXPECT_NEAR(vm::row_dot(a.data(), b.data(), n), vm::row_dot<float>(a.data(), b.data(), n), 1e-6 * mag + 1e-30) << n;
    // softmax's double sums: the vector lanes against the generic template and an exact-enough long double sum
    long double exact = 0;
    for (int64_t i = 0; i < n; ++i) exact += a[static_cast<size_t>(i)];
    EXPECT_NEAR(vm::row_sum_double(a.data(), n), static_cast<double>(exact), 1e-13 * mag + 1e-300) << n;
    EXPECT_NEAR(vm::row_sum_double(a.data(), n), vm::row_sum_double<float>(a.data(), n), 1e-13 * mag + 1e-300) << n;
    if (n < 3) continue;
    a[1] = ninf;
    a[static_cast<size_t>(n - 1)] = std::numeric_limits<float>::quiet_NaN();
    const float m = vm::row_max(a.data(), n, ninf);
    EXPECT_FALSE(std::isnan(m)) << n;
    EXPECT_EQ(m, vm::row_max<float>(a.data(), n, ninf)) << n;
  }
}

// sgemm_serial_gather's C for A[i, p] = src[rows[i] + steps[p]] against float64 products of the A it reads: random
// B, C (written or accumulated, with a row stride wider than N) and bias per column.
void expect_gather_gemm_matches_float64(const std::vector<float>& src, const std::vector<int32_t>& rows,
                                        const std::vector<int32_t>& steps, int64_t n, bool acc, bool with_bias,
                                        std::mt19937& rng) {
  std::normal_distribution<float> normal;
  const auto m = static_cast<int64_t>(rows.size()), k = static_cast<int64_t>(steps.size());
  std::vector<float> b(static_cast<size_t>(k * n)), bp(static_cast<size_t>(cpu::widetest::PackedBLayout(k, n).size()));
  for (float& v : b) v = normal(rng);
  cpu::widetest::sgemm_pack_b(k, n, b.data(), n, 1, bp.data());
  const int64_t ldc = n + 3;
  std::vector<float> c(static_cast<size_t>(m * ldc));
  for (float& v : c) v = normal(rng);
  const std::vector<float> c0 = c;
  std::vector<float> bias(static_cast<size_t>(n));
  for (float& v : bias) v = normal(rng);
  cpu::widetest::sgemm_serial_gather(m, n, k, src.data(), rows.data(), steps.data(), bp.data(), c.data(), ldc, acc,
                                     with_bias ? bias.data() : nullptr);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(i * ldc + j);
      if (j >= n) {  // past N: untouched
        ASSERT_EQ(c[at], c0[at]) << m << "x" << n << "x" << k;
        continue;
      }
      double ref = (acc ? c0[at] : 0.0) + (with_bias ? bias[static_cast<size_t>(j)] : 0.0), mag = std::fabs(ref);
      for (int64_t p = 0; p < k; ++p) {
        const double t =
            double(src[static_cast<size_t>(rows[static_cast<size_t>(i)] + steps[static_cast<size_t>(p)])]) *
            b[static_cast<size_t>(p * n + j)];
        ref += t;
        mag += std::fabs(t);
      }
      ASSERT_NEAR(c[at], ref, 1e-5 * mag) << m << "x" << n << "x" << k << (acc ? " accumulated" : "")
                                          << (with_bias ? " with bias" : "") << " at " << i << "," << j;
    }
}

// The GEMM's gather form (sgemm_serial_gather, used by conv2d: A[i, p] = src[rows[i] + steps[p]]) against float64,
// with overlapping random tables, for M with ragged last tiles of 1 to 5 rows, N with ragged edges, K in one and in
// several slices, written and accumulated, with and without a bias per column (added with the first K slice only: a
// mutation adding it with every slice fails at K = 300 and 801).
TEST(CpuVariants, GatherGemmMatchesFloat64) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> src(4096);
  for (float& v : src) v = normal(rng);
  for (int64_t m : {1, 2, 3, 4, 5, 6, 13, 196})
    for (int64_t n : {7, 32, 45})
      for (int64_t k : {3, 300, 801})
        for (int mode = 0; mode < 4; ++mode) {
          std::vector<int32_t> rows(static_cast<size_t>(m)), steps(static_cast<size_t>(k));
          for (int32_t& r : rows) r = static_cast<int32_t>(rng() % 2048);
          for (int32_t& p : steps) p = static_cast<int32_t>(rng() % 2048);
          expect_gather_gemm_matches_float64(src, rows, steps, n, mode & 1, mode & 2, rng);
        }
}

// Rows as a convolution gives them: runs of consecutive offsets (positions along an output row of `run` of them, or
// taps along a kernel row), a gap between runs. The wide variant reads 12 or 10 rows that form two runs through two
// pointers (GatherRuns), split at every place 1..12 as the runs' starts move (first: the offset within the first
// run); rows of three runs or more (run 3) take the 6-row tiles. Each split with one vector of columns (N = 9), two
// (32), two of which the second is partial (20) and a ragged last sliver (45), K in one slice and in three.
// Mutations reading the second run from r1 + r, or taking a 12-row tile where the rows after the split are not one
// run, fail it.
TEST(CpuVariants, GatherGemmOverRunsMatchesFloat64) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> src(8192);
  for (float& v : src) v = normal(rng);
  for (int64_t run : {3, 5, 7, 12, 14, 28})
    for (int64_t first = 0; first < std::min<int64_t>(run, 12); ++first)
      for (int64_t m : {10, 12, 23, 60})
        for (int64_t n : {9, 20, 32, 45}) {
          std::vector<int32_t> rows(static_cast<size_t>(m)), steps(n == 20 ? 600 : 200);
          for (int64_t i = 0; i < m; ++i)
            rows[static_cast<size_t>(i)] = static_cast<int32_t>((i + first) / run * (run + 4) + (i + first) % run);
          for (int32_t& p : steps) p = static_cast<int32_t>(rng() % 4096);
          expect_gather_gemm_matches_float64(src, rows, steps, n, first % 3 == 1, first % 3 == 2, rng);
        }
}

// matmul's bias (a linear layer's), added by the float32 GEMM as it stores its tiles with the first K slice: both
// variants against float64, over ragged edges, K in one and several slices and K = 0, a batch of small products
// (one per thread), and one and two threads (split along N, or along M when M is the larger); float64 (Eigen,
// then a pass) and float16 (through float32) too.
TEST(CpuVariants, MatmulBiasMatchesFloat64) {
  const int saved = get_num_threads();
  struct Case {
    int64_t batch, m, n, k;
  };
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case c :
         {Case{1, 7, 45, 300}, Case{1, 300, 33, 513}, Case{1, 40, 700, 64}, Case{3, 5, 17, 9}, Case{1, 4, 10, 0}}) {
      const Tensor a = rnd({c.batch, c.m, c.k}, 21),
                   b = rnd({c.batch, c.k, c.n}, 22).transpose(1, 2).contiguous().transpose(1, 2), bias = rnd({c.n}, 23);
      const Tensor ref = (matmul(a.to(kFloat64), b.to(kFloat64)) + bias.to(kFloat64)).to(kFloat32);
      for (Backend* be : {&wide(), &active()}) {
        Tensor o = empty({c.batch, c.m, c.n});
        be->matmul(o, a, b, bias);
        expect_same(o, ref,
                    detail::str("matmul+bias ", c.batch, "x", c.m, "x", c.n, "x", c.k, " threads ", threads,
                                be == &wide() ? " wide" : " active"),
                    1e-4);
      }
      // bfloat16 takes its own GEMM where the CPU has bf16 dot products (the bias added in float32 before the one
      // rounding), else float32; its tolerance: a rounding to 8 bits of sums up to ~25
      for (DType dt : {kFloat64, kFloat16, kBFloat16}) {
        Tensor o = empty({c.batch, c.m, c.n}, {.dtype = dt});
        active().matmul(o, a.to(dt), b.to(dt), bias.to(dt));
        const Tensor r = (matmul(a.to(dt).to(kFloat64), b.to(dt).to(kFloat64)) + bias.to(dt).to(kFloat64));
        const double tol = dt == kFloat64 ? 1e-10 : dt == kFloat16 ? 2e-2 : 1.5e-1;
        EXPECT_TENSOR_NEAR(o, r.shape(), test::values(r), tol, dt == kBFloat16 ? 1e-2 : tol)
            << name(dt) << " " << c.m << "x" << c.n << "x" << c.k;
      }
    }
  }
  set_num_threads(saved);
}

// Column-major A that stays packed (a column stride of 128 floats with N > 512), against float64.
TEST(CpuVariants, GemmPacksColumnMajorAForWideProducts) {
  const Tensor a = rnd({300, 128}, 24).t(), b = rnd({300, 600}, 25);  // A [128, 300], column stride 128
  const Tensor ref = matmul(a.to(kFloat64), b.to(kFloat64)).to(kFloat32);
  for (Backend* be : {&wide(), &active()}) {
    Tensor o = zeros({1, 128, 600});
    be->matmul(o, a.unsqueeze(0), b.unsqueeze(0), Tensor());
    expect_same(o.squeeze(0), ref, be == &wide() ? "wide" : "active", 1e-4);
  }
}

TEST(CpuVariants, WideGemmLargeAndThreaded) {
  const int saved = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor a = rnd({1, 300, 500}, 5), b = rnd({1, 500, 700}, 6);
    Tensor o1 = zeros({1, 300, 700}), o2 = zeros({1, 300, 700});
    wide().matmul(o1, a, b, Tensor());
    active().matmul(o2, a, b, Tensor());
    expect_same(o1, o2, detail::str("matmul 300x700x500, threads ", threads), 1e-4);
  }
  set_num_threads(saved);
}

// conv2d forward and backward with the float32 GEMM's forms (packed: weights packed once, im2col straight into
// packed B, the weight gradient packed 32 columns at a time; gather: the column matrix read from the padded image)
// over geometries that hit the edges.
TEST(CpuVariants, WideConvForwardAndBackward) {
  struct Geo {
    Shape x, w;
    Conv2dParams p;
  };
  const std::vector<Geo> geos = {{{2, 3, 9, 8}, {4, 3, 3, 3}, {1, 1, 1, 1}},
                                 {{3, 1, 28, 28}, {32, 1, 5, 5}, {1, 1, 2, 2}},
                                 {{2, 16, 14, 14}, {33, 16, 5, 5}, {1, 1, 2, 2}},
                                 {{2, 5, 11, 13}, {7, 5, 3, 2}, {2, 1, 1, 0}},
                                 {{1, 64, 7, 7}, {3, 64, 3, 3}, {1, 1, 0, 0}}};
  for (const Geo& g : geos) {
    Tensor x = rnd(g.x, 10), w = rnd(g.w, 11), b = rnd({g.w[0]}, 12);
    const int64_t oh = (g.x[2] + 2 * g.p.pad_h - g.w[2]) / g.p.stride_h + 1;
    const int64_t ow = (g.x[3] + 2 * g.p.pad_w - g.w[3]) / g.p.stride_w + 1;
    const Shape ys = {g.x[0], g.w[0], oh, ow};
    Tensor y1 = empty(ys), y2 = empty(ys);
    wide().conv2d(y1, x, w, b, g.p);
    active().conv2d(y2, x, w, b, g.p);
    const std::string what = detail::str("conv2d x", g.x, " w", g.w);
    expect_same(y1, y2, what + " forward", 1e-4);
    Tensor gy = rnd(ys, 13);
    Tensor gx1 = empty(g.x), gw1 = empty(g.w), gb1 = empty({g.w[0]}), gx2 = empty(g.x), gw2 = empty(g.w),
           gb2 = empty({g.w[0]});
    wide().conv2d_backward({.gx = gx1, .gw = gw1, .gb = gb1, .gy = gy, .x = x, .w = w, .p = g.p});
    active().conv2d_backward({.gx = gx2, .gw = gw2, .gb = gb2, .gy = gy, .x = x, .w = w, .p = g.p});
    expect_same(gx1, gx2, what + " grad x", 1e-4);
    expect_same(gw1, gw2, what + " grad w", 1e-4);
    expect_same(gb1, gb2, what + " grad b", 1e-4);
  }
}

// The loops the compiler vectorises (elementwise, reductions, softmax, batch norm, the optimiser step) for every
// listed op, against the variant in use.
TEST(CpuVariants, WideLoopsMatch) {
  Tensor x = rnd({37, 129}, 20), y = rnd({37, 129}, 21), pos = abs(x) + 0.1;
  for (UnaryOp op : kAllUnaryOps) {
    const Tensor in = op == UnaryOp::Sqrt || op == UnaryOp::Log ? pos : x;
    Tensor o1 = empty(in.shape()), o2 = empty(in.shape());
    wide().unary(op, o1, in);
    active().unary(op, o2, in);
    expect_same(o1, o2, name(op));
  }
  for (BinaryOp op : kAllBinaryOps) {
    const Tensor a = op == BinaryOp::Pow ? pos : x;
    const DType dt = is_comparison(op) ? kBool : kFloat32;
    Tensor o1 = empty(x.shape(), {.dtype = dt}), o2 = empty(x.shape(), {.dtype = dt});
    wide().binary(op, o1, a, y);
    active().binary(op, o2, a, y);
    expect_same(o1, o2, name(op));
  }
  for (ReduceOp op : kAllReduceOps) {
    const DType dt = is_index_reduction(op) ? kInt64 : kFloat32;
    Tensor o1 = empty({37, 1}, {.dtype = dt}), o2 = empty({37, 1}, {.dtype = dt});
    wide().reduce(op, o1, x, {1});
    active().reduce(op, o2, x, {1});
    expect_same(o1, o2, name(op));
  }
  for (bool log : {false, true}) {
    Tensor o1 = empty(x.shape()), o2 = empty(x.shape());
    wide().softmax(o1, x, 1, log);
    active().softmax(o2, x, 1, log);
    expect_same(o1, o2, log ? "log_softmax" : "softmax");
  }
  Tensor bx = rnd({8, 6, 5, 5}, 22), m1 = empty({6}), v1 = empty({6}), m2 = empty({6}), v2 = empty({6});
  wide().batch_norm_stats(m1, v1, bx);
  active().batch_norm_stats(m2, v2, bx);
  expect_same(m1, m2, "batch_norm mean");
  expect_same(v1, v2, "batch_norm var");
  Tensor p1 = rnd({1000}, 23), p2 = p1.clone(), g = rnd({1000}, 24);
  Tensor e1 = zeros({1000}), s1 = zeros({1000}), e2 = zeros({1000}), s2 = zeros({1000});
  const AdamParams h{.lr = 1e-2,
                     .beta1 = 0.9,
                     .beta2 = 0.999,
                     .eps = 1e-8,
                     .weight_decay = 0.01,
                     .decoupled = true,
                     .bias_correction1 = 0.1,
                     .bias_correction2 = 0.001};
  wide().adam_step({{.param = p1, .grad = g, .exp_avg = e1, .exp_avg_sq = s1, .hyper = h}});
  active().adam_step({{.param = p2, .grad = g, .exp_avg = e2, .exp_avg_sq = s2, .hyper = h}});
  expect_same(p1, p2, "adam");
}

// The variant in use: one the CPU runs; "avx512" only where it can (and the plugin loads).
TEST(CpuVariants, TheActiveVariantRunsHere) {
  const std::string isa = cpu_isa();
  EXPECT_TRUE(isa == "avx2" || isa == "avx512") << isa;
  EXPECT_TRUE(cpu::supports(cpu::Isa::Avx2));
  if (isa == "avx512") EXPECT_TRUE(cpu::supports(cpu::Isa::Avx512));
  const char* env = std::getenv("EMBER_CPU_ISA");
  // Unasked, every CPU with AVX-512 runs that variant, AMD's too (measured faster on each: docs/cpu.md).
  if ((!env || !*env) && cpu::supports(cpu::Isa::Avx512)) EXPECT_EQ(isa, "avx512") << cpu::active_isa_note();
  if (env && std::string(env) == "avx2") EXPECT_EQ(isa, "avx2");
  if (env && std::string(env) == "avx512" && cpu::supports(cpu::Isa::Avx512))
    EXPECT_EQ(isa, "avx512") << cpu::active_isa_note();
  if (env && std::string(env) == "avx512" && !cpu::supports(cpu::Isa::Avx512)) {
    EXPECT_EQ(isa, "avx2");
    EXPECT_NE(cpu::active_isa_note().find("cannot run AVX-512"), std::string::npos) << cpu::active_isa_note();
  }
}

// libember is the AVX2 variant and what every machine maps: no instruction of it may touch a zmm or mask register.
TEST(CpuVariants, LibemberHoldsNoAvx512Instruction) {
  const std::string cmd =
      std::string("objdump -d --no-show-raw-insn '") + EMBER_LIBRARY_PATH + "' 2>/dev/null | grep -cE '%zmm|%k[1-7]'";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[64] = {};
  const bool read = std::fgets(buf, sizeof buf, p) != nullptr;
  pclose(p);
  if (!read) GTEST_SKIP() << "objdump is not available";
  EXPECT_EQ(std::atoi(buf), 0) << "instructions using AVX-512 registers in " << EMBER_LIBRARY_PATH;
}

}  // namespace
}  // namespace ember
