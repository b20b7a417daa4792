// Tests for views (reshape, view, transpose, permute, t, slice, select, squeeze, unsqueeze, flatten, expand),
// copies (contiguous, clone, copy_, fill_, zero_, to(DType)) and the gathering ops cat, stack, index_select (and
// raw::index_add_, its in-place adjoint).
// References are computed here from the inputs' values with plain index loops.
#include <cmath>
#include <cstring>
#include <limits>

#include "ember/core/raw_ops.h"
#include "test_util.h"

using namespace ember;

namespace {

Tensor randn64(const Shape& s) { return randn(s, {.dtype = kFloat64}); }
Tensor iota(const Shape& s, DType dt = kFloat64) { return arange(s.numel(), {.dtype = dt}).reshape(s); }
std::vector<double> vd(std::initializer_list<double> il) { return il; }

// v rounded to `bits` fraction bits, ties to even (the default rounding mode); normal range only.
double round_to_bits(double v, int bits) {
  if (v == 0 || !std::isfinite(v)) return v;
  int e = 0;
  const double m = std::frexp(v, &e);  // v = m * 2^e, 0.5 <= |m| < 1
  return std::ldexp(std::nearbyint(std::ldexp(m, bits + 1)), e - bits - 1);
}

// True when a and b are backed by the same storage (so writes through one show in the other).
bool shares(const Tensor& a, const Tensor& b) { return a.impl()->storage == b.impl()->storage; }

// Reference for a view: element idx of the view is x at the index `map(idx)` gives.
std::vector<double> gather_ref(const Tensor& x, const Shape& out_shape,
                               const std::function<std::vector<int64_t>(const std::vector<int64_t>&)>& map) {
  const std::vector<double> xv = test::values(x);
  const Shape st = contiguous_strides(x.shape());
  std::vector<double> r;
  test::for_each_index(out_shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> src = map(idx);
    int64_t off = 0;
    for (size_t d = 0; d < src.size(); ++d) off += src[d] * st[d];
    r.push_back(xv[static_cast<size_t>(off)]);
  });
  return r;
}

}  // namespace

// ---------------------------------------------------------------- reshape / view

TEST(Reshape, ViewWhenPossibleAndInfersMinusOne) {
  Tensor x = iota({2, 3, 4});
  Tensor y = x.reshape({4, -1});
  EXPECT_EQ(y.shape(), Shape({4, 6}));
  EXPECT_TRUE(shares(x, y));
  EXPECT_TENSOR_NEAR(y, Shape({4, 6}), test::values(x));  // row-major order is kept
  y.select(0, 1).select(0, 2).fill_(-7);                  // element 8 of the flat order
  EXPECT_EQ(x.to_vector<double>()[8], -7.0);
  EXPECT_EQ(x.reshape({-1}).shape(), Shape({24}));
  EXPECT_EQ(x.reshape({2, -1, 3}).shape(), Shape({2, 4, 3}));
  EXPECT_EQ(iota({0, 4}).reshape({-1, 2}).shape(), Shape({0, 2}));
  EXPECT_EQ(iota({1}).reshape({}).dim(), 0);
  // transposed input: a view when the new shape only splits or keeps dims, a copy otherwise
  Tensor t = iota({4, 6}).t();  // [6, 4], strides [1, 6]
  Tensor split = t.reshape({6, 2, 2});
  EXPECT_TRUE(shares(t, split));
  EXPECT_TENSOR_NEAR(split, Shape({6, 2, 2}), test::values(t));
  Tensor merged = t.reshape({24});
  EXPECT_FALSE(shares(t, merged));
  EXPECT_TENSOR_NEAR(merged, Shape({24}), test::values(t));
  merged.fill_(0);  // the copy is independent
  EXPECT_EQ(t.to_vector<double>()[1], 6.0);
}

TEST(Reshape, Errors) {
  Tensor x = iota({4, 6});
  EXPECT_THROW_MSG(x.reshape({5, -1}), ShapeError, "reshape: shape [5, -1] is invalid for input of size 24");
  EXPECT_THROW_MSG(x.reshape({5, 5}), ShapeError, "reshape", "[5, 5]", "24", "[4, 6]");
  EXPECT_THROW_MSG(x.reshape({-1, -1}), ShapeError, "reshape", "only one dimension can be -1");
  EXPECT_THROW_MSG(x.reshape({-2, 12}), ShapeError, "reshape", "invalid size -2");
}

