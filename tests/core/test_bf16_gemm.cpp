// The bf16 GEMM (core/cpu/bf16_gemm.h). Its two micro-kernels are instantiated here over an emulation of the
// AVX512-BF16 and AMX instructions, written from the Intel SDM's pseudo-code (VDPBF16PS, TILELOADD, TDPBF16PS,
// TILESTORED), so the driver's packing, slicing, edges and threads and the kernels' indexing are checked on any
// CPU; the native kernels run the same cases where the CPU has the instructions.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "bf16_gemm.h"
#include "bf16_kernels.h"
#include "ember/ember.h"

using namespace ember;
using ember::cpu::Bf16Kernel;
using ember::cpu::Bf16Path;

namespace {

float widen(uint32_t bf16_bits) {
  const uint32_t u = (bf16_bits & 0xFFFFu) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// VDPBF16PS zmm: lane j += a.bf16[2j+1] * b.bf16[2j+1], then += a.bf16[2j] * b.bf16[2j] (each product exact in
// float32, each sum rounded).
struct EmuDot {
  struct F {
    float v[16];
  };
  struct P {
    uint32_t v[16];
  };
  static F zero() { return F{}; }
  static P load_pairs(const uint32_t* p) {
    P r;
    std::memcpy(r.v, p, sizeof r.v);
    return r;
  }
  static P bcast(uint32_t x) {
    P r;
    for (auto& v : r.v) v = x;
    return r;
  }
  static F dp(F acc, P a, P b) {
    for (int j = 0; j < 16; ++j) {
      acc.v[j] += widen(a.v[j] >> 16) * widen(b.v[j] >> 16);
      acc.v[j] += widen(a.v[j]) * widen(b.v[j]);
    }
    return acc;
  }
  static F add(F a, F b) {
    for (int j = 0; j < 16; ++j) a.v[j] += b.v[j];
    return a;
  }
  static F load(const float* p, unsigned mask) {
    F r{};
    for (int j = 0; j < 16; ++j)
      if (mask >> j & 1) r.v[j] = p[j];
    return r;
  }
  static void store(float* p, F v, unsigned mask) {
    for (int j = 0; j < 16; ++j)
      if (mask >> j & 1) p[j] = v.v[j];
  }
};

// The eight tiles of bf16_kernels.h's assignment, 16 rows of 64 bytes each, per thread.
struct EmuAmx {
  static inline thread_local uint32_t tmm[8][16][16];
  static void load(int t, const uint32_t* base, int64_t stride_bytes) {
    for (int r = 0; r < 16; ++r) std::memcpy(tmm[t][r], base + r * stride_bytes / 4, 64);
  }
  // TDPBF16PS dst, a, b: dst.row[m].fp32[n] += sum over k of a.row[m].bf16[2k(+1)] * b.row[k].bf16[2n(+1)]
  static void dpbf16(int dst, int a, int b) {
    for (int m = 0; m < 16; ++m) {
      float acc[16];
      std::memcpy(acc, tmm[dst][m], 64);
      for (int k = 0; k < 16; ++k)
        for (int n = 0; n < 16; ++n) {
          acc[n] += widen(tmm[a][m][k]) * widen(tmm[b][k][n]);
          acc[n] += widen(tmm[a][m][k] >> 16) * widen(tmm[b][k][n] >> 16);
        }
      std::memcpy(tmm[dst][m], acc, 64);
    }
  }
  static void zero_c() { std::memset(tmm, 0, 4 * sizeof tmm[0]); }
  static void step(const uint32_t* a, const uint32_t* b) {
    load(4, a, 64);
    load(5, a + 16 * 16, 64);
    load(6, b, 128);
    load(7, b + 16, 128);
    dpbf16(0, 4, 6);
    dpbf16(1, 4, 7);
    dpbf16(2, 5, 6);
    dpbf16(3, 5, 7);
  }
  static void store_c(float* out) {
    const int at[4] = {0, 16, 16 * 32, 16 * 32 + 16};
    for (int t = 0; t < 4; ++t)
      for (int r = 0; r < 16; ++r) std::memcpy(out + at[t] + r * 32, tmm[t][r], 64);
  }
};

// The emulated AMX kernel's begin/end: open pairs (0 when every begin had its end) and begin calls (one per chunk).
std::atomic<int> g_begun{0}, g_begin_calls{0};
void emu_begin() {
  ++g_begun;
  ++g_begin_calls;
}
void emu_end() { --g_begun; }

const Bf16Kernel kEmuDot{Bf16Path::Avx512Bf16, cpu::bf16k::kDotMR, 1, &cpu::bf16k::dot_tile<EmuDot>, [] {}, [] {}};
const Bf16Kernel kEmuAmx{
    Bf16Path::Amx, cpu::bf16k::kTileMR, cpu::bf16k::kTileGroup, &cpu::bf16k::amx_tile<EmuAmx>, &emu_begin, &emu_end};

uint16_t to_bf16(float f) { return BFloat16(f).bits; }

struct Case {
  int64_t M, N, K;
  bool a_t = false, b_t = false;  // A / B stored transposed (column strides > 1)
  int64_t a_gap = 0;              // extra elements after each stored row of A (a non-contiguous view)
  bool accumulate = false;
  int threads = 1;
};

// Runs one case through kernel k against a float64 reference on the same bf16 values. With `integers` (values
// -4 .. 4) every product and sum is exact in float32, so the result must equal the reference exactly: a lost,
// doubled or misplaced product shows. Otherwise (normal values) the bound is float32 rounding of K sums,
// relative to the sum of |products|.
void check(const Bf16Kernel& k, const Case& c, uint32_t seed, bool integers) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(-4, 4);
  auto nd = [&](std::mt19937& g) { return integers ? static_cast<float>(small(g)) : normal(g); };
  const int64_t a_rows = c.a_t ? c.K : c.M, a_cols = c.a_t ? c.M : c.K, a_ld = a_cols + c.a_gap;
  const int64_t b_rows = c.b_t ? c.N : c.K, b_cols = c.b_t ? c.K : c.N;
  std::vector<uint16_t> A(a_rows * a_ld), B(b_rows * b_cols);
  for (auto& v : A) v = to_bf16(nd(rng));
  for (auto& v : B) v = to_bf16(nd(rng));
  const int64_t a_rs = c.a_t ? 1 : a_ld, a_cs = c.a_t ? a_ld : 1;
  const int64_t b_rs = c.b_t ? 1 : b_cols, b_cs = c.b_t ? b_cols : 1;
  const int64_t ldc = c.N + 3;  // C's rows padded: the kernel must not touch the gap
  std::vector<float> C(c.M * ldc + 1, 0.0f);
  for (auto& v : C) v = c.accumulate ? nd(rng) : -777.0f;
  const std::vector<float> C0 = C;
  cpu::bf16_gemm_with(k, c.M, c.N, c.K, A.data(), a_rs, a_cs, B.data(), b_rs, b_cs, C.data(), ldc, c.accumulate,
                      c.threads);
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double ref = c.accumulate ? C0[i * ldc + j] : 0.0, mag = std::abs(ref);
      for (int64_t p = 0; p < c.K; ++p) {
        const double t = double(widen(A[i * a_rs + p * a_cs])) * widen(B[p * b_rs + j * b_cs]);
        ref += t;
        mag += std::abs(t);
      }
      const double bound = integers ? 0.0 : std::ldexp(1.0, -24) * (c.K + 2) * mag;
      ASSERT_NEAR(C[i * ldc + j], ref, bound)
          << "M=" << c.M << " N=" << c.N << " K=" << c.K << " at (" << i << ", " << j << ")";
    }
    for (int64_t j = c.N; j < ldc && i * ldc + j < int64_t(C.size()); ++j)
      ASSERT_EQ(C[i * ldc + j], C0[i * ldc + j]) << "wrote past column N at row " << i;
  }
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  // edges of the 12-row, 32-row and 32-column tiles, odd K, several K slices (256 pairs each) with a short last
  for (int64_t M : {1, 11, 12, 13, 33, 70})
    for (int64_t N : {1, 16, 17, 32, 45})
      for (int64_t K : {1, 2, 3, 33, 514}) cs.push_back({M, N, K});
  cs.push_back({40, 70, 1200});                              // 3 slices of 200 pairs
  cs.push_back({25, 33, 31, true, false});                   // A transposed
  cs.push_back({25, 33, 31, false, true});                   // B transposed
  cs.push_back({25, 33, 31, true, true, 0, true});           // both, accumulating
  cs.push_back({37, 96, 601, true, false});                  // full panels over 3 slices, odd K: A transposed,
  cs.push_back({37, 96, 601, false, true});                  // B transposed (packing's 32-bit path)
  cs.push_back({37, 100, 601, false, false});                // and row-major (its interleaving path), a ragged panel
  cs.push_back({30, 20, 19, false, false, 5});               // A a non-contiguous view
  cs.push_back({29, 50, 600, false, false, 0, true});        // accumulate over slices
  cs.push_back({512, 256, 512, false, false, 0, false, 2});  // two threads: row panels and B packing split
  cs.push_back({0, 5, 5});                                   // empty: nothing to do
  cs.push_back({4, 5, 0});                                   // K = 0: zeros
  cs.push_back({4, 5, 0, false, false, 0, true});            // K = 0, accumulate: unchanged
  return cs;
}

