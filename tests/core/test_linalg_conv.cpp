// Tests for matmul, linear, conv2d, max_pool2d and avg_pool2d on the CPU, each checked against a float64
// reference computed here with plain loops.
#include <cmath>
#include <limits>

#include "test_util.h"

using namespace ember;

namespace {

struct Ref {
  Shape shape;
  std::vector<double> v;
};

// Restores the CPU thread count on scope exit.
struct ThreadsGuard {
  int saved = get_num_threads();
  explicit ThreadsGuard(int n) { set_num_threads(n); }
  ~ThreadsGuard() { set_num_threads(saved); }
};

// NumPy matmul semantics, in float64: 1-D operands are promoted (row on the left, column on the right) and the
// promoted dim dropped after; batch dims broadcast.
Ref ref_matmul(const Tensor& a, const Tensor& b) {
  const std::vector<double> av = test::values(a), bv = test::values(b);
  Shape as = a.shape(), bs = b.shape();
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as = Shape{1, as[0]};
  if (b1) bs = Shape{bs[0], 1};
  const int64_t M = as[as.size() - 2], K = as[as.size() - 1], N = bs[bs.size() - 1];
  Shape ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const size_t nb = std::max(ba.size(), bb.size());
  Shape batch(nb, 1);
  for (size_t i = 0; i < nb; ++i) {
    int64_t da = i + ba.size() < nb ? 1 : ba[i + ba.size() - nb];
    int64_t db = i + bb.size() < nb ? 1 : bb[i + bb.size() - nb];
    batch[i] = da == 1 ? db : da;
  }
  Shape full = batch;
  full.push_back(M);
  full.push_back(N);
  Ref r;
  test::for_each_index(full, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> bi(idx.begin(), idx.end() - 2);
    const int64_t m = idx[nb], n = idx[nb + 1];
    const int64_t oa = ba.empty() ? 0 : test::bcast_offset(bi, ba), ob = bb.empty() ? 0 : test::bcast_offset(bi, bb);
    double s = 0;
    for (int64_t k = 0; k < K; ++k) s += av[(oa * M + m) * K + k] * bv[(ob * K + k) * N + n];
    r.v.push_back(s);
  });
  r.shape = batch;
  if (!a1) r.shape.push_back(M);
  if (!b1) r.shape.push_back(N);
  return r;
}

void expect_matmul(const Tensor& a, const Tensor& b, double tol = 1e-10) {
  Ref r = ref_matmul(a, b);
  Tensor y = matmul(a, b);
  EXPECT_EQ(y.dtype(), a.dtype());
  EXPECT_TENSOR_NEAR(y, r.shape, r.v, tol, tol);
}

Tensor randn64(const Shape& s) { return randn(s, {.dtype = kFloat64}); }
std::vector<double> vd(std::initializer_list<double> il) { return il; }

}  // namespace

// ---------------------------------------------------------------- matmul

TEST(Matmul, VectorVectorIsZeroDimDot) {
  manual_seed(1);
  Tensor a = randn64({7}), b = randn64({7});
  Tensor y = matmul(a, b);
  EXPECT_EQ(y.dim(), 0);
  expect_matmul(a, b);
}

TEST(Matmul, VectorMatrixAndMatrixVector) {
  manual_seed(2);
  expect_matmul(randn64({4}), randn64({4, 3}));     // -> [3]
  expect_matmul(randn64({3, 4}), randn64({4}));     // -> [3]
  expect_matmul(randn64({4}), randn64({2, 4, 3}));  // -> [2, 3]
  expect_matmul(randn64({2, 3, 4}), randn64({4}));  // -> [2, 3]
  EXPECT_EQ(matmul(randn64({4}), randn64({4, 3})).shape(), Shape({3}));
}

TEST(Matmul, MatrixMatrixAndBatched) {
  manual_seed(3);
  expect_matmul(randn64({7, 5}), randn64({5, 6}));
  expect_matmul(randn64({1, 1}), randn64({1, 1}));
  expect_matmul(randn64({3, 4, 5}), randn64({3, 5, 2}));
  expect_matmul(randn64({2, 3, 4}), randn64({4, 5}));  // 2-D right operand broadcasts over the batch
  expect_matmul(randn64({4, 5}), randn64({3, 5, 2}));
  // big enough for Eigen's blocked GEMM
  expect_matmul(randn64({67, 129}), randn64({129, 71}), 1e-9);
}

TEST(Matmul, BatchBroadcasting) {
  manual_seed(4);
  Tensor a = randn64({2, 1, 3, 4}), b = randn64({5, 4, 2});
  EXPECT_EQ(matmul(a, b).shape(), Shape({2, 5, 3, 2}));
  expect_matmul(a, b);
  expect_matmul(randn64({1, 3, 4}), randn64({6, 4, 2}));  // size-1 batch on the left (stride-0 batch)
  expect_matmul(randn64({2, 1, 3, 4}), randn64({1, 5, 4, 2}));
}

TEST(Matmul, NonContiguousOperands) {
  manual_seed(5);
  for (DType dt : {kFloat64, kFloat32}) {  // float32 runs the packed AVX2 kernel, float64 Eigen
    SCOPED_TRACE(name(dt));
    auto rn = [dt](const Shape& s) { return randn(s, {.dtype = dt}); };
    const double tol = dt == kFloat64 ? 1e-10 : 1e-5;
    Tensor at = rn({5, 7}).t(), bt = rn({6, 5}).t();  // column-major views
    expect_matmul(at, bt, tol);
    expect_matmul(at, rn({5, 6}), tol);
    expect_matmul(rn({7, 5}), bt, tol);
    // step-2 slice of the last dim: neither unit row nor column stride (packed path)
    Tensor as = rn({8, 10}).slice(1, 0, 10, 2), bs = rn({5, 12}).slice(1, 1, 12, 3);
    EXPECT_FALSE(as.is_contiguous());
    expect_matmul(as, bs, tol);
    // batched transposes and a batch permutation whose batch dims do not collapse to one stride
    expect_matmul(rn({3, 5, 4}).transpose(1, 2), rn({3, 2, 5}).transpose(1, 2), tol);
    expect_matmul(rn({4, 2, 3, 5}).permute({1, 0, 2, 3}), rn({2, 4, 5, 6}), tol);
    // strided 1-D operands
    expect_matmul(rn({9}).slice(0, 0, 9, 2), rn({5, 3}), tol);
    expect_matmul(rn({3, 5}), rn({10}).slice(0, 1, 10, 2), tol);
  }
}

