// Tests the ops of issue 17 beyond their gradcheck rows (tests/support/op_cases.h): log1p, sin, cos, silu,
// leaky_relu, elu, logsumexp, norm and cumsum — values against float64 references written here, special values
// (infinities, NaN, zeros, empty slices), their gradients where PyTorch defines a convention (the 2-norm at 0,
// the kinks of leaky_relu and elu), and every bad input, each an ember::Error naming the op. Then the Tensor
// math members, which must be the free functions.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

using namespace ember;
using test::values;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const TensorOptions f64{.dtype = kFloat64};
// A reference list inside EXPECT_TENSOR_NEAR (whose arguments a bare {a, b} would split).
std::vector<double> V(std::initializer_list<double> v) { return v; }

Tensor grad_of(const Tensor& x, const std::function<Tensor(const Tensor&)>& f) {
  Tensor leaf = x.detach().requires_grad_(true);
  sum(f(leaf)).backward();
  return leaf.grad();
}

// --- elementwise

TEST(MathOps, Log1pAndEluAreExactNearZero) {
  // log(1 + x) and exp(x) - 1 lose every digit of x below float32's epsilon; these do not
  Tensor tiny = tensor<float>({1e-10f, -3e-9f, 2e-7f});
  EXPECT_TENSOR_NEAR(log1p(tiny), tiny.shape(), V({1e-10, -3e-9, 2e-7}), 0, 1e-6);
  Tensor neg_tiny = tensor<float>({-1e-10f, -3e-9f, -2e-7f});
  EXPECT_TENSOR_NEAR(elu(neg_tiny), neg_tiny.shape(), V({-1e-10, -3e-9, -2e-7}), 0, 1e-6);
  EXPECT_TENSOR_NEAR(elu(neg_tiny, 2.0), neg_tiny.shape(), V({-2e-10, -6e-9, -4e-7}), 0, 1e-6);
}

TEST(MathOps, ActivationsAtSpecialValues) {
  Tensor x = tensor<double>({-kInf, -50, -1, -0.0, 0, 1, 50, kInf, kNaN});
  auto ref = [&](double (*f)(double)) {
    std::vector<double> r;
    for (double v : values(x)) r.push_back(f(v));
    return r;
  };
  EXPECT_TENSOR_NEAR(elu(x), x.shape(), ref([](double v) { return v > 0 ? v : std::expm1(v); }), 1e-15, 1e-15);
  EXPECT_TENSOR_NEAR(leaky_relu(x), x.shape(), ref([](double v) { return v > 0 ? v : 0.01 * v; }), 0, 0);
  // silu(-inf) is -inf * 0 = NaN, as PyTorch's x / (1 + exp(-x))
  EXPECT_TENSOR_NEAR(silu(x), x.shape(), ref([](double v) { return v / (1 + std::exp(-v)); }), 1e-15, 1e-15);
  EXPECT_TENSOR_NEAR(sin(x), x.shape(), ref([](double v) { return std::sin(v); }), 0, 0);
  EXPECT_TENSOR_NEAR(cos(x), x.shape(), ref([](double v) { return std::cos(v); }), 0, 0);
  Tensor l = tensor<double>({-kInf, -2, -1, -0.5, 0, 1e-300, kInf, kNaN});
  EXPECT_TENSOR_NEAR(log1p(l), l.shape(), V({kNaN, kNaN, -kInf, std::log1p(-0.5), 0, 1e-300, kInf, kNaN}), 0, 0);
  // float16 / bfloat16 keep their dtype (computed in float32)
  EXPECT_EQ(sin(x.to(kFloat16)).dtype(), kFloat16);
  EXPECT_EQ(elu(x.to(kBFloat16)).dtype(), kBFloat16);
}