void check_all(const Bf16Kernel& k) {
  uint32_t seed = 1;
  for (const Case& c : cases()) {
    SCOPED_TRACE(testing::Message() << "M=" << c.M << " N=" << c.N << " K=" << c.K << " a_t=" << c.a_t
                                    << " b_t=" << c.b_t << " accumulate=" << c.accumulate);
    check(k, c, seed++, true);
    if (testing::Test::HasFatalFailure()) return;
    check(k, c, seed++, false);
    if (testing::Test::HasFatalFailure()) return;
  }
}

TEST(Bf16Gemm, DotKernelEmulated) { check_all(kEmuDot); }

TEST(Bf16Gemm, AmxKernelEmulated) {
  check_all(kEmuAmx);
  EXPECT_EQ(g_begun, 0) << "begin/end unpaired";
}

// Two threads take a chunk of row panels each, each chunk with its own begin/end (AMX: tile configuration).
TEST(Bf16Gemm, TwoThreadsSplitTheRows) {
  g_begin_calls = 0;
  check(kEmuAmx, {512, 256, 512, false, false, 0, false, 2}, 7, true);
  EXPECT_EQ(g_begin_calls.load(), 2);
  EXPECT_EQ(g_begun.load(), 0);
}

// The native kernels on a CPU that has them (AVX512-BF16: Cooper Lake, Sapphire Rapids, Zen 4; AMX: Sapphire
// Rapids): the same cases, the real instructions.
void check_native(Bf16Path p) {
  if (!cpu::supports(p)) GTEST_SKIP() << "this CPU or its OS cannot run " << cpu::name(p);
  const Bf16Kernel* k = cpu::native_bf16_kernel(p);
  if (!k) GTEST_SKIP() << "this CPU, its OS or this build cannot run " << cpu::name(p);
  EXPECT_EQ(k->path, p);
  check_all(*k);
}
TEST(Bf16Gemm, DotKernelNative) { check_native(Bf16Path::Avx512Bf16); }
TEST(Bf16Gemm, AmxKernelNative) { check_native(Bf16Path::Amx); }