TEST(Matmul, ExpandedOperandsWithStrideZeroRowsOrColumns) {
  manual_seed(6);
  for (DType dt : {kFloat64, kFloat32}) {
    SCOPED_TRACE(name(dt));
    auto rn = [dt](const Shape& s) { return randn(s, {.dtype = dt}); };
    const double tol = dt == kFloat64 ? 1e-10 : 1e-5;
    // A row repeated by expand has row stride 0; a column repeated has column stride 0.
    Tensor row = rn({1, 4}).expand({3, 4}), col = rn({4, 1}).expand({4, 5});
    EXPECT_EQ(row.stride(0), 0);
    expect_matmul(row, rn({4, 2}), tol);
    expect_matmul(rn({2, 4}), col, tol);
    expect_matmul(row, col, tol);
    expect_matmul(rn({1, 1}).expand({5, 1}), rn({1, 3}), tol);
    expect_matmul(rn({3, 4}), rn({1}).expand({4}), tol);  // expanded 1-D right operand: [4, 1] with stride 0
    expect_matmul(rn({1, 4}).expand({2, 3, 4}), rn({4, 5}), tol);
  }
}

TEST(Matmul, ManySmallMatricesAcrossThreads) {
  ThreadsGuard g(3);
  manual_seed(7);
  // enough small matrices that the batch is split across threads, each packing strided operands
  Tensor a = randn64({200, 16, 32}).slice(2, 0, 32, 2), b = randn64({200, 16, 16}).transpose(1, 2);
  expect_matmul(a, b);
  Tensor af = a.to(kFloat32), bf = b.to(kFloat32);
  Ref r = ref_matmul(af, bf);
  EXPECT_TENSOR_NEAR(matmul(af, bf), r.shape, r.v, 1e-4, 1e-4);
}

TEST(Matmul, EmptyDimensions) {
  // K = 0: a sum over nothing is 0
  Tensor z = matmul(ones({3, 0}, {.dtype = kFloat64}), ones({0, 4}, {.dtype = kFloat64}));
  EXPECT_TENSOR_NEAR(z, Shape({3, 4}), std::vector<double>(12, 0.0));
  EXPECT_TENSOR_NEAR(matmul(ones({2, 3, 0}), ones({2, 0, 4})), Shape({2, 3, 4}), std::vector<double>(24, 0.0));
  Tensor d = matmul(ones({0}), ones({0}));
  EXPECT_EQ(d.dim(), 0);
  EXPECT_EQ(d.item<double>(), 0.0);
  EXPECT_TENSOR_NEAR(matmul(ones({0}, {.dtype = kInt64}), ones({0, 2}, {.dtype = kInt64})), Shape({2}), vd({0, 0}));
  // M = 0, N = 0, batch = 0
  EXPECT_EQ(matmul(ones({0, 5}), ones({5, 4})).shape(), Shape({0, 4}));
  EXPECT_EQ(matmul(ones({3, 5}), ones({5, 0})).shape(), Shape({3, 0}));
  EXPECT_EQ(matmul(ones({0, 2, 3}), ones({3, 4})).shape(), Shape({0, 2, 4}));
}

TEST(Matmul, Float32AndIntegerDtypes) {
  manual_seed(8);
  Tensor a = randn({6, 9}), b = randn({9, 4});
  Ref r = ref_matmul(a, b);
  Tensor y = matmul(a, b);
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_TENSOR_NEAR(y, r.shape, r.v, 1e-5, 1e-5);

  Tensor ai = randint(-50, 50, {2, 5, 7}), bi = randint(-50, 50, {7, 3});
  Tensor yi = matmul(ai, bi);
  EXPECT_EQ(yi.dtype(), kInt64);
  Ref ri = ref_matmul(ai, bi);
  EXPECT_TENSOR_NEAR(yi, ri.shape, ri.v, 0, 0);  // exact
  // int64 sums beyond 2^53 stay exact (no detour through floating point)
  Tensor big = full({1, 2}, int64_t{1} << 40, {.dtype = kInt64}),
         big2 = full({2, 1}, int64_t{1} << 20, {.dtype = kInt64});
  EXPECT_EQ(matmul(big, big2).item<int64_t>(), (int64_t{1} << 61));

  Tensor a32 = randint(-9, 9, {4, 3}, {.dtype = kInt32}).t(), b32 = randint(-9, 9, {4, 2}, {.dtype = kInt32});
  Ref r32 = ref_matmul(a32, b32);
  Tensor y32 = matmul(a32, b32);
  EXPECT_EQ(y32.dtype(), kInt32);
  EXPECT_TENSOR_NEAR(y32, r32.shape, r32.v, 0, 0);

  for (DType dt : {kFloat16, kBFloat16}) {
    Tensor ah = randn({5, 8}).to(dt), bh = randn({8, 3}).to(dt);
    Ref rh = ref_matmul(ah, bh);  // inputs already rounded: only the output rounding is left
    Tensor yh = matmul(ah, bh);
    EXPECT_EQ(yh.dtype(), dt);
    EXPECT_TENSOR_NEAR(yh, rh.shape, rh.v, 3e-2, dt == kFloat16 ? 2e-3 : 1e-2);
  }
}