TEST(View, SharesStorageOrThrows) {
  Tensor x = iota({4, 6});
  Tensor v = x.view({2, 2, 6});
  EXPECT_TRUE(shares(x, v));
  v.select(1, 1).fill_(100);  // rows 1 and 3 of x
  std::vector<double> xv = x.to_vector<double>();
  EXPECT_EQ(xv[6], 100.0);
  EXPECT_EQ(xv[23], 100.0);
  EXPECT_EQ(xv[12], 12.0);
  EXPECT_THROW_MSG(x.t().view({24}), ShapeError, "view: shape [24]", "strides [1, 6]", "use reshape()");
  // a step-2 slice over whole rows is still evenly strided: it splits and even merges without a copy
  Tensor s = iota({4, 6}).slice(1, 0, 6, 2);  // [4, 3], strides [6, 2]
  Tensor sv = s.view({2, 2, 3});
  EXPECT_EQ(sv.strides(), Shape({12, 6, 2}));
  EXPECT_TENSOR_NEAR(sv, Shape({2, 2, 3}), test::values(s));
  EXPECT_EQ(s.view({12}).strides(), Shape({2}));
  EXPECT_TENSOR_NEAR(s.view({12}), Shape({12}), test::values(s));
  // a slice of part of each row: the outer dim splits, the two dims cannot merge
  Tensor h = iota({4, 6}).slice(1, 1, 4);  // [4, 3], strides [6, 1]
  EXPECT_TENSOR_NEAR(h.view({2, 2, 3, 1}), Shape({2, 2, 3, 1}), test::values(h));
  EXPECT_TRUE(shares(h, h.view({2, 2, 3, 1})));
  EXPECT_THROW_MSG(h.view({12}), ShapeError, "view", "[12]", "[6, 1]");
  EXPECT_THROW_MSG(h.view({4, 3, 2}), ShapeError, "view", "invalid for input of size 12");
  // an expanded tensor views to shapes that keep the stride-0 dim separate
  Tensor e = iota({3, 1}).expand({3, 4});
  EXPECT_TENSOR_NEAR(e.view({3, 2, 2}), Shape({3, 2, 2}), test::values(e));
  EXPECT_THROW(e.view({12}), ShapeError);
}

// ---------------------------------------------------------------- transpose / permute / t

TEST(Transpose, PermuteAndT) {
  Tensor x = randn64({2, 3, 4});
  Tensor y = x.transpose(0, 2);
  EXPECT_EQ(y.shape(), Shape({4, 3, 2}));
  EXPECT_FALSE(y.is_contiguous());
  EXPECT_TENSOR_NEAR(y, Shape({4, 3, 2}), gather_ref(x, {4, 3, 2}, [](auto& i) {
                       return std::vector<int64_t>{i[2], i[1], i[0]};
                     }));
  EXPECT_EQ(x.transpose(-1, 0).shape(), Shape({4, 3, 2}));
  Tensor p = x.permute({1, 2, 0});
  EXPECT_EQ(p.shape(), Shape({3, 4, 2}));
  EXPECT_TENSOR_NEAR(p, Shape({3, 4, 2}), gather_ref(x, {3, 4, 2}, [](auto& i) {
                       return std::vector<int64_t>{i[2], i[0], i[1]};
                     }));
  EXPECT_EQ(x.permute({-1, 0, -2}).shape(), Shape({4, 2, 3}));
  // writes go through to the base
  p.select(0, 2).select(0, 1).select(0, 0).fill_(42);  // p[2, 1, 0] = x[0, 2, 1]
  EXPECT_EQ(x.to_vector<double>()[0 * 12 + 2 * 4 + 1], 42.0);

  Tensor m = randn64({3, 5});
  EXPECT_TENSOR_NEAR(m.t(), Shape({5, 3}), gather_ref(m, {5, 3}, [](auto& i) {
                       return std::vector<int64_t>{i[1], i[0]};
                     }));
  EXPECT_TRUE(shares(m, m.t()));
  EXPECT_EQ(randn64({4}).t().shape(), Shape({4}));
  EXPECT_THROW_MSG(x.t(), ShapeError, "t:", "[2, 3, 4]");
  EXPECT_THROW_MSG(x.permute({0, 0, 1}), ShapeError, "permute: dim 0 repeated in [0, 0, 1]");
  EXPECT_THROW_MSG(x.permute({0, 2, -1}), ShapeError, "permute", "repeated");
  EXPECT_THROW_MSG(x.permute({0, 1}), ShapeError, "permute", "2 dims", "rank 3", "[2, 3, 4]");
  EXPECT_THROW_MSG(x.transpose(0, 3), IndexError, "transpose", "dim 3", "rank 3");
}

// ---------------------------------------------------------------- slice / select

TEST(Slice, NegativeClampedAndStepped) {
  Tensor x = iota({5, 4});
  auto rows = [&](const Tensor& s, std::vector<int64_t> want) {
    EXPECT_TENSOR_NEAR(s, Shape({static_cast<int64_t>(want.size()), 4}),
                       gather_ref(x, {static_cast<int64_t>(want.size()), 4}, [&](auto& i) {
                         return std::vector<int64_t>{want[static_cast<size_t>(i[0])], i[1]};
                       }));
  };
  rows(x.slice(0, 1, 4), {1, 2, 3});
  rows(x.slice(0, -3, 100), {2, 3, 4});  // negative start, clamped end
  rows(x.slice(0, -100, 2), {0, 1});     // clamped start
  rows(x.slice(0, 0, 5, 2), {0, 2, 4});  // step 2
  rows(x.slice(0, 1, 5, 3), {1, 4});     // step 3
  rows(x.slice(0, -4, -1, 2), {1, 3});
  rows(x.slice(0, 4, 2), {});  // start after end: empty
  rows(x.slice(0, 7, 9), {});
  EXPECT_EQ(x.slice(-1, 1, 3).shape(), Shape({5, 2}));
  EXPECT_TENSOR_NEAR(x.slice(1, 1, 4, 2), Shape({5, 2}), gather_ref(x, {5, 2}, [](auto& i) {
                       return std::vector<int64_t>{i[0], 1 + 2 * i[1]};
                     }));
  // slicing a slice, and writing through it
  Tensor s = x.slice(0, 1, 5, 2).slice(1, 0, 4, 3);  // rows 1, 3; cols 0, 3
  EXPECT_TENSOR_NEAR(s, Shape({2, 2}), vd({4, 7, 12, 15}));
  s.fill_(-1);
  std::vector<double> xv = x.to_vector<double>();
  for (int64_t i : {4, 7, 12, 15}) EXPECT_EQ(xv[static_cast<size_t>(i)], -1.0);
  EXPECT_EQ(xv[5], 5.0);
  EXPECT_THROW_MSG(x.slice(0, 0, 2, 0), ValueError, "slice: step must be positive, got 0");
  EXPECT_THROW_MSG(x.slice(2, 0, 1), IndexError, "slice", "dim 2", "rank 2");
}