TEST(Bf16Gemm, PathIsOneTheCpuRuns) {
  const Bf16Path p = cpu::bf16_gemm_path();
  EXPECT_TRUE(cpu::supports(p)) << cpu::name(p);
  EXPECT_TRUE(p == Bf16Path::None || cpu::native_bf16_kernel(p) != nullptr);
  EXPECT_STREQ(cpu::name(Bf16Path::None), "off");
  EXPECT_STREQ(cpu::name(Bf16Path::Amx), "amx");
  EXPECT_STREQ(cpu::name(Bf16Path::Avx512Bf16), "avx512bf16");
  EXPECT_EQ(cpu_bf16_gemm(), cpu::name(p));
}

// matmul in bfloat16 against float32 on the same values: batched, transposed and broadcast operands, and the
// gradients of both operands (themselves bf16 matmuls of transposed views). The result is rounded once to bf16.
void check_matmul() {
  manual_seed(3);
  const Tensor a = randn({3, 37, 70}).to(kBFloat16).requires_grad_(),
               b = randn({70, 45}).to(kBFloat16).requires_grad_();
  const Tensor y = matmul(a, b), yt = matmul(b.t(), a.transpose(1, 2));
  ASSERT_EQ(y.dtype(), kBFloat16);
  const Tensor af = a.detach().to(kFloat32).requires_grad_(), bf = b.detach().to(kFloat32).requires_grad_();
  const Tensor ref = matmul(af, bf);
  auto close = [](const Tensor& got, const Tensor& want) {
    const float err = (got.detach().to(kFloat32) - want.detach()).abs().max().item<float>();
    const float scale = want.detach().abs().max().item<float>();
    EXPECT_LE(err, scale * 8e-3f) << "bf16's half-ulp is 2^-9 of a value";  // and float32 sums
    EXPECT_GT(scale, 0.0f);
  };
  close(y, ref);
  close(yt, ref.transpose(1, 2));
  const Tensor g = randn({3, 37, 45});
  (y.to(kFloat32) * g).sum().backward();
  (ref * g).sum().backward();
  ASSERT_TRUE(a.grad().defined() && b.grad().defined());
  EXPECT_EQ(a.grad().dtype(), kBFloat16);
  close(a.grad(), af.grad());
  close(b.grad(), bf.grad());
}