TEST(Matmul, Errors) {
  EXPECT_THROW_MSG(matmul(ones({64, 784}), ones({128, 10})), ShapeError,
                   "matmul: shapes [64, 784] and [128, 10] cannot be multiplied (784 != 128)");
  EXPECT_THROW_MSG(matmul(ones({3}), ones({4})), ShapeError, "matmul", "[3]", "[4]", "3 != 4");
  EXPECT_THROW_MSG(matmul(ones({2, 3, 4}), ones({3, 4, 5})), ShapeError, "matmul", "[2, 3, 4]", "[3, 4, 5]");
  EXPECT_THROW_MSG(matmul(ones({}), ones({3})), ShapeError, "matmul", "at least 1 dimension");
  EXPECT_THROW_MSG(matmul(ones({2, 3}), ones({3, 2}, {.dtype = kFloat64})), DTypeError, "matmul", "float32[2, 3]",
                   "float64[3, 2]");
  EXPECT_THROW_MSG(matmul(ones({2, 2}, {.dtype = kBool}), ones({2, 2}, {.dtype = kBool})), DTypeError, "matmul",
                   "bool");
}

// ---------------------------------------------------------------- linear

namespace {
Ref ref_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  const std::vector<double> xv = test::values(x), wv = test::values(w);
  const std::vector<double> bv = b.defined() ? test::values(b) : std::vector<double>{};
  const int64_t in = w.size(1), out = w.size(0);
  const int64_t nrows = Shape(x.shape().begin(), x.shape().end() - 1).numel();  // 1 for a 1-D input
  Ref r;
  r.shape = x.shape();
  r.shape[r.shape.size() - 1] = out;
  for (int64_t i = 0; i < nrows; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double s = bv.empty() ? 0.0 : bv[static_cast<size_t>(o)];
      for (int64_t k = 0; k < in; ++k) s += xv[static_cast<size_t>(i * in + k)] * wv[static_cast<size_t>(o * in + k)];
      r.v.push_back(s);
    }
  return r;
}
void expect_linear(const Tensor& x, const Tensor& w, const Tensor& b, double tol = 1e-10) {
  Ref r = ref_linear(x, w, b);
  EXPECT_TENSOR_NEAR(linear(x, w, b), r.shape, r.v, tol, tol);
}
}  // namespace

TEST(Linear, WithAndWithoutBias) {
  manual_seed(10);
  Tensor x = randn64({4, 5}), w = randn64({3, 5}), b = randn64({3});
  expect_linear(x, w, b);
  expect_linear(x, w, Tensor());
  EXPECT_EQ(linear(x, w).shape(), Shape({4, 3}));
  expect_linear(randn64({5}), w, b);                        // 1-D input -> [3]
  expect_linear(randn64({2, 4, 5}), w, b);                  // 3-D input
  expect_linear(randn64({4, 2, 5}).transpose(0, 1), w, b);  // non-contiguous input
  expect_linear(x, randn64({5, 3}).t(), b);                 // transposed weight
  Tensor xf = randn({8, 33}), wf = randn({17, 33}), bf = randn({17});
  Ref r = ref_linear(xf, wf, bf);
  EXPECT_TENSOR_NEAR(linear(xf, wf, bf), r.shape, r.v, 1e-4, 1e-4);
}

TEST(Linear, EmptyBatchAndZeroInputFeatures) {
  manual_seed(11);
  Tensor w = randn64({3, 5}), b = randn64({3});
  EXPECT_EQ(linear(zeros({0, 5}, {.dtype = kFloat64}), w, b).shape(), Shape({0, 3}));
  // in_features = 0: every output is just the bias
  Tensor x0 = zeros({4, 0}, {.dtype = kFloat64}), w0 = zeros({3, 0}, {.dtype = kFloat64});
  expect_linear(x0, w0, b);
  expect_linear(zeros({2, 4, 0}, {.dtype = kFloat64}), w0, Tensor());
}

TEST(Linear, Errors) {
  EXPECT_THROW_MSG(linear(ones({4, 6}), ones({3, 5})), ShapeError, "linear", "[4, 6]", "[3, 5]");
  EXPECT_THROW_MSG(linear(ones({4, 5}), ones({5})), ShapeError, "linear", "weight must be 2-D", "[5]");
  EXPECT_THROW_MSG(linear(ones({4, 5}), ones({3, 5}), ones({4})), ShapeError, "linear", "bias [4]", "[3, 5]");
  EXPECT_THROW_MSG(linear(ones({4, 5}), ones({3, 5}, {.dtype = kFloat64})), DTypeError, "linear", "float64[3, 5]");
}

// ---------------------------------------------------------------- conv2d

namespace {
// The textbook 7-loop convolution in float64 (cross-correlation, zero padding), NCHW.
Ref ref_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
  const std::vector<double> xv = test::values(x), wv = test::values(w);
  const std::vector<double> bv = b.defined() ? test::values(b) : std::vector<double>{};
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OC = w.size(0), KH = w.size(2), KW = w.size(3);
  const int64_t OH = (H + 2 * ph - KH) / sh + 1, OW = (W + 2 * pw - KW) / sw + 1;
  Ref r{{N, OC, OH, OW}, {}};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < OC; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = bv.empty() ? 0.0 : bv[static_cast<size_t>(oc)];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * sh - ph + kh, iw = ow * sw - pw + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += xv[static_cast<size_t>(((n * C + c) * H + ih) * W + iw)] *
                     wv[static_cast<size_t>(((oc * C + c) * KH + kh) * KW + kw)];
              }
          r.v.push_back(s);
        }
  return r;
}
// The textbook backward: gx and gw of the convolution above for upstream gradient gy (float64).
std::pair<Ref, Ref> ref_conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& gy, int64_t s, int64_t pad) {
  const std::vector<double> xv = test::values(x), wv = test::values(w), gv = test::values(gy);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OC = w.size(0), KH = w.size(2), KW = w.size(3), OH = gy.size(2), OW = gy.size(3);
  Ref gx{x.shape(), std::vector<double>(xv.size(), 0.0)}, gw{w.shape(), std::vector<double>(wv.size(), 0.0)};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < OC; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const double g = gv[static_cast<size_t>(((n * OC + oc) * OH + oh) * OW + ow)];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * s - pad + kh, iw = ow * s - pad + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const size_t xi = static_cast<size_t>(((n * C + c) * H + ih) * W + iw);
                const size_t wi = static_cast<size_t>(((oc * C + c) * KH + kh) * KW + kw);
                gx.v[xi] += g * wv[wi];
                gw.v[wi] += g * xv[xi];
              }
        }
  return {gx, gw};
}
void expect_conv(const Tensor& x, const Tensor& w, const Tensor& b, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                 double tol = 1e-10) {
  Ref r = ref_conv2d(x, w, b, sh, sw, ph, pw);
  Tensor y = conv2d(x, w, b, {sh, sw}, {ph, pw});
  EXPECT_EQ(y.dtype(), x.dtype());
  EXPECT_TENSOR_NEAR(y, r.shape, r.v, tol, tol);
}
}  // namespace