TEST(MathOps, ActivationGradientsAtTheKinksFollowPyTorch) {
  Tensor x = tensor<double>({-2, 0, 3});
  // leaky_relu'(0) = slope (PyTorch: x > 0 ? 1 : slope); elu'(0) = alpha (PyTorch: x > 0 ? 1 : alpha * exp(x))
  EXPECT_EQ(values(grad_of(x, [](const Tensor& t) { return leaky_relu(t, 0.2); })), (std::vector<double>{0.2, 0.2, 1}));
  EXPECT_TENSOR_NEAR(grad_of(x, [](const Tensor& t) { return elu(t, 1.5); }), x.shape(),
                     V({1.5 * std::exp(-2), 1.5, 1}), 1e-15, 1e-15);
  // no NaN from the branch not taken: elu of a large x, silu of a very negative one
  Tensor big = tensor<float>({100.f, 1e30f, -100.f, -1e30f});
  for (const Tensor& g : {grad_of(big, [](const Tensor& t) { return elu(t); }),
                          grad_of(big, [](const Tensor& t) { return leaky_relu(t); })})
    for (double v : values(g)) EXPECT_FALSE(std::isnan(v)) << g;
  EXPECT_TENSOR_NEAR(grad_of(tensor<double>({0.5, -0.25}), [](const Tensor& t) { return log1p(t); }), Shape({2}),
                     V({1 / 1.5, 1 / 0.75}), 1e-15, 1e-15);
}

TEST(MathOps, ActivationErrorsNameTheOp) {
  EXPECT_THROW_MSG(log1p(Tensor()), Error, "log1p", "undefined");
  EXPECT_THROW_MSG(sin(Tensor()), Error, "sin", "undefined");
  EXPECT_THROW_MSG(cos(Tensor()), Error, "cos", "undefined");
  EXPECT_THROW_MSG(silu(Tensor()), Error, "silu", "undefined");
  EXPECT_THROW_MSG(leaky_relu(Tensor(), 0.1), Error, "leaky_relu", "undefined");
  EXPECT_THROW_MSG(elu(Tensor()), Error, "elu", "undefined");
}