TEST(Select, NegativeIndexAndErrors) {
  Tensor x = iota({3, 4, 2});
  Tensor s = x.select(1, -1);
  EXPECT_EQ(s.shape(), Shape({3, 2}));
  EXPECT_TENSOR_NEAR(s, Shape({3, 2}), gather_ref(x, {3, 2}, [](auto& i) {
                       return std::vector<int64_t>{i[0], 3, i[1]};
                     }));
  s.fill_(-5);
  EXPECT_EQ(x.to_vector<double>()[0 * 8 + 3 * 2 + 1], -5.0);
  EXPECT_EQ(x.select(0, 2).select(0, 1).select(0, 1).dim(), 0);
  EXPECT_EQ(x.select(0, 2).select(0, 1).select(0, 1).item<double>(), 19.0);
  EXPECT_THROW_MSG(x.select(0, 3), IndexError, "select: index 3 is out of bounds for dim 0 with size 3");
  EXPECT_THROW_MSG(x.select(2, -3), IndexError, "select", "-3", "size 2");
}

// ---------------------------------------------------------------- squeeze / unsqueeze / flatten

TEST(Squeeze, UnsqueezeWithNegativeDims) {
  Tensor x = iota({2, 1, 3, 1});
  EXPECT_EQ(x.squeeze().shape(), Shape({2, 3}));
  EXPECT_EQ(x.squeeze(1).shape(), Shape({2, 3, 1}));
  EXPECT_EQ(x.squeeze(-1).shape(), Shape({2, 1, 3}));
  EXPECT_EQ(x.squeeze(0).shape(), Shape({2, 1, 3, 1}));  // not size 1: unchanged
  EXPECT_TRUE(shares(x, x.squeeze()));
  EXPECT_THROW_MSG(x.squeeze(4), IndexError, "squeeze", "dim 4");

  Tensor y = randn64({3, 4});
  EXPECT_EQ(y.unsqueeze(0).shape(), Shape({1, 3, 4}));
  EXPECT_EQ(y.unsqueeze(-1).shape(), Shape({3, 4, 1}));
  EXPECT_EQ(y.unsqueeze(-2).shape(), Shape({3, 1, 4}));
  EXPECT_EQ(y.unsqueeze(-3).shape(), Shape({1, 3, 4}));
  EXPECT_THROW_MSG(y.unsqueeze(3), IndexError, "unsqueeze", "dim 3");
  EXPECT_THROW_MSG(y.unsqueeze(-4), IndexError, "unsqueeze", "dim -4");
  // on a non-contiguous input the values follow
  Tensor u = y.t().unsqueeze(1);
  EXPECT_TENSOR_NEAR(u, Shape({4, 1, 3}), gather_ref(y, {4, 1, 3}, [](auto& i) {
                       return std::vector<int64_t>{i[2], i[0]};
                     }));
  EXPECT_TENSOR_NEAR(u.squeeze(1).contiguous(), Shape({4, 3}), test::values(y.t()));
  Tensor z = iota({}).unsqueeze(0);
  EXPECT_EQ(z.shape(), Shape({1}));
  EXPECT_EQ(z.squeeze().dim(), 0);
}

TEST(Flatten, StartEnd) {
  Tensor x = randn64({2, 3, 4, 5});
  EXPECT_EQ(x.flatten().shape(), Shape({120}));
  EXPECT_EQ(x.flatten(1, 2).shape(), Shape({2, 12, 5}));
  EXPECT_EQ(x.flatten(-2, -1).shape(), Shape({2, 3, 20}));
  EXPECT_EQ(x.flatten(2, 2).shape(), Shape({2, 3, 4, 5}));
  EXPECT_TRUE(shares(x, x.flatten(1)));
  EXPECT_TENSOR_NEAR(x.flatten(1, 2), Shape({2, 12, 5}), test::values(x));
  Tensor p = x.permute({0, 2, 1, 3});  // flattening non-adjacent memory copies, values stay in order
  EXPECT_TENSOR_NEAR(p.flatten(1, 2), Shape({2, 12, 5}), test::values(p));
  EXPECT_EQ(iota({}).flatten().shape(), Shape({1}));
  EXPECT_THROW_MSG(x.flatten(2, 1), IndexError, "flatten", "start dim 2", "end dim 1");
  EXPECT_THROW_MSG(x.flatten(0, 4), IndexError, "flatten", "dim 4");
}

// ---------------------------------------------------------------- expand