TEST(Conv2d, StridesPaddingsAndBias) {
  manual_seed(20);
  Tensor x = randn64({2, 3, 7, 6}), w = randn64({4, 3, 3, 3}), b = randn64({4});
  for (DType dt : {kFloat64, kFloat32})  // float32 runs the packed AVX2 kernel, float64 Eigen
    for (int64_t s : {1, 2})
      for (int64_t p : {0, 1, 2}) {
        SCOPED_TRACE(testing::Message() << name(dt) << " stride " << s << " padding " << p);
        const double tol = dt == kFloat64 ? 1e-10 : 1e-5;
        expect_conv(x.to(dt), w.to(dt), b.to(dt), s, s, p, p, tol);
        expect_conv(x.to(dt), w.to(dt), Tensor(), s, s, p, p, tol);
      }
  // scalar stride / padding arguments mean both dims
  Ref r = ref_conv2d(x, w, b, 2, 2, 1, 1);
  EXPECT_TENSOR_NEAR(conv2d(x, w, b, {2}, {1}), r.shape, r.v, 1e-10);
  Ref r0 = ref_conv2d(x, w, Tensor(), 1, 1, 0, 0);
  EXPECT_TENSOR_NEAR(conv2d(x, w), r0.shape, r0.v, 1e-10);
}

TEST(Conv2d, NonSquareKernelsStridesAndPaddings) {
  manual_seed(21);
  Tensor x = randn64({2, 2, 9, 8}), w = randn64({3, 2, 2, 4}), b = randn64({3});
  expect_conv(x, w, b, 1, 1, 0, 0);
  expect_conv(x, w, b, 2, 1, 1, 2);
  expect_conv(x, w, b, 1, 3, 2, 0);
  expect_conv(x, randn64({5, 2, 1, 1}), randn64({5}), 1, 1, 2, 2);  // 1x1 kernel, wide border
  expect_conv(x, randn64({1, 2, 9, 8}), Tensor(), 1, 1, 0, 0);      // kernel as large as the input -> 1x1 output
}

TEST(Conv2d, BatchLargerThanThreadsAndStridedInputs) {
  ThreadsGuard g(3);
  manual_seed(22);
  const int64_t N = get_num_threads() * 3 + 2;
  Tensor x = randn64({N, 3, 8, 8}), w = randn64({5, 3, 3, 3}), b = randn64({5});
  expect_conv(x, w, b, 1, 1, 1, 1);
  // NHWC storage seen as NCHW, and a transposed kernel
  Tensor xp = randn64({N, 8, 8, 3}).permute({0, 3, 1, 2});
  expect_conv(xp, randn64({5, 3, 3, 3}).transpose(2, 3), b, 2, 2, 1, 1);
  // float32 against the float64 reference
  Tensor xf = randn({N, 3, 10, 9}), wf = randn({6, 3, 3, 2}), bf = randn({6});
  expect_conv(xf, wf, bf, 2, 1, 1, 0, 1e-4);
  // empty batch: an empty output, and zero weight and bias gradients
  EXPECT_EQ(conv2d(zeros({0, 3, 8, 8}), ones({2, 3, 3, 3})).shape(), Shape({0, 2, 6, 6}));
  for (int64_t oc : {2, 40}) {  // CKK = 27 above and below OC
    Tensor x0 = zeros({0, 3, 8, 8}).requires_grad_(), w0 = ones({oc, 3, 3, 3}).requires_grad_(),
           b0 = ones({oc}).requires_grad_();
    sum(conv2d(x0, w0, b0)).backward();
    EXPECT_TENSOR_NEAR(w0.grad(), Shape({oc, 3, 3, 3}), std::vector<double>(static_cast<size_t>(oc * 27), 0.0));
    EXPECT_TENSOR_NEAR(b0.grad(), Shape({oc}), std::vector<double>(static_cast<size_t>(oc), 0.0));
  }
}