// clamp_min / clamp_max: PyTorch's values (NaN passes, infinite bounds, integer tensors saturate the bound), the
// gradient 1 where x is inside the bound (at the bound too, as clamp), and errors that name the one-sided op.
TEST(MathOps, OneSidedClamps) {
  Tensor x = tensor<double>({-kInf, -2, -0.5, 0.25, 3, kInf, kNaN});
  EXPECT_TENSOR_NEAR(clamp_min(x, -0.5), x.shape(), V({-0.5, -0.5, -0.5, 0.25, 3, kInf, kNaN}), 0, 0);
  EXPECT_TENSOR_NEAR(clamp_max(x, 0.25), x.shape(), V({-kInf, -2, -0.5, 0.25, 0.25, 0.25, kNaN}), 0, 0);
  EXPECT_TENSOR_NEAR(clamp_min(x, -kInf), x.shape(), values(x), 0, 0);
  Tensor i = tensor<int64_t>({-7, 0, 9});
  EXPECT_EQ(clamp_min(i, 1e300).dtype(), kInt64);
  EXPECT_EQ(values(clamp_max(i, 2.0)), (std::vector<double>{-7, 0, 2}));
  EXPECT_EQ(clamp_min(x.to(kBFloat16), 0.0).dtype(), kBFloat16);
  Tensor g = tensor<double>({-1, 0.5, 2});
  EXPECT_EQ(values(grad_of(g, [](const Tensor& t) { return clamp_min(t, 0.5); })), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(values(grad_of(g, [](const Tensor& t) { return clamp_max(t, 0.5); })), (std::vector<double>{1, 1, 0}));
  Tensor leaf = g.detach().requires_grad_(true);
  EXPECT_EQ(clamp_max(leaf, 1.0).grad_fn_name(), std::string("clamp_max"));
  EXPECT_THROW_MSG(clamp_min(Tensor(), 0), Error, "clamp_min", "undefined");
  EXPECT_THROW_MSG(clamp_max(tensor<bool>({true}), 0), DTypeError, "clamp_max", "bool");
}

// --- logsumexp

// log(sum(exp(x))) over the last dim of a [rows, n] tensor, in long double with the max shifted out.
std::vector<double> ref_logsumexp_rows(const std::vector<double>& v, int64_t n) {
  std::vector<double> r;
  for (size_t row = 0; row < v.size() / static_cast<size_t>(n); ++row) {
    long double m = -INFINITY, s = 0;
    for (int64_t k = 0; k < n; ++k) m = std::max<long double>(m, v[row * n + k]);
    for (int64_t k = 0; k < n; ++k) s += std::exp(static_cast<long double>(v[row * n + k]) - m);
    r.push_back(static_cast<double>(m + std::log(s)));
  }
  return r;
}

TEST(Logsumexp, ValuesDimsAndKeepdim) {
  manual_seed(3);
  Tensor x = randn({3, 4, 5}, f64) * 3.0;
  EXPECT_TENSOR_NEAR(logsumexp(x, {2}), Shape({3, 4}), ref_logsumexp_rows(values(x), 5), 1e-13, 1e-13);
  EXPECT_TENSOR_NEAR(logsumexp(x, {-1}, true), Shape({3, 4, 1}), ref_logsumexp_rows(values(x), 5), 1e-13, 1e-13);
  // over dims 0 and 2 = over the last dim of x permuted to [4, 3, 5] and flattened to [4, 15]
  EXPECT_TENSOR_NEAR(logsumexp(x, {0, 2}), Shape({4}),
                     ref_logsumexp_rows(values(x.permute({1, 0, 2}).contiguous()), 15), 1e-13, 1e-13);
  EXPECT_TENSOR_NEAR(logsumexp(x, {}), Shape({}), ref_logsumexp_rows(values(x), 60), 1e-13, 1e-13);
  EXPECT_EQ(logsumexp(x, {2, 0}, true).shape(), Shape({1, 4, 1}));
  // a non-contiguous input
  EXPECT_TENSOR_NEAR(logsumexp(x.transpose(1, 2), {2}), Shape({3, 5}),
                     ref_logsumexp_rows(values(x.permute({0, 2, 1}).contiguous()), 4), 1e-13, 1e-13);
}

TEST(Logsumexp, LargeInfiniteNaNEmptyIntegerAndZeroDim) {
  // exp(1000) overflows; the max shift keeps the result exact
  EXPECT_TENSOR_NEAR(logsumexp(tensor<float>({1000.f, 1000.f, -1000.f}), {0}), Shape({}), V({1000 + std::log(2.0)}), 0,
                     1e-6);
  EXPECT_TENSOR_NEAR(logsumexp(tensor<double>({-1000, -1000}), {0}), Shape({}), V({-1000 + std::log(2.0)}), 0, 1e-15);
  // rows: all -inf -> -inf; one +inf -> inf; -inf and +inf -> inf; a NaN -> NaN; -inf and a number -> the number
  Tensor r = tensor<double>({-kInf, -kInf, kInf, 1, -kInf, kInf, kNaN, 1, -kInf, 2}, {5, 2});
  EXPECT_TENSOR_NEAR(logsumexp(r, {1}), Shape({5}), V({-kInf, kInf, kInf, kNaN, 2}), 0, 1e-15);
  // an empty slice sums to 0: -inf, as PyTorch
  EXPECT_TENSOR_NEAR(logsumexp(zeros({2, 0}), {1}), Shape({2}), V({-kInf, -kInf}), 0, 0);
  EXPECT_EQ(logsumexp(zeros({0, 3}), {1}).shape(), Shape({0}));
  // integers compute in float32
  Tensor i = tensor<int64_t>({1, 2, 3});
  EXPECT_EQ(logsumexp(i, {0}).dtype(), kFloat32);
  EXPECT_TENSOR_NEAR(logsumexp(i, {0}), Shape({}), ref_logsumexp_rows({1, 2, 3}, 3), 0, 1e-6);
  EXPECT_EQ(logsumexp(tensor<bool>({true, false}), {0}).dtype(), kFloat32);
  // float16 computes in float32, rounded once: exact here where a float16 sum of exps would not be
  Tensor h = tensor<double>({10, 10, 10, 10}).to(kFloat16);
  EXPECT_EQ(logsumexp(h, {0}).dtype(), kFloat16);
  EXPECT_TENSOR_NEAR(logsumexp(h, {0}), Shape({}), V({10 + std::log(4.0)}), 0, 1e-3);
  Tensor s = full({}, 0.75, f64);
  EXPECT_EQ(logsumexp(s, {0}).item<double>(), 0.75);
  EXPECT_EQ(logsumexp(s, {-1}, true).dim(), 0);
}

TEST(Logsumexp, GradientIsTheSoftmax) {
  manual_seed(4);
  Tensor x = randn({3, 5}, f64) * 10.0;
  EXPECT_TENSOR_NEAR(grad_of(x, [](const Tensor& t) { return logsumexp(t, {1}); }), x.shape(), values(softmax(x, 1)),
                     1e-15, 1e-12);
  // a -inf element gets no gradient, and its neighbours no NaN
  Tensor y = tensor<double>({-kInf, 0.0, 1.0});
  EXPECT_TENSOR_NEAR(grad_of(y, [](const Tensor& t) { return logsumexp(t, {0}); }), y.shape(),
                     V({0, 1 / (1 + std::exp(1.0)), 1 / (1 + std::exp(-1.0))}), 1e-15, 1e-15);
}

TEST(Logsumexp, Errors) {
  Tensor x = randn({2, 3});
  EXPECT_THROW_MSG(logsumexp(x, {2}), IndexError, "logsumexp", "dim 2", "rank 2");
  EXPECT_THROW_MSG(logsumexp(x, {-3}), IndexError, "logsumexp", "-3");
  EXPECT_THROW_MSG(logsumexp(x, {1, -1}), IndexError, "logsumexp", "more than once");
  EXPECT_THROW_MSG(logsumexp(Tensor(), {0}), Error, "logsumexp", "undefined");
}

// --- norm

TEST(Norm, ValuesForEveryP) {
  Tensor x = tensor<double>({3, -4, 0, 1, -2, 2}, {2, 3});
  EXPECT_TENSOR_NEAR(norm(x), Shape({}), V({std::sqrt(34.0)}), 0, 1e-15);
  EXPECT_TENSOR_NEAR(norm(x, 2, {1}), Shape({2}), V({5, 3}), 0, 1e-15);
  EXPECT_TENSOR_NEAR(norm(x, 2, {0}, true), Shape({1, 3}), V({std::sqrt(10.0), std::sqrt(20.0), 2}), 0, 1e-15);
  EXPECT_TENSOR_NEAR(norm(x, 1, {1}), Shape({2}), V({7, 5}), 0, 0);
  EXPECT_TENSOR_NEAR(norm(x, kInf, {1}), Shape({2}), V({4, 2}), 0, 0);
  EXPECT_TENSOR_NEAR(norm(x, -kInf, {1}), Shape({2}), V({0, 1}), 0, 0);
  EXPECT_TENSOR_NEAR(norm(x, 3, {-1}), Shape({2}), V({std::cbrt(91.0), std::cbrt(17.0)}), 0, 1e-14);
  EXPECT_TENSOR_NEAR(norm(x, 1.5), Shape({}), V({std::pow(std::pow(3, 1.5) + 8 + 1 + 2 * std::pow(2, 1.5), 1 / 1.5)}),
                     0, 1e-14);
  EXPECT_TENSOR_NEAR(norm(x.t(), 2, {0}), Shape({2}), V({5, 3}), 0, 1e-15);  // non-contiguous
  EXPECT_EQ(norm(x.to(kFloat32)).dtype(), kFloat32);
  EXPECT_EQ(norm(x.to(kBFloat16), 2, {1}).dtype(), kBFloat16);
  EXPECT_TENSOR_NEAR(norm(x.to(kFloat16), 2, {1}), Shape({2}), V({5, 3}), 0, 0);
  EXPECT_EQ(norm(x.to(kFloat16), kInf).dtype(), kFloat16);
  // NaN and inf pass through; the 2-norm of an empty slice is 0
  EXPECT_TENSOR_NEAR(norm(tensor<double>({kNaN, 1, kInf, 1}, {2, 2}), 2, {1}), Shape({2}), V({kNaN, kInf}), 0, 0);
  EXPECT_TENSOR_NEAR(norm(zeros({2, 0}), 2, {1}), Shape({2}), V({0, 0}), 0, 0);
  EXPECT_EQ(norm(full({}, -2.5, f64)).item<double>(), 2.5);
}

TEST(Norm, GradientOfAZeroNormIsZeroNotNaN) {
  // PyTorch's convention: the subgradient 0 where the norm is 0, for every p
  Tensor x = tensor<double>({0, 0, 0, 3, 0, -4}, {2, 3});
  for (double p : {1.0, 1.5, 2.0, 3.0, kInf}) {
    SCOPED_TRACE(p);
    Tensor g = grad_of(x, [p](const Tensor& t) { return norm(t, p, {1}); });
    for (double v : values(g)) EXPECT_FALSE(std::isnan(v));
    EXPECT_EQ(values(g)[0], 0.0);
    EXPECT_EQ(values(g)[1], 0.0);
  }
  EXPECT_TENSOR_NEAR(grad_of(x, [](const Tensor& t) { return norm(t, 2, {1}); }), x.shape(), V({0, 0, 0, 0.6, 0, -0.8}),
                     0, 1e-15);
  EXPECT_EQ(values(grad_of(zeros({4}, f64), [](const Tensor& t) { return norm(t); })),
            (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(values(grad_of(zeros({3}), [](const Tensor& t) { return norm(t); })), (std::vector<double>{0, 0, 0}));
}

TEST(Norm, Errors) {
  Tensor x = randn({2, 3});
  EXPECT_THROW_MSG(norm(tensor<int64_t>({3, 4})), DTypeError, "norm", "int64");
  EXPECT_THROW_MSG(norm(tensor<bool>({true})), DTypeError, "norm", "bool");
  EXPECT_THROW_MSG(norm(x, 0.5), ValueError, "norm", "p must be", "0.5");
  EXPECT_THROW_MSG(norm(x, 0), ValueError, "norm", "p must be");
  EXPECT_THROW_MSG(norm(x, -2), ValueError, "norm", "-2");
  EXPECT_THROW_MSG(norm(x, kNaN), ValueError, "norm", "nan");
  EXPECT_THROW_MSG(norm(x, 2, {2}), IndexError, "norm", "dim 2");
  EXPECT_THROW_MSG(norm(x, 1, {0, 0}), IndexError, "norm", "more than once");
  EXPECT_THROW_MSG(norm(zeros({2, 0}), kInf, {1}), IndexError, "norm", "inf", "[2, 0]");
  EXPECT_THROW_MSG(norm(zeros({0}), -kInf), IndexError, "norm", "-inf");
  EXPECT_THROW_MSG(norm(Tensor()), Error, "norm", "undefined");
}

// --- cumsum (the kernels' values: tests/core/test_reduce.cpp)

TEST(Cumsum, ValuesAndGradient) {
  Tensor x = tensor<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(values(cumsum(x, 1)), (std::vector<double>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(values(cumsum(x, 0)), (std::vector<double>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(values(cumsum(x.t(), -1)), (std::vector<double>{1, 5, 2, 7, 3, 9}));
  EXPECT_EQ(cumsum(tensor<int32_t>({1, 2}), 0).dtype(), kInt64);
  // d/dx_i of sum_j w_j cumsum(x)_j = sum_{j >= i} w_j: the running sum of w from the end
  Tensor w = tensor<double>({1, 10, 100});
  EXPECT_EQ(values(grad_of(tensor<double>({0.5, -1, 2}), [&](const Tensor& t) { return cumsum(t, 0) * w; })),
            (std::vector<double>{111, 110, 100}));
  EXPECT_EQ(cumsum(x.detach().requires_grad_(true), 0).grad_fn_name(), "cumsum");
}

TEST(Cumsum, Errors) {
  EXPECT_THROW_MSG(cumsum(randn({2, 3}), 2), IndexError, "cumsum", "dim 2");
  EXPECT_THROW_MSG(cumsum(randn({2, 3}), -3), IndexError, "cumsum", "-3");
  EXPECT_THROW_MSG(cumsum(Tensor(), 0), Error, "cumsum", "undefined");
}

// --- Tensor members: the free functions, with the same graph

TEST(TensorMembers, AreTheFreeFunctions) {
  manual_seed(5);
  Tensor x = uniform({3, 4}, 0.5, 2.0, f64), w = randn({4, 2}, f64);
  auto same = [](const Tensor& a, const Tensor& b, const std::string& what) {
    EXPECT_EQ(a.shape(), b.shape()) << what;
    EXPECT_EQ(a.dtype(), b.dtype()) << what;
    EXPECT_EQ(values(a), values(b)) << what;
  };
  same(x.sum(), sum(x), "sum");
  same(x.sum({1}, true), sum(x, {1}, true), "sum dims");
  same(x.mean(), mean(x), "mean");
  same(x.mean({0}), mean(x, {0}), "mean dims");
  same(x.max(), max(x), "max");
  same(x.min(), min(x), "min");
  same(x.var(), var(x), "var");
  same(x.var({1}, true, 0), var(x, {1}, true, 0), "var dims");
  same(x.argmax(1), argmax(x, 1), "argmax");
  same(x.argmin(0, true), argmin(x, 0, true), "argmin");
  same(x.logsumexp({1}), logsumexp(x, {1}), "logsumexp");
  same(x.norm(), norm(x), "norm");
  same(x.norm(1, {0}, true), norm(x, 1, {0}, true), "norm p dims");
  same(x.cumsum(1), cumsum(x, 1), "cumsum");
  same(x.exp(), exp(x), "exp");
  same(x.log(), log(x), "log");
  same(x.log1p(), log1p(x), "log1p");
  same(x.sqrt(), sqrt(x), "sqrt");
  same(x.abs(), abs(x), "abs");
  same(x.neg(), neg(x), "neg");
  same(x.square(), square(x), "square");
  same(x.sin(), sin(x), "sin");
  same(x.cos(), cos(x), "cos");
  same(x.relu(), relu(x), "relu");
  same(x.sigmoid(), sigmoid(x), "sigmoid");
  same(x.tanh(), tanh(x), "tanh");
  same(x.softmax(1), softmax(x, 1), "softmax");
  same(x.log_softmax(0), log_softmax(x, 0), "log_softmax");
  same(x.matmul(w), matmul(x, w), "matmul");
  same(x.pow(w.t().slice(0, 0, 1)), pow(x, w.t().slice(0, 0, 1)), "pow tensor");
  same(x.pow(2), pow(x, 2), "pow scalar");
  same(x.clamp(0.7, 1.5), clamp(x, 0.7, 1.5), "clamp");
  // members record the same ops
  Tensor leaf = x.detach().requires_grad_(true);
  EXPECT_EQ(leaf.exp().grad_fn_name(), "exp");
  EXPECT_EQ(leaf.sum({0}).grad_fn_name(), "sum");
  EXPECT_EQ(leaf.matmul(w).grad_fn_name(), "matmul");
  // and fail as the free functions do, naming the op
  EXPECT_THROW_MSG(x.sum({2}), IndexError, "sum", "dim 2");
  EXPECT_THROW_MSG(x.matmul(randn({3, 2}, f64)), ShapeError, "matmul", "[3, 4]");
  EXPECT_THROW_MSG(x.argmax(5), IndexError, "argmax");
  EXPECT_THROW_MSG(Tensor().exp(), Error, "undefined");
}

}  // namespace
