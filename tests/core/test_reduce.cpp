// Tests the reductions (sum, mean, max, min, var, argmax, argmin), raw::cumsum, softmax / log_softmax and raw::sum_to
// against float64 references computed here with plain loops, over every dim combination, keepdim, strided,
// expanded, empty, 0-dim and large (multi-threaded) inputs.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include <ember/core/raw_ops.h>

#include "test_util.h"

using namespace ember;
using test::values;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
using Fold = std::function<double(const std::vector<double>&)>;
using Gen = std::function<Tensor(const Shape&)>;

// x's values grouped by the output element of a reduction over `dims` (empty: all), each group in row-major
// order; `kept` is the keepdim shape, `dropped` the other.
struct Groups {
  Shape kept, dropped;
  std::vector<std::vector<double>> g;
};
Groups group(const Tensor& x, const std::vector<int64_t>& dims) {
  const int64_t nd = x.dim();
  std::vector<bool> red(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims)
    if (nd > 0) red[static_cast<size_t>(d < 0 ? d + nd : d)] = true;
  Groups r;
  for (int64_t d = 0; d < nd; ++d) {
    r.kept.push_back(red[static_cast<size_t>(d)] ? 1 : x.size(d));
    if (!red[static_cast<size_t>(d)]) r.dropped.push_back(x.size(d));
  }
  r.g.resize(static_cast<size_t>(r.kept.numel()));
  const std::vector<double> v = values(x);
  size_t k = 0;
  test::for_each_index(x.shape(), [&](const std::vector<int64_t>& i) {
    r.g[static_cast<size_t>(test::bcast_offset(i, r.kept))].push_back(v[k++]);
  });
  return r;
}
::testing::AssertionResult reduced_near(const Tensor& out, const Groups& G, bool keepdim, const Fold& f, double t) {
  std::vector<double> ref;
  for (const auto& g : G.g) ref.push_back(f(g));
  return test::tensor_near(out, keepdim ? G.kept : G.dropped, ref, t, t);
}
::testing::AssertionResult reduced_near(const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims,
                                        bool keepdim, const Fold& f, double t) {
  return reduced_near(out, group(x, dims), keepdim, f, t);
}

double f_sum(const std::vector<double>& g) {
  double s = 0;
  for (double v : g) s += v;
  return s;
}
double f_mean(const std::vector<double>& g) { return f_sum(g) / static_cast<double>(g.size()); }
double f_max(const std::vector<double>& g) {
  double m = -kInf;
  for (double v : g) m = (std::isnan(v) || std::isnan(m)) ? kNaN : std::max(m, v);
  return m;
}
double f_min(const std::vector<double>& g) {
  double m = kInf;
  for (double v : g) m = (std::isnan(v) || std::isnan(m)) ? kNaN : std::min(m, v);
  return m;
}
Fold f_var(int64_t correction) {
  return [correction](const std::vector<double>& g) {
    const double m = f_mean(g);
    double ss = 0;
    for (double v : g) ss += (v - m) * (v - m);
    return ss / static_cast<double>(std::max<int64_t>(static_cast<int64_t>(g.size()) - correction, 0));
  };
}
// First index of the max (min); a NaN counts as the extreme, the first one wins.
Fold f_arg(bool is_max) {
  return [is_max](const std::vector<double>& g) {
    size_t best = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      if (std::isnan(g[i])) return static_cast<double>(i);
      if (is_max ? g[i] > g[best] : g[i] < g[best]) best = i;
    }
    return static_cast<double>(best);
  };
}
double tol(DType d) { return d == kFloat64 ? 1e-12 : 1e-5; }

// 3-D inputs of shape [3, 4, 5] in several layouts.
std::vector<std::pair<std::string, Tensor>> layouts3(const Gen& g) {
  return {{"contiguous", g({3, 4, 5})},
          {"permuted", g({5, 3, 4}).permute({1, 2, 0})},
          {"step slice", g({3, 8, 5}).slice(1, 1, 8, 2)},
          {"expanded", g({3, 1, 5}).expand({3, 4, 5})}};
}
const std::vector<std::vector<int64_t>> kDims = {{}, {0}, {1}, {2}, {-1}, {-3}, {0, 2}, {-1, 0}, {1, 2}, {0, 1, 2}};