// The backward splits the batch into per-thread parts walked in chunks (core/cpu/conv.cpp, Note [Conv work
// split]); the weight gradient is summed per part. Shapes big enough for several parts, with chunks of several
// images (small images) and of one image (large ones), a last part shorter than the others, on 3 threads
// against 1 thread (one part, a different chunking) in float64 and float32.
TEST(Conv2d, BackwardSplitAcrossThreadsMatchesOneThread) {
  struct Case {
    Shape x, w;
    int64_t pad;
  };
  const Case cases[] = {{{7, 16, 16, 16}, {32, 16, 3, 3}, 1},
                        {{5, 16, 32, 32}, {8, 16, 5, 5}, 2},
                        {{9, 1, 28, 28}, {32, 1, 5, 5}, 2}};  // CKK < OC: the direct weight gradient (AVX-512) or
                                                              // the GEMM's, computed transposed
  for (DType dt : {kFloat64, kFloat32})
    for (const Case& c : cases) {
      manual_seed(23);
      const Tensor x0 = randn(c.x, {.dtype = dt}), w0 = randn(c.w, {.dtype = dt}), b0 = randn({c.w[0]}, {.dtype = dt});
      auto grads = [&](int threads) {
        ThreadsGuard g(threads);
        Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
        Tensor y = conv2d(x, w, b, {1}, {c.pad});
        manual_seed(24);
        sum(y * randn(y.shape(), {.dtype = dt})).backward();
        return std::vector<Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
      };
      const std::vector<Tensor> one = grads(1), three = grads(3);
      const double tol = dt == kFloat64 ? 1e-9 : 2e-3;
      const char* what[] = {"y", "x.grad", "w.grad", "b.grad"};
      for (size_t i = 0; i < one.size(); ++i) {
        SCOPED_TRACE(testing::Message() << name(dt) << " " << c.x << " " << what[i]);
        EXPECT_TENSOR_NEAR(three[i], one[i].shape(), test::values(one[i]), tol, tol);
      }
      // the bias gradient's per-image sums are added in image order whichever part computed them: bit for bit
      EXPECT_EQ(test::values(three[3]), test::values(one[3])) << name(dt) << " " << c.x;
    }
}

// float32 runs its own paths (weights packed once per call, the forward's im2col written straight into the
// GEMM's packed layout, W^T packed for the input gradient): check output and all three gradients against the
// float64 computation (gradchecked) on the same values. Geometries: "same" 5 x 5 with K cut into unequal
// slices (CKK = 425: 213 + 212), strided and padded (the general im2col rows), CKK < OC (the weight gradient
// computed transposed), output planes narrower than one 16-column sliver and not a multiple of it, CKK = 384
// (the forward's bias row, CKK + 1, starts a second K slice), a 64 x 64 plane (4096 columns: more than one
// of the GEMM's column blocks in the forward, K cut into 11 slices in the weight gradient), and the gather forms
// (conv_gather.h): the CNN's 32 -> 64 channels on 14 x 14 (all three directions; ragged last tiles of 2 and 4
// rows, K in several slices), a stride-2 forward and weight gradient, a padding as wide as the kernel (the input
// gradient is then no correlation: col2im), a 3 x 5 kernel on a 8 x 7 plane (the input gradient's correlation
// padded by 1 and 3), and a 3 x 3 plane into 32 channels (the packed forward on a plane narrower than a vector).
// Windows of at most 32 values at stride 1 take the direct forward (conv_direct.h): the 1 -> 32 channel 5 x 5
// layers here and below, OC = 7 and 3 (ragged channel tiles), rows of 2, 3, 10 and 64; also an RGB 3 x 3 layer
// into 11 channels on rows of 37 (more than one register tile along a row, the last one masked) and the example
// CNN's first layer on 3 images (the later images of a part reuse the padded buffer and its zero borders).
// The AVX-512 variant's direct weight gradient (conv_direct.h) on the same layers: ragged channel groups (OC = 7,
// 3, 11), rows of one partial vector (3), of whole vectors only (64) and of both (28, 37), a 7 x 3 kernel (its
// columns of 7 taps in runs of 3 + 4), a 4 x 4 one, 14 output rows (the 5-fold unrolled rows end 4 short) and a
// padding wider than the kernel.
TEST(Conv2d, Float32ForwardAndBackwardMatchFloat64) {
  struct Case {
    Shape x, w;
    int64_t stride, pad;
  };
  const Case cases[] = {{{3, 17, 7, 7}, {10, 17, 5, 5}, 1, 2},   {{2, 3, 11, 9}, {5, 3, 3, 3}, 2, 1},
                        {{4, 1, 12, 12}, {32, 1, 5, 5}, 1, 2},   {{2, 4, 3, 3}, {7, 4, 2, 2}, 1, 0},
                        {{2, 6, 10, 10}, {8, 6, 3, 1}, 1, 0},    {{2, 24, 6, 6}, {5, 24, 4, 4}, 1, 1},
                        {{1, 2, 64, 64}, {3, 2, 3, 3}, 1, 1},    {{2, 32, 14, 14}, {64, 32, 5, 5}, 1, 2},
                        {{2, 16, 13, 13}, {32, 16, 3, 3}, 2, 1}, {{1, 4, 6, 6}, {16, 4, 3, 3}, 1, 3},
                        {{2, 16, 8, 7}, {8, 16, 3, 5}, 1, 1},    {{2, 1, 3, 3}, {32, 1, 3, 3}, 1, 1},
                        {{2, 3, 9, 37}, {11, 3, 3, 3}, 1, 1},    {{3, 1, 28, 28}, {32, 1, 5, 5}, 1, 2},
                        {{2, 1, 12, 10}, {6, 1, 7, 3}, 1, 1},    {{2, 2, 9, 9}, {5, 2, 4, 4}, 1, 1},
                        {{2, 1, 14, 14}, {6, 1, 5, 5}, 1, 2},    {{2, 1, 6, 7}, {5, 1, 3, 3}, 1, 3}};
  for (const Case& c : cases) {
    manual_seed(31);
    const Tensor x0 = randn(c.x, {.dtype = kFloat64}), w0 = randn(c.w, {.dtype = kFloat64}),
                 b0 = randn({c.w[0]}, {.dtype = kFloat64});
    auto run = [&](DType dt) {
      Tensor x = x0.to(dt).clone().requires_grad_(), w = w0.to(dt).clone().requires_grad_(),
             b = b0.to(dt).clone().requires_grad_();
      Tensor y = conv2d(x, w, b, {c.stride}, {c.pad});
      manual_seed(32);
      sum(y * randn(y.shape(), {.dtype = kFloat64}).to(dt)).backward();
      return std::vector<Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
    };
    const std::vector<Tensor> d = run(kFloat64), f = run(kFloat32);
    const char* what[] = {"y", "x.grad", "w.grad", "b.grad"};
    for (size_t i = 0; i < d.size(); ++i) {
      SCOPED_TRACE(testing::Message() << c.x << " " << c.w << " " << what[i]);
      EXPECT_TENSOR_NEAR(f[i], d[i].shape(), test::values(d[i]), 1e-4, 1e-4);
    }
  }
}