TEST(Bf16Gemm, MatmulMatchesFloat32) { check_matmul(); }  // whichever path this CPU takes

// The same through matmul's bf16 path (core/cpu/linalg.cpp) over each emulated kernel, on any CPU.
struct TestKernel {
  explicit TestKernel(const Bf16Kernel* k) { cpu::set_bf16_kernel_for_testing(k); }
  ~TestKernel() { cpu::set_bf16_kernel_for_testing(nullptr); }
};
TEST(Bf16Gemm, MatmulPathOverEmulatedKernels) {
  for (const Bf16Kernel* k : {&kEmuDot, &kEmuAmx}) {
    TestKernel use(k);
    ASSERT_EQ(cpu_bf16_gemm(), cpu::name(k->path));
    check_matmul();
  }
}

// Memory: over the bf16 GEMM, a bf16 matmul takes its output and one float32 buffer of the output's shape (the sums
// before rounding), and conv2d only its output: no float32 copies of the operands, which the widening path makes
// (a: 512 KiB, b: 512 KiB here). The allocator rounds to size classes (at most 1/8 over).
size_t peak_growth(const std::function<Tensor()>& f, Tensor* keep) {
  const size_t base = cpu_memory_stats().bytes_in_use;
  cpu_reset_peak_memory_stats();
  *keep = f();
  return cpu_memory_stats().peak_bytes_in_use - base;
}
TEST(Bf16Gemm, NoFloat32CopiesOfTheOperands) {
  TestKernel use(&kEmuDot);
  manual_seed(4);
  const Tensor a = randn({256, 512}).to(kBFloat16), b = randn({512, 256}).to(kBFloat16);
  Tensor y;
  const size_t mm = peak_growth([&] { return matmul(a, b); }, &y);
  EXPECT_LE(mm, (256 * 256 * (2 + 4)) * 9 / 8) << "bytes beyond the bf16 output and its float32 sums";
  const Tensor x = randn({4, 16, 32, 32}).to(kBFloat16), w = randn({32, 16, 3, 3}).to(kBFloat16);
  const size_t conv = peak_growth([&] { return conv2d(x, w, Tensor(), {1}, {1}); }, &y);
  EXPECT_LE(conv, (4 * 32 * 32 * 32 * 2) * 9 / 8) << "bytes beyond the bf16 output";
}