TEST(Expand, StrideZeroAndReadOnly) {
  Tensor x = randn64({3, 1});
  Tensor e = x.expand({2, 3, 4});
  EXPECT_EQ(e.shape(), Shape({2, 3, 4}));
  EXPECT_EQ(e.strides(), Shape({0, 1, 0}));
  EXPECT_TRUE(shares(x, e));
  EXPECT_TENSOR_NEAR(e, Shape({2, 3, 4}), gather_ref(x, {2, 3, 4}, [](auto& i) {
                       return std::vector<int64_t>{i[1], 0};
                     }));
  EXPECT_EQ(x.expand({-1, 5}).shape(), Shape({3, 5}));
  x.fill_(7);  // writes to the base show through every expanded element
  EXPECT_TENSOR_NEAR(e, Shape({2, 3, 4}), std::vector<double>(24, 7.0));
  EXPECT_THROW_MSG(e.fill_(1), Error, "fill_", "expanded view");
  EXPECT_THROW_MSG(e.zero_(), Error, "expanded view");
  EXPECT_THROW_MSG(e.copy_(zeros({2, 3, 4}, {.dtype = kFloat64})), Error, "copy_", "expanded view");
  EXPECT_THROW_MSG(e.add_(1.0), Error, "expanded view");
  EXPECT_TENSOR_NEAR(x, Shape({3, 1}), std::vector<double>(3, 7.0));  // none of the refused writes happened
  EXPECT_THROW_MSG(x.expand({3, 2, 5}), ShapeError, "expand", "[3, 1]", "[3, 2, 5]");
  EXPECT_THROW_MSG(x.expand({4}), ShapeError, "expand", "fewer dims");
}

// A shape whose element count overflows int64 is refused wherever it is formed, as zeros/empty/reshape refuse it:
// ones({1, 1}).expand({2^32, 2^32}) had numel() == 0 (the product wrapped) and a sum of 0.
TEST(Expand, ElementCountOverflowIsRefused) {
  const int64_t big = int64_t{1} << 32;
  EXPECT_THROW_MSG(ones({1, 1}).expand({big, big}), ShapeError, "expand", "[4294967296, 4294967296]",
                   "more elements than int64 can count");
  EXPECT_THROW_MSG(ones({1, 1}).expand({big, big, 0}), ShapeError, "expand");  // wherever a zero stands
  EXPECT_THROW_MSG(ones({1}).expand({0, big, big}), ShapeError, "expand");
  EXPECT_THROW_MSG(raw::as_strided(ones({1}), {big, big}, {0, 0}, 0), ShapeError, "as_strided");
  // Broadcasting two shapes that each fit into one that does not.
  EXPECT_THROW_MSG(ones({1, 1}).expand({big, 1}) + ones({1, 1}).expand({1, big}), ShapeError, "add", "broadcasting",
                   "more elements than int64 can count");
  // Large but countable views are fine (stride 0: no memory).
  const Tensor ok = ones({1, 1}).expand({big, 1 << 20});
  EXPECT_EQ(ok.numel(), big << 20);
  EXPECT_EQ(ones({1}).expand({0, big}).numel(), 0);
}

// ---------------------------------------------------------------- contiguous / clone / copy_ / fill_

TEST(Copies, ContiguousAndClone) {
  Tensor x = randn64({3, 4});
  EXPECT_EQ(x.contiguous().data_ptr(), x.data_ptr());  // already contiguous: no copy
  Tensor c = x.t().contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(shares(c, x));
  EXPECT_TENSOR_NEAR(c, Shape({4, 3}), test::values(x.t()));
  Tensor k = x.clone();
  EXPECT_FALSE(shares(k, x));
  std::vector<double> before = test::values(x);
  k.fill_(0);
  EXPECT_TENSOR_NEAR(x, Shape({3, 4}), before);
  x.fill_(1);
  EXPECT_TENSOR_NEAR(k, Shape({3, 4}), std::vector<double>(12, 0.0));
  Tensor ks = x.slice(1, 0, 4, 2).clone();  // clone of a view is contiguous and independent
  EXPECT_TRUE(ks.is_contiguous());
  EXPECT_EQ(ks.shape(), Shape({3, 2}));
}