// Non-finite values reach the weight gradient of exactly the taps that read them at an output position, as in the
// textbook sum (the same NaN, or infinity of the same sign). The direct weight gradient's last vector of a row spans
// lanes past the row's end (conv_direct.h), which must add nothing:
//  - image pixels at columns 26 and 27 of rows of 28 (padding 2) lie under those lanes for taps kw = 0: they read
//    neither at a valid position, and stay finite (unmasked image lanes give 0 * inf = NaN there);
//  - an infinite gy at channel 1's first position lies under the lanes past channel 0's last row: channel 0's
//    gradient stays finite (unmasked gy lanes fail it). Channel 1's own taps that meet it only through the padding
//    are NaN here (the padding's zeros times inf, as in an im2col GEMM), where the textbook sum skips the padding.
void expect_same_classes(const std::vector<double>& got, const std::vector<double>& ref, size_t from, size_t to,
                         int& finite, int& other) {
  for (size_t i = from; i < to; ++i) {
    SCOPED_TRACE(testing::Message() << "w.grad[" << i << "] (oc " << i / 25 << ", kh " << i / 5 % 5 << ", kw " << i % 5
                                    << ")");
    ASSERT_EQ(std::isnan(got[i]), std::isnan(ref[i])) << got[i] << " vs " << ref[i];
    ASSERT_EQ(std::isinf(got[i]), std::isinf(ref[i])) << got[i] << " vs " << ref[i];
    if (std::isinf(ref[i])) EXPECT_EQ(got[i], ref[i]);
    if (std::isfinite(ref[i])) EXPECT_NEAR(got[i], ref[i], 1e-4 * (1 + std::abs(ref[i])));
    ++(std::isfinite(ref[i]) ? finite : other);
  }
}

TEST(Conv2d, NonFiniteValuesReachOnlyTheTapsThatReadThem) {
  const double inf = std::numeric_limits<double>::infinity();
  manual_seed(51);
  {
    Tensor x = randn({2, 1, 12, 28}), w = randn({8, 1, 5, 5}).requires_grad_();
    x.select(0, 0).select(0, 0).select(0, 5).select(0, 27).fill_(inf);
    x.select(0, 1).select(0, 0).select(0, 9).select(0, 26).fill_(-inf);
    Tensor y = conv2d(x, w, Tensor(), {1}, {2});
    const Tensor gy = randn(y.shape());
    sum(y * gy).backward();
    const std::vector<double> ref = ref_conv2d_backward(x, w.detach(), gy, 1, 2).second.v;
    int finite = 0, other = 0;
    expect_same_classes(test::values(w.grad()), ref, 0, ref.size(), finite, other);
    EXPECT_EQ(finite, 8 * 5);  // the taps kw = 0 of every channel
    EXPECT_GT(other, 0);
  }
  {
    Tensor x = randn({2, 1, 12, 28}), w = randn({8, 1, 5, 5}).requires_grad_();
    Tensor y = conv2d(x, w, Tensor(), {1}, {2});
    Tensor gy = randn(y.shape());
    gy.select(0, 0).select(0, 1).select(0, 0).select(0, 0).fill_(inf);
    sum(y * gy).backward();
    const std::vector<double> ref = ref_conv2d_backward(x, w.detach(), gy, 1, 2).second.v;
    int finite = 0, other = 0;
    expect_same_classes(test::values(w.grad()), ref, 0, 25, finite, other);  // channel 0
    EXPECT_EQ(finite, 25);
  }
}

// Images large enough that the backward walks the column matrix in several row blocks (Note [Conv work split]
// in core/cpu/conv.cpp: ~2^15 floats per block, so 28 x 28 gives blocks of 32 and 36 rows of CKK = 54 or 100),
// for both dtypes, against the textbook backward.
TEST(Conv2d, BackwardInRowBlocksMatchesTheTextbookBackward) {
  struct Case {
    Shape x, w;
    int64_t stride, pad;
  };
  const Case cases[] = {
      {{2, 6, 28, 28}, {8, 6, 3, 3}, 1, 1}, {{2, 4, 30, 28}, {6, 4, 5, 5}, 1, 2}, {{2, 4, 29, 29}, {5, 4, 5, 5}, 1, 0}};
  for (DType dt : {kFloat64, kFloat32})
    for (const Case& c : cases) {
      manual_seed(41);
      Tensor x = randn(c.x, {.dtype = dt}).requires_grad_(), w = randn(c.w, {.dtype = dt}).requires_grad_();
      Tensor y = conv2d(x, w, Tensor(), {c.stride}, {c.pad});
      Tensor gy = randn(y.shape(), {.dtype = dt});
      sum(y * gy).backward();
      const auto [gx, gw] = ref_conv2d_backward(x.detach(), w.detach(), gy, c.stride, c.pad);
      const double tol = dt == kFloat64 ? 1e-10 : 1e-4;
      SCOPED_TRACE(testing::Message() << name(dt) << " " << c.x << " " << c.w);
      EXPECT_TENSOR_NEAR(x.grad(), gx.shape, gx.v, tol, tol);
      EXPECT_TENSOR_NEAR(w.grad(), gw.shape, gw.v, tol, tol);
    }
}