struct RedCase {
  const char* name;
  std::function<Tensor(const Tensor&, const std::vector<int64_t>&, bool)> op;
  Fold f;
};
std::vector<RedCase> reductions() {
  using V = const std::vector<int64_t>&;
  return {{"sum", [](const Tensor& x, V d, bool k) { return sum(x, d, k); }, f_sum},
          {"mean", [](const Tensor& x, V d, bool k) { return mean(x, d, k); }, f_mean},
          {"max", [](const Tensor& x, V d, bool k) { return max(x, d, k); }, f_max},
          {"min", [](const Tensor& x, V d, bool k) { return min(x, d, k); }, f_min},
          {"var", [](const Tensor& x, V d, bool k) { return var(x, d, k); }, f_var(1)},
          {"var c=0", [](const Tensor& x, V d, bool k) { return var(x, d, k, 0); }, f_var(0)},
          {"var c=2", [](const Tensor& x, V d, bool k) { return var(x, d, k, 2); }, f_var(2)}};
}

// softmax (log: log_softmax) of x along dim, in float64, in x's row-major order.
std::vector<double> ref_softmax(const Tensor& x, int64_t dim, bool log) {
  Groups G = group(x, {dim});
  std::vector<double> m(G.g.size()), s(G.g.size(), 0.0);
  for (size_t k = 0; k < G.g.size(); ++k) {
    m[k] = f_max(G.g[k]);
    for (double v : G.g[k]) s[k] += std::exp(v - m[k]);
  }
  const std::vector<double> v = values(x);
  std::vector<double> r;
  size_t n = 0;
  test::for_each_index(x.shape(), [&](const std::vector<int64_t>& i) {
    const size_t k = static_cast<size_t>(test::bcast_offset(i, G.kept));
    const double z = v[n++] - m[k];
    r.push_back(log ? z - std::log(s[k]) : std::exp(z) / s[k]);
  });
  return r;
}

}  // namespace

TEST(Reduce, EveryDimsKeepdimAndLayout) {
  manual_seed(11);
  for (DType dt : {kFloat64, kFloat32})
    for (const auto& [what, x] : layouts3([dt](const Shape& s) { return randn(s, {.dtype = dt}); }))
      for (const RedCase& c : reductions())
        for (const auto& dims : kDims)
          for (bool keep : {false, true}) {
            SCOPED_TRACE(std::string(c.name) + " " + what + " " + name(dt) + " dims " + ::testing::PrintToString(dims) +
                         (keep ? " keepdim" : ""));
            Tensor out = c.op(x, dims, keep);
            EXPECT_EQ(out.dtype(), dt);
            EXPECT_TRUE(reduced_near(out, x, dims, keep, c.f, tol(dt)));
          }
}

TEST(Reduce, NoDimsGivesAZeroDimTensor) {
  manual_seed(12);
  Tensor x = randn({4, 6}, {.dtype = kFloat64}).t();
  EXPECT_TRUE(reduced_near(sum(x), x, {}, false, f_sum, 1e-12));
  EXPECT_TRUE(reduced_near(mean(x), x, {}, false, f_mean, 1e-12));
  EXPECT_TRUE(reduced_near(max(x), x, {}, false, f_max, 0));
  EXPECT_TRUE(reduced_near(min(x), x, {}, false, f_min, 0));
  EXPECT_TRUE(reduced_near(var(x), x, {}, false, f_var(1), 1e-12));
  EXPECT_EQ(sum(x).dim(), 0);
  EXPECT_EQ(sum(x, {}, true).shape(), Shape({1, 1}));
}

TEST(Reduce, LargeInputsSplitAcrossThreads) {
  manual_seed(13);
  for (DType dt : {kFloat64, kFloat32}) {
    const double t = dt == kFloat64 ? 1e-10 : 1e-5;
    const std::vector<std::pair<std::string, Tensor>> xs = {
        {"[400,250]", randn({400, 250}, {.dtype = dt})},
        {"[250,400]^T", randn({250, 400}, {.dtype = dt}).t()},
        {"[50,3000]", randn({50, 3000}, {.dtype = dt})},
        {"[2000,50]", randn({2000, 50}, {.dtype = dt})},
        {"[40,30,90] step", randn({40, 60, 90}, {.dtype = dt}).slice(1, 0, 60, 2)}};
    for (const auto& [what, x] : xs)
      for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{}, {0}, {1}, {-1, 0}}) {
        const Groups G = group(x, dims);
        for (const RedCase& c : reductions()) {
          SCOPED_TRACE(std::string(c.name) + " " + what + " " + name(dt) + " dims " + ::testing::PrintToString(dims));
          EXPECT_TRUE(reduced_near(c.op(x, dims, false), G, false, c.f, t));
        }
      }
  }
}