TEST(Copies, CopyBroadcastsConvertsAndHandlesOverlap) {
  Tensor dst = zeros({3, 4}, {.dtype = kFloat64});
  Tensor row = randn64({4});
  dst.copy_(row);
  EXPECT_TENSOR_NEAR(dst, Shape({3, 4}), gather_ref(row, {3, 4}, [](auto& i) { return std::vector<int64_t>{i[1]}; }));
  // dtype conversion (float -> int truncates toward zero) into a strided view
  Tensor ints = zeros({4, 3}, {.dtype = kInt32});
  Tensor src = randn64({3, 4}) * 10.0;
  ints.t().copy_(src);
  std::vector<double> sv = test::values(src), iref(12);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      iref[static_cast<size_t>(j * 3 + i)] = std::trunc(sv[static_cast<size_t>(i * 4 + j)]);
  EXPECT_TENSOR_NEAR(ints, Shape({4, 3}), iref, 0, 0);
  // overlapping source and destination in one storage: as if the source were read first
  Tensor a = iota({10});
  a.slice(0, 1, 10).copy_(a.slice(0, 0, 9));
  EXPECT_TENSOR_NEAR(a, Shape({10}), vd({0, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
  Tensor b = iota({10});
  b.slice(0, 0, 9).copy_(b.slice(0, 1, 10));
  EXPECT_TENSOR_NEAR(b, Shape({10}), vd({1, 2, 3, 4, 5, 6, 7, 8, 9, 9}));
  Tensor m = iota({3, 3});
  std::vector<double> mt = test::values(m.t());
  m.copy_(m.t());
  EXPECT_TENSOR_NEAR(m, Shape({3, 3}), mt);
  EXPECT_THROW_MSG(dst.copy_(randn64({3})), ShapeError, "copy_", "[3]", "[3, 4]");
  EXPECT_THROW_MSG(dst.copy_(randn64({2, 3, 4})), ShapeError, "copy_", "[2, 3, 4]", "[3, 4]");
}

TEST(Copies, FillAndZeroOnViews) {
  Tensor x = iota({4, 5});
  x.slice(1, 1, 5, 2).fill_(-1);  // columns 1 and 3
  x.select(0, 2).zero_();
  std::vector<double> ref = test::values(iota({4, 5}));
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 5; ++c) {
      double& v = ref[static_cast<size_t>(r * 5 + c)];
      if (c == 1 || c == 3) v = -1;
      if (r == 2) v = 0;
    }
  EXPECT_TENSOR_NEAR(x, Shape({4, 5}), ref);
  Tensor i = zeros({3}, {.dtype = kInt64});
  i.fill_(2.7);  // converts as a cast does
  EXPECT_TENSOR_NEAR(i, Shape({3}), vd({2, 2, 2}), 0, 0);
  Tensor bl = zeros({2}, {.dtype = kBool});
  bl.fill_(3);
  EXPECT_EQ(bl.to_vector<bool>(), std::vector<bool>({true, true}));
  const uint32_t v0 = x.version();
  x.fill_(1);
  EXPECT_GT(x.version(), v0);
}

// ---------------------------------------------------------------- to(DType)

TEST(ToDType, EveryPairOnExactlyRepresentableValues) {
  const std::vector<DType> all = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool};
  const std::vector<double> v = {0, 1, 2, 3, 100, 127, 0, 5};  // exact in every dtype (bool: nonzero -> 1)
  for (DType from : all) {
    Tensor src = tensor<double>(v, {2, 4}).to(from);
    EXPECT_EQ(src.dtype(), from);
    for (DType to : all) {
      SCOPED_TRACE(testing::Message() << name(from) << " -> " << name(to));
      Tensor y = src.to(to);
      EXPECT_EQ(y.dtype(), to);
      std::vector<double> ref;
      for (double e : v) ref.push_back((from == kBool || to == kBool) ? (e != 0 ? 1.0 : 0.0) : e);
      EXPECT_TENSOR_NEAR(y, Shape({2, 4}), ref, 0, 0);
      EXPECT_TENSOR_NEAR(src.t().to(to), Shape({4, 2}), test::values(src.t().contiguous().to(to)), 0, 0);
    }
  }
  Tensor x = randn({3});
  EXPECT_TRUE(x.to(kFloat32).is_same(x));  // same dtype: the tensor itself
}

TEST(ToDType, FloatToIntSaturatesAndNaNIsZero) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  Tensor x = tensor<double>({1e10, -1e10, nan, inf, -inf, 300, -5, -0.5, 2.9, -2.9}, {10});
  EXPECT_TENSOR_NEAR(x.to(kInt32), Shape({10}),
                     vd({2147483647.0, -2147483648.0, 0, 2147483647.0, -2147483648.0, 300, -5, 0, 2, -2}), 0, 0);
  EXPECT_TENSOR_NEAR(x.to(kUInt8), Shape({10}), vd({255, 0, 0, 255, 0, 255, 0, 0, 2, 0}), 0, 0);
  std::vector<int64_t> i64 = tensor<double>({1e30, -1e30, nan}, {3}).to(kInt64).to_vector<int64_t>();
  EXPECT_EQ(i64, std::vector<int64_t>({std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), 0}));
  // float32 and float16 sources saturate the same way
  EXPECT_TENSOR_NEAR(x.to(kFloat32).to(kInt32), Shape({10}), test::values(x.to(kInt32)), 0, 0);
  EXPECT_TENSOR_NEAR(tensor<float>({70000.f, -1.f}, {2}).to(kFloat16).to(kUInt8), Shape({2}), vd({255, 0}), 0, 0);
  // NaN is nonzero, so true as a bool
  EXPECT_EQ(tensor<double>({nan, 0.0, -0.0, 0.25}, {4}).to(kBool).to_vector<bool>(),
            std::vector<bool>({true, false, false, true}));
  // integer narrowing wraps (two's complement), as in PyTorch
  Tensor big = tensor<int64_t>({(int64_t{1} << 32) + 5, -1, 256 + 7}, {3});
  EXPECT_TENSOR_NEAR(big.to(kInt32), Shape({3}), vd({5, -1, 263}), 0, 0);
  EXPECT_TENSOR_NEAR(big.to(kUInt8), Shape({3}), vd({5, 255, 7}), 0, 0);
}