// The bias gradient of a float32 conv is summed in double (vectorised on AVX2, with a scalar tail): check it
// against a plain double sum of the upstream gradient, for output planes shorter and longer than a vector step.
// Alone (a serial pass over gy), and beside the input and weight gradients (summed image by image in the parts).
TEST(Conv2d, Float32BiasGradientIsTheSumOfTheUpstreamGradient) {
  for (int64_t hw : {3, 9, 30}) {
    manual_seed(static_cast<uint64_t>(hw));
    Tensor x = randn({3, 2, hw, hw}), w = randn({4, 2, 3, 3}), b = randn({4}).requires_grad_();
    if (hw == 9) x.requires_grad_();
    if (hw == 30) w.requires_grad_();
    Tensor y = conv2d(x, w, b, {1}, {1});
    Tensor g = randn(y.shape()) * 10.0;
    sum(y * g).backward();
    const std::vector<double> gv = test::values(g);
    std::vector<double> expect(4, 0.0);
    const int64_t plane = hw * hw;
    for (size_t i = 0; i < gv.size(); ++i) expect[static_cast<size_t>((static_cast<int64_t>(i) / plane) % 4)] += gv[i];
    EXPECT_TENSOR_NEAR(b.grad(), Shape({4}), expect, 1e-5, 1e-5) << hw;
  }
}

TEST(Conv2d, Errors) {
  EXPECT_THROW_MSG(conv2d(ones({2, 3, 5, 5}), ones({4, 2, 3, 3})), ShapeError,
                   "conv2d: input [2, 3, 5, 5] has 3 channels but weight [4, 2, 3, 3] expects 2");
  EXPECT_THROW_MSG(conv2d(ones({3, 5, 5}), ones({4, 3, 3, 3})), ShapeError, "conv2d", "4-D input", "[3, 5, 5]");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}), ones({4, 3, 3})), ShapeError, "conv2d", "4-D weight", "[4, 3, 3]");
  EXPECT_THROW_MSG(conv2d(ones({1, 1, 2, 2}), ones({1, 1, 3, 3})), ShapeError, "conv2d", "kernel 3x3",
                   "larger than the padded input 2x2", "[1, 1, 2, 2]");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}), ones({4, 3, 3, 3}), ones({3})), ShapeError, "conv2d", "bias [3]", "4");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}), ones({4, 3, 3, 3}), Tensor(), {0}), ValueError, "conv2d", "stride");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}), ones({4, 3, 3, 3}), Tensor(), {1}, {-1}), ValueError, "conv2d",
                   "padding");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}), ones({4, 3, 3, 3}), Tensor(), {1, 1, 1}), ValueError, "conv2d",
                   "stride must have 1 or 2 values");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}, {.dtype = kInt64}), ones({4, 3, 3, 3}, {.dtype = kInt64})), DTypeError,
                   "conv2d", "int64[1, 3, 5, 5]");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}), ones({4, 3, 3, 3}, {.dtype = kFloat64})), DTypeError, "conv2d",
                   "float64[4, 3, 3, 3]");
}

// ---------------------------------------------------------------- pools

namespace {
// Max ignores padding; average divides by the whole window, padding included (count_include_pad=True).
Ref ref_pool(bool is_max, const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
  const std::vector<double> xv = test::values(x);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = (H + 2 * ph - kh) / sh + 1, OW = (W + 2 * pw - kw) / sw + 1;
  Ref r{{N, C, OH, OW}, {}};
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double m = -std::numeric_limits<double>::infinity(), s = 0;
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t h = oh * sh - ph + i, w = ow * sw - pw + j;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            const double v = xv[static_cast<size_t>((nc * H + h) * W + w)];
            m = std::isnan(v) || std::isnan(m) ? std::nan("") : std::max(m, v);
            s += v;
          }
        r.v.push_back(is_max ? m : s / static_cast<double>(kh * kw));
      }
  return r;
}
void expect_pools(const Tensor& x, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
                  double tol = 1e-12) {
  const int64_t kh = k[0], kw = k.back();
  const int64_t sh = s.empty() ? kh : s[0], sw = s.empty() ? kw : s.back();
  const int64_t ph = p[0], pw = p.back();
  Ref rm = ref_pool(true, x, kh, kw, sh, sw, ph, pw), ra = ref_pool(false, x, kh, kw, sh, sw, ph, pw);
  EXPECT_TENSOR_NEAR(max_pool2d(x, k, s, p), rm.shape, rm.v, tol, tol);
  EXPECT_TENSOR_NEAR(avg_pool2d(x, k, s, p), ra.shape, ra.v, tol, tol);
}
}  // namespace

TEST(Pool2d, DefaultStrideIsKernel) {
  manual_seed(30);
  Tensor x = randn64({2, 3, 8, 7});
  expect_pools(x, {2}, {}, {0});
  expect_pools(x, {3}, {}, {0});  // 8x7 -> 2x2, the remainder rows/cols dropped
  EXPECT_EQ(max_pool2d(x, {3}).shape(), Shape({2, 3, 2, 2}));
  EXPECT_EQ(avg_pool2d(x, {2}).shape(), Shape({2, 3, 4, 3}));
  // the result stays exact on known values: [[0,1],[4,5]] -> max 5, mean 2.5
  Tensor a = arange(16, {.dtype = kFloat64}).reshape({1, 1, 4, 4});
  EXPECT_TENSOR_NEAR(max_pool2d(a, {2}), Shape({1, 1, 2, 2}), vd({5, 7, 13, 15}));
  EXPECT_TENSOR_NEAR(avg_pool2d(a, {2}), Shape({1, 1, 2, 2}), vd({2.5, 4.5, 10.5, 12.5}));
}