TEST(Reduce, HighRankAndSizeOneDims) {
  manual_seed(20);
  // 7 dims: more than Shape keeps inline; size-1 dims reduced and kept
  Tensor x = randn({2, 1, 3, 2, 1, 4, 2}, {.dtype = kFloat64}).transpose(0, 6);
  for (const auto& dims : std::vector<std::vector<int64_t>>{{}, {1}, {1, 3, 5}, {0, -1}, {2, 4, 6}, {6, 5, 4, 3}})
    for (const RedCase& c : reductions()) {
      SCOPED_TRACE(std::string(c.name) + " " + ::testing::PrintToString(dims));
      EXPECT_TRUE(reduced_near(c.op(x, dims, true), x, dims, true, c.f, 1e-12));
      EXPECT_TRUE(reduced_near(c.op(x, dims, false), x, dims, false, c.f, 1e-12));
    }
}

TEST(Reduce, ResultDoesNotDependOnThreadCount) {
  manual_seed(21);
  Tensor x = randn({700, 300}), xt = x.t();
  // column sums of float64 split across threads (3001 columns, a grain of 1024: pieces of columns that do not
  // start on a multiple of the 32 summed in registers)
  Tensor wide = randn({100, 3001}, {.dtype = kFloat64});
  const int saved = get_num_threads();
  auto run = [&] {
    return std::vector<std::vector<float>>{sum(x).to_vector<float>(), sum(xt).to_vector<float>(),
                                           sum(x, {0}).to_vector<float>(), mean(xt, {1}).to_vector<float>()};
  };
  set_num_threads(1);
  const auto one = run();
  const auto wide_one = sum(wide, {0}).to_vector<double>();
  set_num_threads(4);
  const auto four = run();
  const auto wide_four = sum(wide, {0}).to_vector<double>();
  set_num_threads(saved);
  EXPECT_EQ(one, four);  // bitwise: fixed blocks, combined in order
  EXPECT_EQ(wide_one, wide_four);
}

TEST(Reduce, ColumnSumsSplitAcrossThreadsByWork) {
  // a bias gradient's shape: 1024 columns of 256 rows go to several threads (ranges sized by the elements read), and
  // 40 columns of 3000 rows in two ranges; every column is still its rows added in order
  manual_seed(22);
  const int saved = get_num_threads();
  for (const Shape& shape : {Shape({256, 1024}), Shape({3000, 40})}) {
    Tensor x = randn(shape);
    set_num_threads(1);
    const auto one = sum(x, {0}).to_vector<float>();
    set_num_threads(3);
    Tensor three = sum(x, {0});
    set_num_threads(saved);
    EXPECT_EQ(one, three.to_vector<float>());
    EXPECT_TRUE(reduced_near(three, x, {0}, false, f_sum, 1e-5));
  }
}

TEST(Reduce, InfinitiesAndNaN) {
  // an all -inf max (all +inf min) is -inf (+inf), not the largest finite number
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    SCOPED_TRACE(name(dt));
    Tensor ninf = full({2, 3}, -kInf, {.dtype = dt}), pinf = full({2, 3}, kInf, {.dtype = dt});
    EXPECT_EQ(max(ninf).item<double>(), -kInf);
    EXPECT_EQ(min(pinf).item<double>(), kInf);
    EXPECT_TENSOR_NEAR(max(ninf, {1}), Shape({2}), std::vector<double>({-kInf, -kInf}), 0, 0);
    EXPECT_TENSOR_NEAR(min(pinf.t(), {0}), Shape({2}), std::vector<double>({kInf, kInf}), 0, 0);
    EXPECT_TENSOR_NEAR(max(pinf, {0}), Shape({3}), std::vector<double>({kInf, kInf, kInf}), 0, 0);
    // NaN propagates through max/min/sum and wins argmax/argmin
    Tensor x = tensor<double>({1, kNaN, 3, -kInf, 2, kNaN, 0, 5, 4}, {3, 3}).to(dt);
    for (const RedCase& c : reductions())
      for (const auto& dims : std::vector<std::vector<int64_t>>{{}, {0}, {1}}) {
        SCOPED_TRACE(std::string(c.name) + " " + ::testing::PrintToString(dims));
        EXPECT_TRUE(reduced_near(c.op(x, dims, false), x, dims, false, c.f, dt == kFloat64 ? 1e-12 : 1e-2));
      }
    EXPECT_TRUE(reduced_near(argmax(x, 1), x, {1}, false, f_arg(true), 0));
    EXPECT_TRUE(reduced_near(argmin(x, 0), x, {0}, false, f_arg(false), 0));
  }
}

