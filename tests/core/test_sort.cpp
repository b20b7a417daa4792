// Tests raw::argsort (the backend's sort primitive) by the properties that define its result — each row of indices
// is a permutation, the values it picks are in order (NaN last ascending, first descending), and equal values keep
// their order (stable) — on every dtype, every dim, strided, long (multi-threaded), empty and 0-dim inputs, and its
// errors.
#include <cmath>
#include <limits>
#include <string>

#include <ember/core/raw_ops.h>

#include "test_util.h"

using namespace ember;
using test::values;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Checks idx = argsort(x, dim, descending) row by row (a row: the elements along dim).
::testing::AssertionResult sorted_rows(const Tensor& x, const Tensor& idx, int64_t dim, bool descending) {
  if (idx.dtype() != kInt64 || idx.shape() != x.shape())
    return ::testing::AssertionFailure() << "got " << idx.dtype() << idx.shape() << " for " << x.shape();
  if (x.dim() == 0) return ::testing::AssertionSuccess();
  const Tensor xr = x.transpose(dim, -1).contiguous(), ir = idx.transpose(dim, -1).contiguous();
  const std::vector<double> xv = values(xr);
  const std::vector<int64_t> iv = ir.to_vector<int64_t>();
  const int64_t n = x.size(dim), rows = n ? x.numel() / n : 0;
  // a before b: NaN is the largest value
  auto less = [](double a, double b) { return std::isnan(b) ? !std::isnan(a) : a < b; };
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<bool> seen(static_cast<size_t>(n), false);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = iv[static_cast<size_t>(r * n + k)];
      if (i < 0 || i >= n || seen[static_cast<size_t>(i)])
        return ::testing::AssertionFailure() << "row " << r << " is not a permutation (index " << i << ")";
      seen[static_cast<size_t>(i)] = true;
      if (k == 0) continue;
      const int64_t p = iv[static_cast<size_t>(r * n + k - 1)];
      const double a = xv[static_cast<size_t>(r * n + p)], b = xv[static_cast<size_t>(r * n + i)];
      const bool out_of_order = descending ? less(a, b) : less(b, a);
      const bool tie = !less(a, b) && !less(b, a);
      if (out_of_order || (tie && p > i))
        return ::testing::AssertionFailure() << "row " << r << ": x[" << p << "] = " << a << " then x[" << i
                                             << "] = " << b << (tie ? " (a tie out of order)" : "");
    }
  }
  return ::testing::AssertionSuccess();
}

// Small integers (many ties), as `dt`; floats get NaNs and both zeros too.
Tensor ties(DType dt, const Shape& s, uint64_t seed) {
  manual_seed(seed);
  Tensor x = randint(-3, 4, s).to(kFloat64);
  if (dt == kBool) return gt(x, 0.0);
  if (dt == kUInt8) return abs(x).to(kUInt8);
  if (!is_floating(dt)) return x.to(dt);
  x = where(eq(x, 3.0), full({}, kNaN, {.dtype = kFloat64}), x);   // NaNs tie with each other
  x = where(eq(x, -3.0), full({}, -0.0, {.dtype = kFloat64}), x);  // -0 ties with 0
  return (x * 0.5).to(dt);
}

TEST(Argsort, EveryDtypeDimAndDirection) {
  for (DType dt : kAllDTypes)
    for (int64_t d : {0, 1, 2, -1})
      for (bool desc : {false, true}) {
        SCOPED_TRACE(detail::str(dt, " dim ", d, desc ? " descending" : ""));
        const Tensor x = ties(dt, {3, 4, 9}, 1);
        EXPECT_TRUE(sorted_rows(x, raw::argsort(x, d, desc), d < 0 ? d + 3 : d, desc));
      }
}

TEST(Argsort, StridedLongAndManyRows) {
  const Tensor t = ties(kFloat32, {6, 5}, 2).t();  // non-contiguous
  for (int64_t d : {0, 1}) EXPECT_TRUE(sorted_rows(t, raw::argsort(t, d), d, false));
  const Tensor sliced = ties(kInt64, {4, 12}, 3).slice(1, 1, 12, 3);
  EXPECT_TRUE(sorted_rows(sliced, raw::argsort(sliced, 1, true), 1, true));
  // one long row (values distinct: randn), and many short rows spread over the threads
  manual_seed(4);
  const Tensor longrow = randn({3, 50000}, {.dtype = kFloat64});
  EXPECT_TRUE(sorted_rows(longrow, raw::argsort(longrow, 1), 1, false));
  const Tensor many = ties(kFloat64, {20000, 7}, 5);
  EXPECT_TRUE(sorted_rows(many, raw::argsort(many, 1, true), 1, true));
  EXPECT_TRUE(sorted_rows(many, raw::argsort(many, 0), 0, false));
}

TEST(Argsort, ExactOrderOfTiesAndNaN) {
  const Tensor x = tensor<double>({2, kNaN, -1, 2, kNaN, -0.0, 0.0});
  EXPECT_EQ(raw::argsort(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 6, 0, 3, 1, 4}));
  EXPECT_EQ(raw::argsort(x, 0, true).to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 0, 3, 5, 6, 2}));
  // float16 and bfloat16 compare as their values (not as their bits)
  const Tensor h = tensor<double>({0.5, -2, 1e-3, -1e-3}).to(kFloat16);
  EXPECT_EQ(raw::argsort(h, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 2, 0}));
  EXPECT_EQ(raw::argsort(h.to(kBFloat16), 0, true).to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(raw::argsort(tensor<bool>({true, false, true, false}), 0).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 3, 0, 2}));
}

TEST(Argsort, EmptyAndZeroDim) {
  EXPECT_EQ(raw::argsort(zeros({0, 3}), 0).shape(), Shape({0, 3}));
  EXPECT_EQ(raw::argsort(zeros({2, 0}), 1).shape(), Shape({2, 0}));
  const Tensor s = raw::argsort(full({}, 2.5), 0);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.dtype(), kInt64);
  EXPECT_EQ(s.item<int64_t>(), 0);
  EXPECT_EQ(raw::argsort(full({}, 2.5), -1, true).item<int64_t>(), 0);
}

TEST(Argsort, Errors) {
  const Tensor x = randn({2, 3});
  EXPECT_THROW_MSG(raw::argsort(x, 2), IndexError, "argsort", "dim 2", "rank 2");
  EXPECT_THROW_MSG(raw::argsort(x, -3), IndexError, "argsort", "-3");
  EXPECT_THROW_MSG(raw::argsort(Tensor(), 0), Error, "argsort", "undefined");
  float buf[6] = {};
  const Tensor g = test::host_memory_claiming_cuda(buf, {2, 3});
  if (!g.defined()) return;
  EXPECT_THROW_MSG(raw::argsort(g, 1), DeviceError, "cuda:0");
}

}  // namespace