TEST(Pool2d, ExplicitStrideNonSquareAndPadding) {
  manual_seed(31);
  Tensor x = randn64({2, 2, 9, 8});
  expect_pools(x, {3}, {1}, {0});
  expect_pools(x, {3}, {2}, {1});
  expect_pools(x, {2, 3}, {1, 2}, {1, 1});
  expect_pools(x, {3, 2}, {2, 3}, {0, 1});
  expect_pools(x, {2}, {1}, {1});
  // all negative inputs: a padded zero must never win the max
  expect_pools(x - 10.0, {3}, {2}, {1});
  // avg counts the padding in the divisor: a 3x3 window at the corner covers 4 ones -> 4/9
  Tensor o = ones({1, 1, 4, 4}, {.dtype = kFloat64});
  Tensor av = avg_pool2d(o, {3}, {1}, {1});
  EXPECT_DOUBLE_EQ(av.to_vector<double>()[0], 4.0 / 9.0);
  EXPECT_DOUBLE_EQ(av.to_vector<double>()[5], 1.0);
  EXPECT_DOUBLE_EQ(max_pool2d(-o, {3}, {1}, {1}).to_vector<double>()[0], -1.0);
}

TEST(Pool2d, NaNStridedInputsFloat32AndManyChannels) {
  manual_seed(32);
  Tensor x = randn64({1, 1, 4, 4});
  x.select(2, 1).select(2, 1).fill_(std::nan(""));
  Tensor m = max_pool2d(x, {2});
  EXPECT_TRUE(std::isnan(m.to_vector<double>()[0]));
  EXPECT_FALSE(std::isnan(m.to_vector<double>()[1]));
  expect_pools(randn64({2, 6, 5, 3}).permute({0, 3, 2, 1}), {2}, {1}, {1});  // non-contiguous input
  expect_pools(randn({2, 3, 9, 9}), {3}, {2}, {1}, 1e-6);                    // float32
  ThreadsGuard g(3);
  expect_pools(randn64({64, 16, 8, 8}), {2}, {}, {0});  // enough channels to split across threads
}

// Max-pool backward with windows that tile the input (kernel == stride, no padding: the fast paths, including
// the vectorised 2x2 one) against a loop: each gradient goes to the FIRST maximum of its window, a NaN counting
// as the maximum; many ties (values from a 3-value set) and rows wide enough for full vectors plus a tail.
TEST(Pool2d, TiledMaxPoolBackwardRoutesToFirstMaximum) {
  for (DType dt : {kFloat32, kFloat64})
    for (int64_t k : {2, 3})
      // whole vectors of 8 (AVX2) or 16 (AVX-512) windows plus a masked rest; only a masked part; the CNN's 14
      // and 7; two whole AVX-512 vectors and one more
      for (int64_t windows : {19, 5, 14, 7, 33}) {
        manual_seed(41 + k);
        const int64_t H = 3 * k + 1, W = windows * k + 1;  // one row and column past the last window: no gradient
        Tensor x = randint(0, 3, {2, 3, H, W}).to(dt);
        x.select(2, 1).select(2, 5).fill_(std::nan(""));      // a NaN in a window...
        x.select(2, 1).select(2, W - 3).fill_(std::nan(""));  // ...and one further right
        x.requires_grad_();
        Tensor gy = randn({2, 3, H / k, W / k}, {.dtype = dt});
        Tensor y = max_pool2d(x, {k});
        y.backward(gy);
        const std::vector<double> xv = x.detach().to_vector<double>(), gv = gy.to_vector<double>();
        std::vector<double> want(xv.size(), 0.0), want_y(gv.size());
        const int64_t OH = H / k, OW = W / k;
        for (int64_t c = 0; c < 6; ++c)
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
              int64_t best = -1;
              for (int64_t i = 0; i < k * k && !(best >= 0 && std::isnan(xv[best])); ++i) {
                const int64_t at = (c * H + oh * k + i / k) * W + ow * k + i % k;
                if (best < 0 || xv[at] > xv[best] || std::isnan(xv[at])) best = at;
              }
              want[best] = gv[(c * OH + oh) * OW + ow];
              want_y[(c * OH + oh) * OW + ow] = xv[best];
            }
        const std::vector<double> got = x.grad().to_vector<double>(), got_y = y.to_vector<double>();
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], want[i]) << dt << " k=" << k << " W=" << W << " at " << i;
        for (size_t i = 0; i < got_y.size(); ++i) {
          if (std::isnan(want_y[i])) ASSERT_TRUE(std::isnan(got_y[i])) << i;
          else ASSERT_EQ(got_y[i], want_y[i]) << dt << " k=" << k << " W=" << W << " at " << i;
        }
      }
}

TEST(Pool2d, Errors) {
  EXPECT_THROW_MSG(max_pool2d(ones({1, 1, 4, 4}), {5}), ShapeError,
                   "max_pool2d: kernel 5x5 is larger than the padded input 4x4 (input [1, 1, 4, 4])");
  EXPECT_THROW_MSG(avg_pool2d(ones({1, 1, 4, 2}), {3}), ShapeError, "avg_pool2d", "kernel 3x3", "[1, 1, 4, 2]");
  EXPECT_THROW_MSG(max_pool2d(ones({1, 4, 4}), {2}), ShapeError, "max_pool2d", "4-D input", "[1, 4, 4]");
  EXPECT_THROW_MSG(max_pool2d(ones({1, 1, 4, 4}), {2}, {}, {2}), ValueError, "max_pool2d", "at most half the kernel");
  EXPECT_THROW_MSG(avg_pool2d(ones({1, 1, 4, 4}), {0}), ValueError, "avg_pool2d", "positive");
  EXPECT_THROW_MSG(avg_pool2d(ones({1, 1, 4, 4}), {2}, {0}), ValueError, "avg_pool2d", "positive");
  EXPECT_THROW_MSG(max_pool2d(ones({1, 1, 4, 4}), {}), ValueError, "max_pool2d", "kernel size is required");
  EXPECT_THROW_MSG(max_pool2d(ones({1, 1, 4, 4}, {.dtype = kInt64}), {2}), DTypeError, "max_pool2d", "int64");
}