TEST(Reduce, IntegerAndBoolInputs) {
  manual_seed(14);
  Tensor i32 = randint(-50, 50, {4, 5, 6}, {.dtype = kInt32}).permute({2, 0, 1});
  for (const auto& dims : kDims) {
    SCOPED_TRACE(::testing::PrintToString(dims));
    Tensor s = sum(i32, dims);
    EXPECT_EQ(s.dtype(), kInt64);  // integer sums widen to int64
    EXPECT_TRUE(reduced_near(s, i32, dims, false, f_sum, 0));
    EXPECT_EQ(max(i32, dims, true).dtype(), kInt32);
    EXPECT_TRUE(reduced_near(max(i32, dims, true), i32, dims, true, f_max, 0));
    EXPECT_TRUE(reduced_near(min(i32, dims), i32, dims, false, f_min, 0));
  }
  // int64 sums are exact beyond 2^53
  const int64_t big = int64_t{1} << 60;
  EXPECT_EQ(sum(tensor<int64_t>({big, 1, 3})).item<int64_t>(), big + 4);
  EXPECT_EQ(sum(tensor<int64_t>({big, 1, 3})).to_vector<int64_t>(), std::vector<int64_t>({big + 4}));
  Tensor u8 = tensor<uint8_t>({200, 200, 255, 1}, {2, 2});
  EXPECT_EQ(sum(u8).dtype(), kInt64);
  EXPECT_EQ(sum(u8).to_vector<int64_t>(), std::vector<int64_t>({656}));
  EXPECT_EQ(sum(u8, {0}).to_vector<int64_t>(), std::vector<int64_t>({455, 201}));
  EXPECT_EQ(max(u8, {1}).to_vector<int64_t>(), std::vector<int64_t>({200, 255}));
  Tensor b = tensor<bool>({true, false, true, true, false, true}, {2, 3});
  EXPECT_EQ(sum(b).dtype(), kInt64);
  EXPECT_EQ(sum(b).item<int64_t>(), 4);
  EXPECT_EQ(sum(b, {1}).to_vector<int64_t>(), std::vector<int64_t>({2, 2}));
  EXPECT_THROW_MSG(mean(i32), DTypeError, "mean", "int32");
  EXPECT_THROW_MSG(mean(tensor<int64_t>({1, 2}), {0}), DTypeError, "mean", "int64");
  EXPECT_THROW_MSG(var(i32, {0}), DTypeError, "var", "int32");
}

TEST(Reduce, ReducedFloatsAccumulateInFloat32) {
  for (DType dt : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(name(dt));
    // a float16 accumulator would stop at 2048 (2048 + 1 rounds back to 2048)
    Tensor ones4k = ones({4096}, {.dtype = dt});
    EXPECT_EQ(sum(ones4k).dtype(), dt);
    EXPECT_EQ(sum(ones4k).item<double>(), 4096);
    EXPECT_EQ(mean(ones({64, 4096}, {.dtype = dt}), {1}).to_vector<double>(), std::vector<double>(64, 1.0));
    manual_seed(15);
    Tensor x = randn({6, 7}).to(dt).t();
    const double rt = dt == kFloat16 ? 0x1p-10 : 0x1p-7;  // one rounding, plus float32 error, near the result
    for (const RedCase& c : reductions())
      for (const auto& dims : std::vector<std::vector<int64_t>>{{}, {0}, {-1}}) {
        SCOPED_TRACE(std::string(c.name) + " " + ::testing::PrintToString(dims));
        Tensor out = c.op(x, dims, false);
        EXPECT_EQ(out.dtype(), dt);
        EXPECT_TRUE(reduced_near(out, x, dims, false, c.f, 4 * rt));
      }
    EXPECT_TRUE(reduced_near(argmax(x, 0), x, {0}, false, f_arg(true), 0));
  }
}