TEST(ToDType, Float16RoundsToNearestEven) {
  const double u = std::ldexp(1.0, -10);  // float16 spacing at 1
  const std::vector<double> in = {
      1 + u / 2,           // tie -> even (1)
      1 + 3 * u / 2,       // tie -> even (1 + 2u)
      1 + u / 2 + u / 64,  // above the tie -> 1 + u
      65504,
      65519,
      65520,
      -65520,                                          // max; just below the overflow tie; the tie itself overflows
      std::ldexp(1.0, -24),                            // smallest subnormal
      std::ldexp(1.0, -25),                            // half of it: tie -> 0
      std::ldexp(3.0, -26),                            // 0.75 of it -> rounds up
      std::ldexp(3.0, -25),                            // 1.5 subnormal steps: tie -> even (2 steps)
      std::ldexp(1.0, -14),                            // smallest normal
      std::ldexp(1023.0, -24) + std::ldexp(1.0, -25),  // largest subnormal + half a step: tie -> 2^-14 (even)
      2049,
      -2051,
      0.1};
  const std::vector<double> want = {1,
                                    1 + 2 * u,
                                    1 + u,
                                    65504,
                                    65504,
                                    INFINITY,
                                    -INFINITY,
                                    std::ldexp(1.0, -24),
                                    0,
                                    std::ldexp(1.0, -24),
                                    std::ldexp(2.0, -24),
                                    std::ldexp(1.0, -14),
                                    std::ldexp(1.0, -14),
                                    2048,
                                    -2052,
                                    0.0999755859375};
  Tensor src = tensor<double>(in, {static_cast<int64_t>(in.size())}).to(kFloat32);
  Tensor h = src.to(kFloat16);
  EXPECT_TENSOR_NEAR(h, Shape({static_cast<int64_t>(in.size())}), want, 0, 0);
  EXPECT_TENSOR_NEAR(h.to(kFloat32), Shape({static_cast<int64_t>(in.size())}), want, 0, 0);  // float16 -> float32 exact
  // random normal-range values against the reference rounding of their float32 values
  manual_seed(40);
  Tensor r = randn({1000}) * 100.0f;
  std::vector<double> rref;
  for (double e : test::values(r)) rref.push_back(std::fabs(e) >= std::ldexp(1.0, -14) ? round_to_bits(e, 10) : NAN);
  std::vector<double> rh = test::values(r.to(kFloat16));
  for (size_t i = 0; i < rref.size(); ++i)
    if (!std::isnan(rref[i])) EXPECT_EQ(rh[i], rref[i]) << "float32 value " << r.to_vector<double>()[i];
  Tensor nan = tensor<float>({NAN}, {1}).to(kFloat16);
  EXPECT_TRUE(std::isnan(nan.to_vector<double>()[0]));
  uint16_t bits;
  std::memcpy(&bits, h.data_ptr(), 2);
  EXPECT_EQ(bits, 0x3c00);  // 1.0 in float16
}

TEST(ToDType, BFloat16RoundsToNearestEven) {
  const double u = std::ldexp(1.0, -7);  // bfloat16 spacing at 1
  const std::vector<double> in = {1 + u / 2, 1 + 3 * u / 2, 1 + u / 2 + u / 64, 3.0e38, -1.0 / 3, 256 + 1};
  const std::vector<double> want = {1, 1 + 2 * u, 1 + u, std::ldexp(226.0, 120), -171.0 / 512, 256};
  Tensor b = tensor<double>(in, {6}).to(kFloat32).to(kBFloat16);
  EXPECT_TENSOR_NEAR(b, Shape({6}), want, 0, 0);
  manual_seed(41);
  Tensor r = randn({1000}) * 1000.0f;
  std::vector<double> rref;
  for (double e : test::values(r)) rref.push_back(round_to_bits(e, 7));
  EXPECT_TENSOR_NEAR(r.to(kBFloat16), Shape({1000}), rref, 0, 0);
  EXPECT_TRUE(std::isinf(tensor<float>({3.4028235e38f}, {1}).to(kBFloat16).to_vector<double>()[0]));
  EXPECT_TRUE(std::isnan(tensor<float>({NAN}, {1}).to(kBFloat16).to_vector<double>()[0]));
}

// ---------------------------------------------------------------- cat / stack