// conv2d and its three gradients in bf16 against float32 on the same values. A 3 x 2 kernel (kh and kw not
// interchangeable), stride and padding (windows off the edge), no bias / bias, small batches (one part: the GEMMs
// thread) and a larger one split among the threads (ConvSplit), and 64 x 3 x 3 = 576 column rows over a 64 x 64
// image (2.4M column elements: two row blocks, conv_bf16.cpp's block_rows).
void check_conv(int64_t C, int64_t N, int64_t stride, int64_t pad, bool bias, bool x_grad, int64_t H = 9,
                int64_t W = 8) {
  SCOPED_TRACE(testing::Message() << "C=" << C << " N=" << N << " stride=" << stride << " pad=" << pad << " H=" << H);
  manual_seed(5);
  const int64_t KW = C > 8 ? 3 : 2;
  const Tensor x = randn({N, C, H, W}).to(kBFloat16).requires_grad_(x_grad);
  const Tensor w = (randn({5, C, 3, KW}) * 0.3).to(kBFloat16).requires_grad_();
  const Tensor b = bias ? randn({5}).to(kBFloat16).requires_grad_() : Tensor();
  const Tensor y = conv2d(x, w, b, {stride}, {pad});
  ASSERT_EQ(y.dtype(), kBFloat16);
  auto f32 = [](const Tensor& t) { return t.defined() ? t.detach().to(kFloat32).requires_grad_() : Tensor(); };
  const Tensor xf = f32(x), wf = f32(w), bf = f32(b);
  const Tensor ref = conv2d(xf, wf, bf, {stride}, {pad});
  auto close = [](const Tensor& got, const Tensor& want, const char* what) {
    ASSERT_TRUE(got.defined()) << what;
    ASSERT_EQ(got.sizes(), want.sizes()) << what;
    const float err = (got.detach().to(kFloat32) - want.detach()).abs().max().item<float>();
    const float scale = want.detach().abs().max().item<float>();
    EXPECT_LE(err, scale * 8e-3f) << what;
    EXPECT_GT(scale, 0.0f) << what;
  };
  close(y, ref, "y");
  const Tensor g = randn(ref.sizes());
  (y.to(kFloat32) * g).sum().backward();
  (ref * g).sum().backward();
  close(w.grad(), wf.grad(), "w.grad");
  if (x_grad) close(x.grad(), xf.grad(), "x.grad");
  if (bias) close(b.grad(), bf.grad(), "b.grad");
}

void check_convs() {
  check_conv(3, 3, 1, 1, true, true);
  check_conv(3, 1, 2, 0, false, true);
  check_conv(64, 2, 1, 1, true, true);
  check_conv(3, 3, 2, 1, true, false);   // weight and bias gradients only
  check_conv(64, 12, 1, 1, true, true);  // 5 MFLOP: the images split among two threads (ConvSplit), gW summed per part
  check_conv(64, 1, 1, 1, true, true, 64, 64);  // 576 x 4096 column elements: two row blocks
}

TEST(Bf16Gemm, Conv2dMatchesFloat32) { check_convs(); }  // whichever path this CPU takes

TEST(Bf16Gemm, Conv2dPathOverEmulatedKernels) {
  for (const Bf16Kernel* k : {&kEmuDot, &kEmuAmx}) {
    TestKernel use(k);
    check_convs();
  }
}

}  // namespace