TEST(Reduce, EmptyAndZeroDim) {
  Tensor e = zeros({0, 3}, {.dtype = kFloat64});
  EXPECT_TENSOR_NEAR(sum(e), Shape{}, std::vector<double>({0}), 0, 0);
  EXPECT_TENSOR_NEAR(sum(e, {0}), Shape({3}), std::vector<double>({0, 0, 0}), 0, 0);
  EXPECT_TENSOR_NEAR(sum(e, {1}, true), Shape({0, 1}), std::vector<double>{}, 0, 0);
  EXPECT_TENSOR_NEAR(sum(zeros({2, 0}, {.dtype = kInt64}), {1}), Shape({2}), std::vector<double>({0, 0}), 0, 0);
  EXPECT_TENSOR_NEAR(mean(e, {0}), Shape({3}), std::vector<double>({kNaN, kNaN, kNaN}), 0, 0);  // 0 / 0
  EXPECT_TENSOR_NEAR(max(e, {1}), Shape({0}), std::vector<double>{}, 0, 0);  // nothing to reduce per row
  EXPECT_TENSOR_NEAR(argmin(e, 1, true), Shape({0, 1}), std::vector<double>{}, 0, 0);
  EXPECT_THROW_MSG(max(e, {0}), IndexError, "max", "size 0", "[0, 3]");
  EXPECT_THROW_MSG(min(e, {-2}, true), IndexError, "min", "[0, 3]");
  EXPECT_THROW_MSG(max(e), IndexError, "max");
  EXPECT_THROW_MSG(argmax(e, 0), IndexError, "argmax", "[0, 3]");
  EXPECT_THROW_MSG(argmin(zeros({2, 0}), -1), IndexError, "argmin", "[2, 0]");

  Tensor s = full({}, 2.5, {.dtype = kFloat64});
  for (const RedCase& c : reductions())
    for (const auto& dims : std::vector<std::vector<int64_t>>{{}, {0}, {-1}})
      for (bool keep : {false, true}) {
        SCOPED_TRACE(std::string(c.name) + " " + ::testing::PrintToString(dims));
        EXPECT_TRUE(reduced_near(c.op(s, dims, keep), s, dims, keep, c.f, 0));  // var: NaN or 0
      }
  EXPECT_EQ(argmax(s, 0).item<int64_t>(), 0);
  EXPECT_EQ(argmin(s, -1, true).dim(), 0);
  EXPECT_THROW_MSG(sum(s, {1}), IndexError, "sum", "1");
}

TEST(Reduce, ArgMaxArgMinEveryDim) {
  manual_seed(16);
  // small integers: many ties, which must resolve to the first index
  for (DType dt : {kFloat64, kFloat32, kInt64, kFloat16}) {
    Gen g = [dt](const Shape& s) { return randint(0, 4, s, {.dtype = dt}); };
    for (const auto& [what, x] : layouts3(g))
      for (int64_t d : {0, 1, 2, -1, -2, -3})
        for (bool keep : {false, true}) {
          SCOPED_TRACE(what + " " + name(dt) + " dim " + std::to_string(d) + (keep ? " keepdim" : ""));
          Tensor amax = argmax(x, d, keep), amin = argmin(x, d, keep);
          EXPECT_EQ(amax.dtype(), kInt64);
          EXPECT_TRUE(reduced_near(amax, x, {d}, keep, f_arg(true), 0));
          EXPECT_TRUE(reduced_near(amin, x, {d}, keep, f_arg(false), 0));
        }
  }
  Tensor big = randn({300, 200}, {.dtype = kFloat64});
  EXPECT_TRUE(reduced_near(argmax(big, 0), big, {0}, false, f_arg(true), 0));
  EXPECT_TRUE(reduced_near(argmin(big.t(), 1), big.t(), {1}, false, f_arg(false), 0));
}