TEST(Cat, DimsPromotionAndEmptyPieces) {
  Tensor a = randn64({2, 3}), b = randn64({4, 3}), c = randn64({2, 5});
  Tensor y = cat({a, b}, 0);
  std::vector<double> ref = test::values(a), bv = test::values(b);
  ref.insert(ref.end(), bv.begin(), bv.end());
  EXPECT_TENSOR_NEAR(y, Shape({6, 3}), ref);
  std::vector<double> av = test::values(a), cv = test::values(c), r1;
  for (int64_t i = 0; i < 2; ++i) {
    r1.insert(r1.end(), av.begin() + i * 3, av.begin() + i * 3 + 3);
    r1.insert(r1.end(), cv.begin() + i * 5, cv.begin() + i * 5 + 5);
  }
  EXPECT_TENSOR_NEAR(cat({a, c}, 1), Shape({2, 8}), r1);
  EXPECT_TENSOR_NEAR(cat({a, c}, -1), Shape({2, 8}), r1);
  EXPECT_TENSOR_NEAR(cat({a.t(), b.t()}, 1), Shape({3, 6}), test::values(y.t()));  // strided pieces
  // dtype promotion
  Tensor yi = cat({tensor<int32_t>({1, 2}, {2}), tensor<float>({0.5f}, {1})}, 0);
  EXPECT_EQ(yi.dtype(), kFloat32);
  EXPECT_TENSOR_NEAR(yi, Shape({3}), vd({1, 2, 0.5}));
  EXPECT_EQ(cat({ones({1}, {.dtype = kInt64}), ones({1}, {.dtype = kFloat16})}, 0).dtype(), kFloat16);
  EXPECT_EQ(cat({ones({1}, {.dtype = kBool}), ones({1}, {.dtype = kUInt8})}, 0).dtype(), kUInt8);
  // zero-size pieces
  EXPECT_TENSOR_NEAR(cat({zeros({0, 3}, {.dtype = kFloat64}), a, zeros({0, 3}, {.dtype = kFloat64})}, 0), Shape({2, 3}),
                     av);
  EXPECT_EQ(cat({zeros({0, 3}), zeros({0, 3})}, 0).shape(), Shape({0, 3}));
  EXPECT_EQ(cat({zeros({2, 0}), zeros({2, 0})}, 0).shape(), Shape({4, 0}));
  // the result is a fresh tensor
  Tensor single = cat({a}, 0);
  EXPECT_FALSE(shares(single, a));
}

TEST(Cat, Errors) {
  EXPECT_THROW_MSG(cat({ones({2, 3}), ones({2})}, 0), ShapeError,
                   "cat: tensor 1 has shape [2] but tensor 0 has [2, 3] (ranks differ)");
  EXPECT_THROW_MSG(cat({ones({2, 3}), ones({2, 4})}, 0), ShapeError, "cat", "except in dim 0", "[2, 3]", "[2, 4]");
  EXPECT_THROW_MSG(cat({}, 0), ValueError, "cat", "non-empty");
  EXPECT_THROW_MSG(cat({ones({}), ones({})}, 0), ShapeError, "cat", "zero-dimensional");
  EXPECT_THROW_MSG(cat({ones({2, 3}), ones({2, 3})}, 2), IndexError, "cat", "dim 2", "rank 2");
}

TEST(Stack, AnyDimAndNegative) {
  Tensor a = randn64({2, 3}), b = randn64({2, 3}), c = randn64({2, 3});
  std::vector<std::vector<double>> vs = {test::values(a), test::values(b), test::values(c)};
  auto ref = [&](const Shape& s, int d) {
    std::vector<double> r;
    test::for_each_index(s, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> rest = i;
      const int64_t which = rest[static_cast<size_t>(d)];
      rest.erase(rest.begin() + d);
      r.push_back(vs[static_cast<size_t>(which)][static_cast<size_t>(rest[0] * 3 + rest[1])]);
    });
    return r;
  };
  EXPECT_TENSOR_NEAR(stack({a, b, c}, 0), Shape({3, 2, 3}), ref({3, 2, 3}, 0));
  EXPECT_TENSOR_NEAR(stack({a, b, c}, 1), Shape({2, 3, 3}), ref({2, 3, 3}, 1));
  EXPECT_TENSOR_NEAR(stack({a, b, c}, 2), Shape({2, 3, 3}), ref({2, 3, 3}, 2));
  EXPECT_TENSOR_NEAR(stack({a, b, c}, -1), Shape({2, 3, 3}), ref({2, 3, 3}, 2));
  EXPECT_TENSOR_NEAR(stack({a, b, c}, -3), Shape({3, 2, 3}), ref({3, 2, 3}, 0));
  EXPECT_EQ(stack({ones({}), ones({})}, 0).shape(), Shape({2}));
  EXPECT_THROW_MSG(stack({ones({2, 3}), ones({3, 2})}, 0), ShapeError, "stack", "[2, 3]", "[3, 2]", "entry 1");
  EXPECT_THROW_MSG(stack({a, b}, 3), IndexError, "stack", "dim 3");
  EXPECT_THROW_MSG(stack({a, b}, -4), IndexError, "stack", "dim -4");
}

// ---------------------------------------------------------------- index_select

