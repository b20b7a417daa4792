// The float32 GEMM kernel behind matmul, linear and conv2d, against a float64 reference computed here, over
// shapes that hit every edge of its blocking (partial micro-tiles, several K slices, several M and N blocks)
// and with transposed operands, on 1 and 2 threads.
#include "test_util.h"

using namespace ember;

namespace {
// reference: C = A @ B in float64 from the float32 inputs
std::vector<double> ref_mm(const Tensor& a, const Tensor& b) {
  std::vector<double> A = test::values(a), B = test::values(b);
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  std::vector<double> C(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j)
        C[static_cast<size_t>(i * N + j)] += A[static_cast<size_t>(i * K + k)] * B[static_cast<size_t>(k * N + j)];
  return C;
}
}  // namespace

TEST(Gemm, MatchesFloat64ReferenceAcrossBlockEdges) {
  struct Case {
    int64_t M, N, K;
  };
  const Case cases[] = {{1, 1, 1},
                        {5, 7, 3},
                        {6, 16, 256},
                        {7, 17, 257},
                        {13, 33, 600},
                        {145, 20, 9},
                        {300, 50, 40},
                        {2, 3100, 5},
                        {64, 128, 784},
                        {19, 40, 1000},
                        {70, 35, 813},
                        {3, 0, 4},
                        {0, 3, 4},
                        // every edge-tile kernel (4 or 6 rows x 8 or 16 columns) with partial rows and columns,
                        // over one and several K slices; conv2d's shapes (64 x 196 x 800, 800 x 196 x 64)
                        {10, 28, 700},
                        {11, 13, 5},
                        {4, 12, 9},
                        {5, 8, 1200},
                        {64, 196, 800},
                        {800, 196, 64},
                        // long K, small C: split along K at 2 threads (parts of 2048 and 1952 rows)
                        {37, 45, 4000},
                        // N > 512: row-major A packed, not read in place; transposed, a column stride of 1024
                        // with N = 200 packs column-major A too
                        {30, 600, 300},
                        {1024, 200, 30},
                        // row-major A in place with K <= 128 and N >= 256: blocks of 48 rows (then the last 4 read
                        // in place, 3 packed), a ragged last sliver of B, and at 2 threads each half of N = 600
                        {100, 256, 128},
                        {147, 300, 64},
                        {99, 600, 7}};
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& c : cases) {
      manual_seed(static_cast<uint64_t>(c.M * 1000 + c.N * 10 + c.K));
      Tensor a = randn({c.M, c.K}), b = randn({c.K, c.N});
      // The float32 result may differ from the float64 one by rounding that grows with K.
      const double tol = 1e-5 * std::sqrt(static_cast<double>(c.K) + 1);
      EXPECT_TENSOR_NEAR(matmul(a, b), Shape({c.M, c.N}), ref_mm(a, b), tol, tol)
          << c.M << "x" << c.N << "x" << c.K << " threads " << threads;
      // the same product through transposed (non-contiguous) views of transposed storage
      Tensor at = a.t().contiguous().t(), bt = b.t().contiguous().t();
      ASSERT_FALSE(c.M > 1 && c.K > 1 && at.is_contiguous());
      EXPECT_TENSOR_NEAR(matmul(at, bt), Shape({c.M, c.N}), ref_mm(a, b), tol, tol)
          << "transposed " << c.M << "x" << c.N << "x" << c.K;
    }
  }
}

// linear's bias on a product split along K (2 threads): added once, by the part that writes C.
TEST(Gemm, LongKSplitAddsTheBiasOnce) {
  const int saved = get_num_threads();
  set_num_threads(2);
  manual_seed(7);
  Tensor x = randn({24, 3000}), w = randn({20, 3000}), b = randn({20});
  std::vector<double> ref = ref_mm(x, w.t().contiguous());
  const std::vector<double> bv = test::values(b);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] += bv[i % 20];
  const double tol = 1e-5 * std::sqrt(3001.0);
  EXPECT_TENSOR_NEAR(linear(x, w, b), Shape({24, 20}), ref, tol, tol);
  set_num_threads(saved);
}

TEST(Gemm, KZeroGivesZeros) {
  Tensor c = matmul(randn({4, 0}), randn({0, 5}));
  EXPECT_TENSOR_NEAR(c, Shape({4, 5}), std::vector<double>(20, 0.0));
}