TEST(Reduce, Errors) {
  Tensor x = randn({2, 3, 4});
  EXPECT_THROW_MSG(sum(x, {3}), IndexError, "sum", "dim 3", "rank 3");
  EXPECT_THROW_MSG(mean(x, {-4}), IndexError, "mean", "-4");
  EXPECT_THROW_MSG(max(x, {0, -3}), IndexError, "max", "more than once");
  EXPECT_THROW_MSG(var(x, {1, 7}), IndexError, "var", "7");
  EXPECT_THROW_MSG(argmax(x, 3), IndexError, "argmax", "3");
  EXPECT_THROW_MSG(argmin(x, -4), IndexError, "argmin", "-4");
  EXPECT_THROW_MSG(var(x, {0}, false, -1), ValueError, "var", "correction");
  EXPECT_THROW_MSG(sum(Tensor()), Error, "sum", "undefined");
  EXPECT_THROW_MSG(softmax(tensor<int64_t>({1, 2}), 0), DTypeError, "softmax", "int64");
  EXPECT_THROW_MSG(log_softmax(x, 3), IndexError, "log_softmax", "3");
  EXPECT_THROW_MSG(softmax(x, -4), IndexError, "softmax", "-4");
  float buf[6] = {};
  Tensor g = test::host_memory_claiming_cuda(buf, {2, 3});
  if (!g.defined()) return;
  EXPECT_THROW_MSG(sum(g, {0}), DeviceError, "cuda:0");
  EXPECT_THROW_MSG(softmax(g, 1), DeviceError, "cuda:0");
}

// The running sum of x along dim (reverse: from the end), in float64, row-major.
std::vector<double> ref_cumsum(const Tensor& x, int64_t dim, bool reverse) {
  const std::vector<double> v = values(x);
  if (x.dim() == 0) return v;
  std::vector<double> r(v.size());
  const int64_t n = x.size(dim);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < inner; ++c) {
      double acc = 0;
      for (int64_t s = 0; s < n; ++s) {
        const size_t i = static_cast<size_t>((o * n + (reverse ? n - 1 - s : s)) * inner + c);
        acc += v[i];
        r[i] = acc;
      }
    }
  return r;
}

TEST(Cumsum, EveryDimDirectionAndLayout) {
  manual_seed(18);
  for (DType dt : {kFloat64, kFloat32})
    for (const auto& [what, x] : layouts3([dt](const Shape& s) { return randn(s, {.dtype = dt}); }))
      for (int64_t d : {0, 1, 2, -1, -3})
        for (bool reverse : {false, true}) {
          SCOPED_TRACE(what + " " + name(dt) + " dim " + std::to_string(d) + (reverse ? " reverse" : ""));
          Tensor y = raw::cumsum(x, d, reverse);
          EXPECT_EQ(y.dtype(), dt);
          EXPECT_TENSOR_NEAR(y, x.shape(), ref_cumsum(x, d < 0 ? d + 3 : d, reverse), 1e-5, 1e-5);
        }
  // long rows and columns (split across threads), and 200 neighbouring rows (column blocks of 64 and a tail)
  Tensor big = randn({3, 20000}, {.dtype = kFloat64});
  EXPECT_TENSOR_NEAR(raw::cumsum(big, 1), big.shape(), ref_cumsum(big, 1, false), 1e-9, 1e-9);
  EXPECT_TENSOR_NEAR(raw::cumsum(big.t(), 0, true), Shape({20000, 3}), ref_cumsum(big.t(), 0, true), 1e-9, 1e-9);
  Tensor wide = randn({50, 200});
  EXPECT_TENSOR_NEAR(raw::cumsum(wide, 0), wide.shape(), ref_cumsum(wide, 0, false), 1e-5, 1e-5);
  // float32 sums accumulate in double: 2^24 + 1 + 1 is not lost to rounding at every step
  EXPECT_EQ(values(raw::cumsum(tensor<float>({16777216.f, 1.f, 1.f}), 0)),
            (std::vector<double>{16777216.0, 16777216.0, 16777218.0}));
}