TEST(IndexSelect, Int64AndInt32RepeatedAndStrided) {
  Tensor x = randn64({5, 4});
  Tensor i64 = tensor<int64_t>({4, 0, 4, 2}, {4});
  auto ref0 = [&](const Tensor& src, std::vector<int64_t> idx, int64_t cols) {
    return gather_ref(src.contiguous(), {static_cast<int64_t>(idx.size()), cols}, [idx](auto& i) {
      return std::vector<int64_t>{idx[static_cast<size_t>(i[0])], i[1]};
    });
  };
  EXPECT_TENSOR_NEAR(x.index_select(0, i64), Shape({4, 4}), ref0(x, {4, 0, 4, 2}, 4));
  EXPECT_TENSOR_NEAR(index_select(x, 0, i64.to(kInt32)), Shape({4, 4}), ref0(x, {4, 0, 4, 2}, 4));
  Tensor cols = tensor<int32_t>({3, 3, 1}, {3});
  EXPECT_TENSOR_NEAR(x.index_select(-1, cols), Shape({5, 3}), gather_ref(x, {5, 3}, [](auto& i) {
                       const int64_t c[] = {3, 3, 1};
                       return std::vector<int64_t>{i[0], c[i[1]]};
                     }));
  // non-contiguous input
  Tensor xt = x.t();  // [4, 5]
  EXPECT_TENSOR_NEAR(xt.index_select(0, tensor<int64_t>({1, 3}, {2})), Shape({2, 5}), ref0(xt, {1, 3}, 5));
  Tensor x3 = randn64({2, 6, 3}).permute({2, 0, 1});  // [3, 2, 6]
  Tensor y3 = x3.index_select(2, tensor<int64_t>({5, 0}, {2}));
  EXPECT_TENSOR_NEAR(y3, Shape({3, 2, 2}), gather_ref(x3.contiguous(), {3, 2, 2}, [](auto& i) {
                       return std::vector<int64_t>{i[0], i[1], i[2] == 0 ? 5 : 0};
                     }));
  // the result is a copy; empty and 0-D indices
  Tensor y = x.index_select(0, i64);
  y.fill_(0);
  EXPECT_NE(x.to_vector<double>()[0], 0.0);
  EXPECT_EQ(x.index_select(1, zeros({0}, {.dtype = kInt64})).shape(), Shape({5, 0}));
  EXPECT_EQ(x.index_select(0, tensor<int64_t>({2}, {})).shape(), Shape({1, 4}));
  // strided index; a 0-dim input takes exactly one index (0)
  Tensor sidx = tensor<int64_t>({3, 9, 1, 9, 0, 9}, {6}).slice(0, 0, 6, 2);
  EXPECT_TENSOR_NEAR(x.index_select(0, sidx), Shape({3, 4}), ref0(x, {3, 1, 0}, 4));
  Tensor s = full({}, 2.5, {.dtype = kFloat64});
  Tensor s1 = s.index_select(0, tensor<int64_t>({0}, {1}));
  EXPECT_EQ(s1.dim(), 0);
  EXPECT_EQ(s1.item<double>(), 2.5);
  EXPECT_FALSE(shares(s1, s));
}

TEST(IndexSelect, Errors) {
  Tensor x = randn64({4, 3}).t();  // [3, 4], non-contiguous
  EXPECT_THROW_MSG(x.index_select(1, tensor<int64_t>({0, 4}, {2})), IndexError,
                   "index_select: index 4 is out of bounds for dim 1 with size 4", "[3, 4]");
  EXPECT_THROW_MSG(x.index_select(0, tensor<int32_t>({-1}, {1})), IndexError, "index_select", "index -1", "size 3");
  EXPECT_THROW_MSG(x.index_select(0, tensor<float>({0.f}, {1})), DTypeError, "index_select", "int64 or int32",
                   "float32");
  EXPECT_THROW_MSG(x.index_select(0, zeros({1, 1}, {.dtype = kInt64})), ShapeError, "index_select", "[1, 1]");
  EXPECT_THROW_MSG(x.index_select(2, zeros({1}, {.dtype = kInt64})), IndexError, "index_select", "dim 2");
  Tensor s = full({}, 1.0);
  EXPECT_THROW_MSG(s.index_select(0, tensor<int64_t>({0, 0}, {2})), IndexError, "index_select", "0-dim", "got 2");
  EXPECT_THROW_MSG(s.index_select(0, tensor<int64_t>({1}, {1})), IndexError, "index_select", "index 1", "size 1");
}

// raw::index_add_: src added in place at the positions index_select reads (repeated indices add up); a bad
// argument throws before anything is written.
TEST(IndexAdd, InPlaceRepeatedIndicesAndErrors) {
  Tensor out = tensor<double>({1, 2, 3, 4, 5, 6}, {3, 2});
  raw::index_add_(out, 0, tensor<int64_t>({2, 0, 2}, {3}), tensor<double>({10, 20, 30, 40, 50, 60}, {3, 2}));
  EXPECT_EQ(test::values(out), (std::vector<double>{31, 42, 3, 4, 65, 86}));
  Tensor flat = raw::reshape(out, {-1});
  raw::index_add_(flat, 0, tensor<int32_t>({5}, {1}), tensor<double>({-6}, {1}));
  EXPECT_EQ(test::values(out)[5], 80);

  const std::vector<double> before = test::values(out);
  const Tensor src = tensor<double>({1, 1}, {1, 2});
  EXPECT_THROW_MSG(raw::index_add_(out, 0, tensor<int64_t>({3}, {1}), src), IndexError, "index_add_", "index 3",
                   "size 3", "[3, 2]");
  EXPECT_THROW_MSG(raw::index_add_(out, 0, tensor<int64_t>({0}, {1}), src.to(kFloat32)), DTypeError, "index_add_",
                   "float32", "float64");
  EXPECT_THROW_MSG(raw::index_add_(out, 0, tensor<int64_t>({0, 1}, {2}), src), ShapeError, "index_add_", "[1, 2]",
                   "[2, 2]");
  Tensor strided = out.t();
  EXPECT_THROW_MSG(raw::index_add_(strided, 0, tensor<int64_t>({0}, {1}), tensor<double>({1, 1, 1}, {1, 3})),
                   ShapeError, "index_add_", "contiguous");
  EXPECT_EQ(test::values(out), before);  // nothing written by the refused calls
}