TEST(Cumsum, IntegerBoolReducedFloatsEmptyAndZeroDim) {
  Tensor i = tensor<int32_t>({3, -1, 4, 1, -5, 9}, {2, 3});
  EXPECT_EQ(raw::cumsum(i, 1).dtype(), kInt64);  // as PyTorch's
  EXPECT_EQ(values(raw::cumsum(i, 1)), (std::vector<double>{3, 2, 6, 1, -4, 5}));
  EXPECT_EQ(values(raw::cumsum(i, 0, true)), (std::vector<double>{4, -6, 13, 1, -5, 9}));
  Tensor b = tensor<bool>({true, false, true, true});
  EXPECT_EQ(raw::cumsum(b, 0).dtype(), kInt64);
  EXPECT_EQ(values(raw::cumsum(b, 0)), (std::vector<double>{1, 1, 2, 3}));
  EXPECT_EQ(raw::cumsum(tensor<uint8_t>({200, 100}), 0).to_vector<int64_t>(), (std::vector<int64_t>{200, 300}));
  // int64 wraps, as sum does
  EXPECT_EQ(raw::cumsum(tensor<int64_t>({INT64_MAX, 1}), 0).to_vector<int64_t>(),
            (std::vector<int64_t>{INT64_MAX, INT64_MIN}));
  Tensor h = tensor<double>({0.1, 0.2, 0.3, 0.4}).to(kFloat16);
  EXPECT_EQ(raw::cumsum(h, 0).dtype(), kFloat16);
  EXPECT_TENSOR_NEAR(raw::cumsum(h, 0), Shape({4}), ref_cumsum(h, 0, false), 1e-3, 1e-3);
  EXPECT_EQ(raw::cumsum(h.to(kBFloat16), -1, true).dtype(), kBFloat16);
  EXPECT_EQ(raw::cumsum(zeros({0, 3}), 0).shape(), Shape({0, 3}));
  EXPECT_EQ(raw::cumsum(zeros({2, 0}), 1).shape(), Shape({2, 0}));
  Tensor s = full({}, 2.5, {.dtype = kFloat64});
  EXPECT_EQ(raw::cumsum(s, 0).item<double>(), 2.5);
  EXPECT_EQ(raw::cumsum(s, -1, true).dim(), 0);
}

TEST(Cumsum, Errors) {
  Tensor x = randn({2, 3, 4});
  EXPECT_THROW_MSG(raw::cumsum(x, 3), IndexError, "cumsum", "dim 3", "rank 3");
  EXPECT_THROW_MSG(raw::cumsum(x, -4), IndexError, "cumsum", "-4");
  EXPECT_THROW_MSG(raw::cumsum(full({}, 1.0), 1), IndexError, "cumsum", "rank 0");
  EXPECT_THROW_MSG(raw::cumsum(Tensor(), 0), Error, "cumsum", "undefined");
  float buf[6] = {};
  Tensor g = test::host_memory_claiming_cuda(buf, {2, 3});
  if (!g.defined()) return;
  EXPECT_THROW_MSG(raw::cumsum(g, 0), DeviceError, "cuda:0");
}

TEST(Softmax, EveryDimOfA3DTensor) {
  manual_seed(17);
  for (DType dt : {kFloat64, kFloat32})
    for (double scale : {1.0, 1000.0}) {  // 1000: exp would overflow without the max shift
      Gen g = [dt, scale](const Shape& s) { return randn(s, {.dtype = kFloat64}).mul_(scale).to(dt); };
      for (const auto& [what, x] : layouts3(g))
        for (int64_t d : {0, 1, 2, -1, -2, -3})
          for (bool log : {false, true}) {
            SCOPED_TRACE(what + " " + name(dt) + " scale " + std::to_string(scale) + " dim " + std::to_string(d) +
                         (log ? " log_softmax" : " softmax"));
            Tensor out = log ? log_softmax(x, d) : softmax(x, d);
            EXPECT_EQ(out.dtype(), dt);
            for (double v : values(out)) ASSERT_TRUE(std::isfinite(v));
            EXPECT_TENSOR_NEAR(out, x.shape(), ref_softmax(x, d, log), dt == kFloat64 ? 1e-12 : 1e-6, tol(dt));
            if (!log) {  // rows sum to one
              Tensor rows = sum(out, {d});
              for (double v : values(rows)) EXPECT_NEAR(v, 1.0, dt == kFloat64 ? 1e-12 : 1e-5);
            }
          }
    }
}

TEST(Softmax, LargeInfEmptyZeroDimAndReduced) {
  manual_seed(18);
  Tensor big = randn({300, 200});
  for (int64_t d : {0, 1}) {
    SCOPED_TRACE(d);
    EXPECT_TENSOR_NEAR(softmax(big, d), big.shape(), ref_softmax(big, d, false), 1e-6, 1e-5);
    EXPECT_TENSOR_NEAR(log_softmax(big.t(), d), Shape({200, 300}), ref_softmax(big.t(), d, true), 1e-6, 1e-5);
  }
  // -inf entries get probability 0 (log: -inf); the others share the mass
  Tensor x = tensor<double>({-kInf, 0, 1, -kInf, 2, -kInf}, {2, 3});
  EXPECT_TENSOR_NEAR(softmax(x, 1), x.shape(), ref_softmax(x, 1, false), 1e-12, 1e-12);
  EXPECT_TENSOR_NEAR(log_softmax(x, 1), x.shape(), ref_softmax(x, 1, true), 1e-12, 1e-12);
  for (int64_t d : {0, 1}) {
    EXPECT_EQ(softmax(zeros({0, 3}), d).shape(), Shape({0, 3}));
    EXPECT_EQ(log_softmax(zeros({3, 0}), d).shape(), Shape({3, 0}));
  }
  Tensor s = full({}, 123.0);
  EXPECT_TENSOR_NEAR(softmax(s, 0), Shape{}, std::vector<double>({1}), 0, 0);
  EXPECT_TENSOR_NEAR(log_softmax(s, -1), Shape{}, std::vector<double>({0}), 0, 0);
  for (DType dt : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(name(dt));
    Tensor h = randn({4, 7}).mul_(3).to(dt).t();
    const double rt = (dt == kFloat16 ? 0x1p-11 : 0x1p-8) * 1.05;
    EXPECT_EQ(softmax(h, 1).dtype(), dt);
    EXPECT_TENSOR_NEAR(softmax(h, 1), h.shape(), ref_softmax(h, 1, false), 1e-7, rt);
    EXPECT_TENSOR_NEAR(log_softmax(h, 0), h.shape(), ref_softmax(h, 0, true), 1e-7, rt);
  }
}

TEST(SumTo, ReversesBroadcasting) {
  manual_seed(19);
  // the reference adds each element of x into the target element it was broadcast from
  auto ref = [](const Tensor& x, const Shape& s) {
    std::vector<double> r(static_cast<size_t>(s.numel()), 0.0);
    const std::vector<double> v = values(x);
    size_t k = 0;
    test::for_each_index(
        x.shape(), [&](const std::vector<int64_t>& i) { r[static_cast<size_t>(test::bcast_offset(i, s))] += v[k++]; });
    return r;
  };
  const std::vector<std::pair<Tensor, Shape>> cases = {
      {randn({2, 3, 4}, {.dtype = kFloat64}), {3, 1}},
      {randn({2, 3, 4}, {.dtype = kFloat64}), {4}},
      {randn({2, 3, 4}, {.dtype = kFloat64}), {2, 1, 4}},
      {randn({2, 3, 4}, {.dtype = kFloat64}), {1, 1, 1}},
      {randn({2, 3, 4}, {.dtype = kFloat64}), {}},
      {randn({2, 3, 4}, {.dtype = kFloat64}), {2, 3, 4}},
      {randn({4, 2, 3}, {.dtype = kFloat64}).permute({1, 2, 0}), {3, 1}},
      {randn({3, 1}, {.dtype = kFloat64}).expand({2, 3, 4}), {3, 1}},
      {randn({2, 6, 4}, {.dtype = kFloat64}).slice(1, 0, 6, 2), {1, 4}},
      {randn({300, 200}, {.dtype = kFloat64}), {200}},
      {zeros({0, 3}, {.dtype = kFloat64}), {3}},
      {zeros({2, 0}, {.dtype = kFloat64}), {1, 0}},
      {randint(-9, 9, {5, 3}), {1, 3}}};
  for (const auto& [x, s] : cases) {
    SCOPED_TRACE(::testing::PrintToString(x.shape().vec()) + " -> " + ::testing::PrintToString(s.vec()));
    Tensor out = raw::sum_to(x, s);
    EXPECT_EQ(out.dtype(), x.dtype());
    EXPECT_TENSOR_NEAR(out, s, ref(x, s), 1e-12, 1e-12);
  }
  EXPECT_THROW_MSG(raw::sum_to(randn({2, 3}), {4}), ShapeError, "sum_to", "[2, 3]", "[4]");
  EXPECT_THROW_MSG(raw::sum_to(randn({2, 3}), {2, 2}), ShapeError, "sum_to", "[2, 3]", "[2, 2]");
  EXPECT_THROW_MSG(raw::sum_to(randn({3}), {2, 3}), ShapeError, "sum_to", "[3]", "[2, 3]");
}
