// defines: the table of differentiable op cases (OpCase, all_cases()) shared by the float64 gradcheck
// (tests/autograd/test_gradcheck_ops.cpp) and the CUDA-vs-CPU comparison (tests/cuda/test_ops_vs_cpu.cpp).
// Each case has an input maker (CPU float64 tensors, seeded by the case itself) and a function of the
// inputs. Most ops get a plain case, a broadcast case (where the op broadcasts) and a non-contiguous-input
// case. Inputs stay away from kinks and ties (|x| bounded below, distinct values for max/min/pooling) so the
// cases are well posed. Constants made inside a case function are put on its inputs' device (on()).
#pragma once
#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <ember/ember.h>

namespace ember::test_ops {

using autograd::TensorFn;
using TV = std::vector<Tensor>;

struct OpCase {
  std::string name;
  std::function<TV()> inputs;
  TensorFn fn;
  double atol = 1e-5, rtol = 1e-3;
  double eps = 1e-6;  // finite-difference step
};

inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

inline const TensorOptions f64{.dtype = kFloat64};

// A constant made inside a case function, on the device of the case's tensors (the CUDA comparison runs
// the same functions on the GPU; on the CPU this is the tensor itself).
inline Tensor on(const Tensor& like, const Tensor& t) { return t.device() == like.device() ? t : t.to(like.device()); }

// --- input makers (each seeds the generator itself, so a case's inputs do not depend on case order)
inline Tensor rn(const Shape& s, uint64_t seed) {
  manual_seed(seed);
  return randn(s, f64);
}
// |x| >= 0.3: away from the kinks of abs/relu/sign and from the poles of 1/x.
inline Tensor away(const Shape& s, uint64_t seed) {
  Tensor x = rn(s, seed);
  return x + sign(x) * 0.3;
}
// in [0.5, 1.5): for sqrt, log, fractional powers.
inline Tensor pos(const Shape& s, uint64_t seed) {
  manual_seed(seed);
  return rand(s, f64) + 0.5;
}
// Distinct values 0.25 apart (a scaled random permutation, centred), so a max/min is never a tie.
inline Tensor distinct(const Shape& s, uint64_t seed) {
  manual_seed(seed);
  const int64_t n = s.numel();
  return randperm(n).to(kFloat64).reshape(s) * 0.25 - 0.125 * static_cast<double>(n) + 0.05;
}
// in [-0.7, 0.8): inside log1p's domain (x > -1), on both sides of 0.
inline Tensor above_m1(const Shape& s, uint64_t seed) { return pos(s, seed) * 1.5 - 1.45; }
// the same values laid out channels-last (NHWC in memory; memory_format.h)
inline Tensor cl(const Tensor& t) { return t.contiguous(MemoryFormat::ChannelsLast); }
inline Tensor idx(const std::vector<int64_t>& v) { return tensor<int64_t>(v, {static_cast<int64_t>(v.size())}); }
inline Tensor idx(const std::vector<int64_t>& v, const Shape& s) { return tensor<int64_t>(v, s); }

// A fixed checkerboard-ish boolean pattern.
inline Tensor pattern(const Shape& s) {
  std::vector<bool> v(static_cast<size_t>(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = (i * 7 + i / 3) % 3 != 0;
  return tensor<bool>(v, s);
}

// --- helpers to build table rows tersely
inline OpCase C(std::string name, std::function<TV()> in, TensorFn fn, double atol = 1e-5, double rtol = 1e-3,
                double eps = 1e-6) {
  return OpCase{std::move(name), std::move(in), std::move(fn), atol, rtol, eps};
}
// fn of one input
inline TensorFn F1(std::function<Tensor(const Tensor&)> f) {
  return [f](const TV& in) { return f(in[0]); };
}
inline TensorFn F2(std::function<Tensor(const Tensor&, const Tensor&)> f) {
  return [f](const TV& in) { return f(in[0], in[1]); };
}

// The tables below are laid out by hand, one case per line (clang-format would break every lambda apart).
// clang-format off
inline void add_arithmetic(std::vector<OpCase>& cs) {
  using BinFn = std::function<Tensor(const Tensor&, const Tensor&)>;
  struct Bin {
    const char* name;
    BinFn f;
    bool b_nonzero;  // divisor: keep b away from 0
    bool a_positive; // pow base: keep a > 0
  };
  const std::vector<Bin> bins = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, false, false},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, false, false},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, false, false},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, true, false},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, false, true},
      {"add_fn", [](const Tensor& a, const Tensor& b) { return add(a, b); }, false, false},
      {"sub_fn", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, false, false},
      {"mul_fn", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, false, false},
      {"div_fn", [](const Tensor& a, const Tensor& b) { return div(a, b); }, true, false},
  };
  for (const Bin& op : bins) {
    auto A = [op](const Shape& s, uint64_t seed) { return op.a_positive ? pos(s, seed) : rn(s, seed); };
    auto B = [op](const Shape& s, uint64_t seed) { return op.b_nonzero ? away(s, seed) : rn(s, seed); };
    const std::string n = op.name;
    cs.push_back(C(n + "_plain", [=] { return TV{A({2, 3}, 1), B({2, 3}, 2)}; }, F2(op.f)));
    cs.push_back(C(n + "_bcast_3x1_1x4", [=] { return TV{A({3, 1}, 3), B({1, 4}, 4)}; }, F2(op.f)));
    cs.push_back(C(n + "_bcast_4_2x3x4", [=] { return TV{A({4}, 5), B({2, 3, 4}, 6)}; }, F2(op.f)));
    cs.push_back(C(n + "_bcast_2x3x4_4", [=] { return TV{A({2, 3, 4}, 7), B({4}, 8)}; }, F2(op.f)));
    cs.push_back(C(n + "_bcast_0d", [=] { return TV{A({}, 9), B({3}, 10)}; }, F2(op.f)));
    cs.push_back(C(n + "_noncontig",
                   [=] { return TV{A({4, 3}, 11).t(), B({3, 8}, 12).slice(1, 0, 8, 2)}; }, F2(op.f)));
  }

  // maximum / minimum: distinct values so that a and b never tie (the two inputs interleave on a 0.25 grid
  // with different offsets).
  for (bool is_max : {true, false}) {
    const std::string n = is_max ? "maximum" : "minimum";
    BinFn f = is_max ? BinFn([](const Tensor& a, const Tensor& b) { return maximum(a, b); })
                     : BinFn([](const Tensor& a, const Tensor& b) { return minimum(a, b); });
    cs.push_back(C(n + "_plain", [] { return TV{distinct({2, 3}, 1), distinct({2, 3}, 2) + 0.1}; }, F2(f)));
    cs.push_back(C(n + "_bcast", [] { return TV{distinct({3, 1}, 3), distinct({1, 4}, 4) + 0.1}; }, F2(f)));
    cs.push_back(C(n + "_noncontig",
                   [] { return TV{distinct({4, 3}, 5).t(), (distinct({3, 8}, 6) + 0.1).slice(1, 0, 8, 2)}; }, F2(f)));
  }

  // Exact ties that are still differentiable: maximum(x, x) = x, and each side takes half the gradient.
  cs.push_back(C("maximum_tie_same_input", [] { return TV{rn({2, 3}, 13)}; },
                 F1([](const Tensor& x) { return maximum(x, x) * 3; })));
  cs.push_back(C("minimum_tie_same_input", [] { return TV{rn({2, 3}, 14)}; },
                 F1([](const Tensor& x) { return minimum(x * 2, x + x); })));

  // tensor-scalar and scalar-tensor forms
  cs.push_back(C("add_scalar", [] { return TV{rn({2, 3}, 20)}; }, F1([](const Tensor& x) { return x + 1.5; })));
  cs.push_back(C("scalar_add", [] { return TV{rn({2, 3}, 21)}; }, F1([](const Tensor& x) { return 1.5 + x; })));
  cs.push_back(C("sub_scalar", [] { return TV{rn({2, 3}, 22)}; }, F1([](const Tensor& x) { return x - 2; })));
  cs.push_back(C("scalar_sub", [] { return TV{rn({2, 3}, 23)}; }, F1([](const Tensor& x) { return 2 - x; })));
  cs.push_back(C("mul_scalar", [] { return TV{rn({2, 3}, 24)}; }, F1([](const Tensor& x) { return x * 2; })));
  cs.push_back(C("scalar_mul", [] { return TV{rn({2, 3}, 25)}; }, F1([](const Tensor& x) { return -0.5 * x; })));
  cs.push_back(C("div_scalar", [] { return TV{rn({2, 3}, 26)}; }, F1([](const Tensor& x) { return x / 4.0; })));
  cs.push_back(C("scalar_div", [] { return TV{away({2, 3}, 27)}; }, F1([](const Tensor& x) { return 3 / x; })));
  cs.push_back(C("scalar_div_noncontig", [] { return TV{away({3, 2}, 28).t()}; },
                 F1([](const Tensor& x) { return 3.0 / x; })));
  cs.push_back(C("pow_int3", [] { return TV{rn({2, 3}, 29)}; }, F1([](const Tensor& x) { return pow(x, 3); })));
  cs.push_back(C("pow_2_5", [] { return TV{pos({2, 3}, 30)}; }, F1([](const Tensor& x) { return pow(x, 2.5); })));
  cs.push_back(C("pow_scalar_noncontig", [] { return TV{pos({4, 3}, 31).t()}; },
                 F1([](const Tensor& x) { return pow(x, -1.5); })));
  cs.push_back(C("scalar_ops_noncontig", [] { return TV{rn({3, 8}, 32).slice(1, 1, 8, 2)}; },
                 F1([](const Tensor& x) { return (2 - x) * 3 + x / 2 - 1; })));
  cs.push_back(C("neg_operator", [] { return TV{rn({2, 3}, 33)}; }, F1([](const Tensor& x) { return -x; })));
}

inline void add_unary(std::vector<OpCase>& cs) {
  struct Un {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    std::function<Tensor(const Shape&, uint64_t)> make;
  };
  const std::vector<Un> uns = {
      {"neg", [](const Tensor& x) { return neg(x); }, rn},
      {"abs", [](const Tensor& x) { return abs(x); }, away},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, pos},
      {"exp", [](const Tensor& x) { return exp(x); }, rn},
      {"log", [](const Tensor& x) { return log(x); }, pos},
      {"square", [](const Tensor& x) { return square(x); }, rn},
      {"sign", [](const Tensor& x) { return sign(x) * x; }, away},  // sign' = 0: the product rule sees only x
      {"clamp", [](const Tensor& x) { return clamp(x, -0.55, 0.65); }, rn},
      {"relu", [](const Tensor& x) { return relu(x); }, away},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, rn},
      {"tanh", [](const Tensor& x) { return tanh(x); }, rn},
      {"gelu", [](const Tensor& x) { return gelu(x); }, rn},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x * 3, {.approximate = GeluApproximate::Tanh}); }, rn},
      {"softplus", [](const Tensor& x) { return softplus(x * 4); }, rn},  // (x * 4: some inputs past 1 and -1)
      {"log1p", [](const Tensor& x) { return log1p(x); }, above_m1},
      {"sin", [](const Tensor& x) { return sin(x * 3); }, rn},  // (x * 3: over more than one period)
      {"cos", [](const Tensor& x) { return cos(x * 3); }, rn},
      {"silu", [](const Tensor& x) { return silu(x * 3); }, rn},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }, away},
      {"leaky_relu_slope", [](const Tensor& x) { return leaky_relu(x, 0.2); }, away},
      {"elu", [](const Tensor& x) { return elu(x * 3); }, away},
      {"elu_alpha", [](const Tensor& x) { return elu(x, 1.7); }, away},
      {"mish", [](const Tensor& x) { return mish(x * 3); }, rn},
      {"hardswish", [](const Tensor& x) { return hardswish(x * 3); }, rn},  // (x * 3: both sides of -3 and 3)
      {"clamp_min", [](const Tensor& x) { return clamp_min(x, 0.15); }, rn},
      {"clamp_max", [](const Tensor& x) { return clamp_max(x, -0.25); }, rn},
  };
  uint64_t seed = 100;
  for (const Un& op : uns) {
    const std::string n = op.name;
    auto make = op.make;
    cs.push_back(C(n + "_plain", [=] { return TV{make({2, 3}, seed)}; }, F1(op.f)));
    cs.push_back(C(n + "_noncontig_t", [=] { return TV{make({4, 3}, seed + 1).t()}; }, F1(op.f)));
    cs.push_back(C(n + "_noncontig_slice", [=] { return TV{make({2, 3, 6}, seed + 2).slice(2, 1, 6, 2)}; }, F1(op.f)));
    seed += 3;
  }
  // clamp over a wide range of inputs (most clamped), and clamp of a 0-d tensor
  cs.push_back(C("clamp_mostly_clamped", [] { return TV{rn({4, 5}, 140) * 3}; },
                 F1([](const Tensor& x) { return clamp(x, -0.35, 0.45); })));

  // where: cond is a kBool input, passed through untouched; grads go to a and b.
  auto W = [](const TV& in) { return where(in[0], in[1], in[2]); };
  cs.push_back(C("where_plain", [] { return TV{pattern({3, 4}), rn({3, 4}, 150), rn({3, 4}, 151)}; }, W));
  cs.push_back(C("where_bcast_ab", [] { return TV{pattern({3, 4}), rn({3, 1}, 152), rn({4}, 153)}; }, W));
  cs.push_back(C("where_bcast_cond", [] { return TV{pattern({4}), rn({2, 3, 4}, 154), rn({3, 1}, 155)}; }, W));
  cs.push_back(C("where_noncontig",
                 [] { return TV{pattern({4, 3}).t(), rn({4, 3}, 156).t(), rn({3, 8}, 157).slice(1, 0, 8, 2)}; }, W));
  cs.push_back(C("where_of_compare", [] { return TV{rn({3, 4}, 158), rn({3, 4}, 159) + 0.01}; },
                 F2([](const Tensor& a, const Tensor& b) { return where(gt(a, b), a * 2, b * b); })));
}

inline void add_reductions(std::vector<OpCase>& cs) {
  using R = std::function<Tensor(const Tensor&)>;
  auto R3 = [](uint64_t seed) { return [seed] { return TV{rn({2, 3, 4}, seed)}; }; };
  auto R3nc = [](uint64_t seed) { return [seed] { return TV{rn({2, 4, 3}, seed).transpose(1, 2)}; }; };
  auto D3 = [](uint64_t seed) { return [seed] { return TV{distinct({2, 3, 4}, seed)}; }; };
  auto D3nc = [](uint64_t seed) { return [seed] { return TV{distinct({4, 3, 2}, seed).permute({2, 1, 0})}; }; };

  struct Red {
    std::string name;
    R f;
  };
  std::vector<Red> sums = {
      {"sum_all", [](const Tensor& x) { return sum(x); }},
      {"sum_dim1", [](const Tensor& x) { return sum(x, {1}); }},
      {"sum_dim1_keep", [](const Tensor& x) { return sum(x, {1}, true); }},
      {"sum_dims02", [](const Tensor& x) { return sum(x, {0, 2}); }},
      {"sum_dims20_keep", [](const Tensor& x) { return sum(x, {2, 0}, true); }},
      {"sum_negdim", [](const Tensor& x) { return sum(x, {-1}); }},
      {"sum_negdim_keep", [](const Tensor& x) { return sum(x, {-2}, true); }},
      {"mean_all", [](const Tensor& x) { return mean(x); }},
      {"mean_dim0", [](const Tensor& x) { return mean(x, {0}); }},
      {"mean_dim1_keep", [](const Tensor& x) { return mean(x, {1}, true); }},
      {"mean_dims12", [](const Tensor& x) { return mean(x, {1, 2}); }},
      {"mean_negdims_keep", [](const Tensor& x) { return mean(x, {-1, -3}, true); }},
      {"var_all", [](const Tensor& x) { return var(x); }},
      {"var_dim1", [](const Tensor& x) { return var(x, {1}); }},
      {"var_dim2_corr0", [](const Tensor& x) { return var(x, {2}, false, 0); }},
      {"var_dims01_keep", [](const Tensor& x) { return var(x, {0, 1}, true); }},
      {"var_negdim_keep_corr0", [](const Tensor& x) { return var(x, {-1}, true, 0); }},
      {"var_all_dims_corr0", [](const Tensor& x) { return var(x, {}, false, 0); }},
  };
  uint64_t seed = 200;
  for (const Red& r : sums) {
    cs.push_back(C(r.name, R3(seed), F1(r.f)));
    cs.push_back(C(r.name + "_noncontig", R3nc(seed + 1), F1(r.f)));
    seed += 2;
  }
  // of a sum output used non-trivially (so the incoming gradient is not all ones)
  cs.push_back(C("sum_dim_then_square", R3(250), F1([](const Tensor& x) { return square(sum(x, {1})); })));
  cs.push_back(C("mean_keep_then_mul", R3(251), F1([](const Tensor& x) { return mean(x, {2}, true) * x; })));
  cs.push_back(C("var_then_sqrt", R3(252), F1([](const Tensor& x) { return sqrt(var(x, {2}) + 0.1); })));

  std::vector<Red> exts = {
      {"max_all", [](const Tensor& x) { return max(x); }},
      {"max_dim1", [](const Tensor& x) { return max(x, {1}); }},
      {"max_dim2_keep", [](const Tensor& x) { return max(x, {2}, true); }},
      {"max_dims02", [](const Tensor& x) { return max(x, {0, 2}); }},
      {"max_negdim", [](const Tensor& x) { return max(x, {-3}); }},
      {"min_all", [](const Tensor& x) { return min(x); }},
      {"min_dim0", [](const Tensor& x) { return min(x, {0}); }},
      {"min_dim1_keep", [](const Tensor& x) { return min(x, {1}, true); }},
      {"min_dims12_keep", [](const Tensor& x) { return min(x, {1, 2}, true); }},
      {"min_negdim", [](const Tensor& x) { return min(x, {-1}); }},
  };
  seed = 260;
  for (const Red& r : exts) {
    cs.push_back(C(r.name, D3(seed), F1(r.f)));
    cs.push_back(C(r.name + "_noncontig", D3nc(seed + 1), F1(r.f)));
    seed += 2;
  }

  // Ties made by duplicating the input: max(cat(x, x)) = max(x), the two copies share the gradient.
  cs.push_back(C("max_tie_duplicated", [] { return TV{distinct({2, 3}, 280)}; },
                 F1([](const Tensor& x) { return max(cat({x, x}, 1), {1}); })));
  cs.push_back(C("min_all_tie_duplicated", [] { return TV{distinct({2, 3}, 281)}; },
                 F1([](const Tensor& x) { return min(stack({x, x}, 0)); })));

  // logsumexp, norm, cumsum
  std::vector<Red> more = {
      {"logsumexp_all", [](const Tensor& x) { return logsumexp(x, {}); }},
      {"logsumexp_dim1", [](const Tensor& x) { return logsumexp(x, {1}); }},
      {"logsumexp_dims02_keep", [](const Tensor& x) { return logsumexp(x, {0, 2}, true); }},
      {"logsumexp_negdim", [](const Tensor& x) { return logsumexp(x * 10, {-1}); }},  // (x * 10: a dominant max)
      {"norm_p2_all", [](const Tensor& x) { return norm(x); }},
      {"norm_p2_dim1", [](const Tensor& x) { return norm(x, 2, {1}); }},
      {"norm_p2_dims02_keep", [](const Tensor& x) { return norm(x, 2, {0, 2}, true); }},
      {"norm_p3_negdim_keep", [](const Tensor& x) { return norm(x, 3, {-1}, true); }},
      {"norm_p1_5_all", [](const Tensor& x) { return norm(x, 1.5); }},
      {"cumsum_dim0", [](const Tensor& x) { return cumsum(x, 0); }},
      {"cumsum_dim1", [](const Tensor& x) { return cumsum(x, 1); }},
      {"cumsum_negdim", [](const Tensor& x) { return cumsum(x, -1); }},
      {"cumsum_squared", [](const Tensor& x) { return square(cumsum(x, 2)); }},  // a gradient that depends on x
  };
  seed = 360;
  for (const Red& r : more) {
    cs.push_back(C(r.name, R3(seed), F1(r.f)));
    cs.push_back(C(r.name + "_noncontig", R3nc(seed + 1), F1(r.f)));
    seed += 2;
  }
  // the 1-norm away from abs's kink
  cs.push_back(C("norm_p1_dim2", [] { return TV{away({2, 3, 4}, 386)}; },
                 F1([](const Tensor& x) { return norm(x, 1, {2}); })));
  cs.push_back(C("norm_p1_dim2_noncontig", [] { return TV{away({2, 4, 3}, 387).transpose(1, 2)}; },
                 F1([](const Tensor& x) { return norm(x, 1, {2}); })));
  // the inf-norms on distinct values (no two |x| tie)
  std::vector<Red> inf_norms = {
      {"norm_inf_all", [](const Tensor& x) { return norm(x, INFINITY); }},
      {"norm_inf_dim1", [](const Tensor& x) { return norm(x, INFINITY, {1}); }},
      {"norm_neginf_dims02_keep", [](const Tensor& x) { return norm(x, -INFINITY, {0, 2}, true); }},
  };
  seed = 390;
  for (const Red& r : inf_norms) {
    cs.push_back(C(r.name, D3(seed), F1(r.f)));
    cs.push_back(C(r.name + "_noncontig", D3nc(seed + 1), F1(r.f)));
    seed += 2;
  }
  // broadcast inputs into the reductions, 1-D and 0-d cumsum
  cs.push_back(C("logsumexp_of_bcast_sum", [] { return TV{rn({3, 1}, 350), rn({1, 4}, 351)}; },
                 F2([](const Tensor& a, const Tensor& b) { return logsumexp(a + b, {1}); })));
  cs.push_back(C("norm_of_bcast_product", [] { return TV{rn({3, 1}, 352), rn({4}, 353)}; },
                 F2([](const Tensor& a, const Tensor& b) { return norm(a * b, 2, {0}); })));
  cs.push_back(C("cumsum_of_bcast_sum", [] { return TV{rn({3, 1}, 354), rn({4}, 355)}; },
                 F2([](const Tensor& a, const Tensor& b) { return cumsum(a + b, 0); })));
  cs.push_back(C("cumsum_1d", [] { return TV{rn({7}, 356)}; }, F1([](const Tensor& x) { return cumsum(x, 0) * x; })));
  cs.push_back(C("cumsum_0d", [] { return TV{rn({}, 357)}; }, F1([](const Tensor& x) { return cumsum(x, -1) * x; })));

  // softmax / log_softmax over every dim of a 3-D tensor
  for (int64_t d : {0, 1, 2, -1}) {
    const std::string ds = d < 0 ? "neg" + std::to_string(-d) : std::to_string(d);
    cs.push_back(C("softmax_dim" + ds, R3(300 + d), F1([d](const Tensor& x) { return softmax(x, d); })));
    cs.push_back(C("softmax_dim" + ds + "_noncontig", R3nc(310 + d), F1([d](const Tensor& x) { return softmax(x, d); })));
    cs.push_back(C("log_softmax_dim" + ds, R3(320 + d), F1([d](const Tensor& x) { return log_softmax(x, d); })));
    cs.push_back(C("log_softmax_dim" + ds + "_noncontig", R3nc(330 + d),
                   F1([d](const Tensor& x) { return log_softmax(x, d); })));
  }
  // a weighted softmax output, so the incoming gradient differs per element
  cs.push_back(C("softmax_weighted", [] { return TV{rn({3, 5}, 340), rn({3, 5}, 341)}; },
                 F2([](const Tensor& x, const Tensor& w) { return sum(softmax(x, 1) * w, {1}); })));
  cs.push_back(C("log_softmax_weighted", [] { return TV{rn({3, 5}, 342), rn({3, 5}, 343)}; },
                 F2([](const Tensor& x, const Tensor& w) { return sum(log_softmax(x, 0) * w); })));
}

inline void add_linalg(std::vector<OpCase>& cs) {
  auto M = F2([](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  cs.push_back(C("matmul_1d_1d", [] { return TV{rn({4}, 400), rn({4}, 401)}; }, M));
  cs.push_back(C("matmul_1d_2d", [] { return TV{rn({4}, 402), rn({4, 3}, 403)}; }, M));
  cs.push_back(C("matmul_2d_1d", [] { return TV{rn({3, 4}, 404), rn({4}, 405)}; }, M));
  cs.push_back(C("matmul_2d_2d", [] { return TV{rn({3, 4}, 406), rn({4, 2}, 407)}; }, M));
  cs.push_back(C("matmul_3d_3d", [] { return TV{rn({2, 3, 4}, 408), rn({2, 4, 2}, 409)}; }, M));
  cs.push_back(C("matmul_3d_2d", [] { return TV{rn({2, 3, 4}, 410), rn({4, 2}, 411)}; }, M));
  cs.push_back(C("matmul_2d_3d", [] { return TV{rn({3, 4}, 412), rn({2, 4, 2}, 413)}; }, M));
  cs.push_back(C("matmul_1d_3d", [] { return TV{rn({4}, 414), rn({2, 4, 3}, 415)}; }, M));
  cs.push_back(C("matmul_3d_1d", [] { return TV{rn({2, 3, 4}, 416), rn({4}, 417)}; }, M));
  cs.push_back(C("matmul_bcast_batch", [] { return TV{rn({2, 1, 3, 4}, 418), rn({5, 4, 2}, 419)}; }, M));
  cs.push_back(C("matmul_transposed", [] { return TV{rn({4, 3}, 420).t(), rn({2, 4}, 421).t()}; }, M));
  cs.push_back(C("matmul_batched_transposed",
                 [] { return TV{rn({2, 4, 3}, 422).transpose(1, 2), rn({2, 2, 4}, 423).transpose(-1, -2)}; }, M));
  cs.push_back(C("matmul_sliced", [] { return TV{rn({3, 8}, 424).slice(1, 0, 8, 2), rn({4, 3}, 425)}; }, M));
  cs.push_back(C("matmul_same_input_twice", [] { return TV{rn({3, 3}, 426)}; },
                 F1([](const Tensor& a) { return matmul(a, a); })));

  auto L = [](const TV& in) { return linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor()); };
  cs.push_back(C("linear_bias", [] { return TV{rn({3, 4}, 430), rn({2, 4}, 431), rn({2}, 432)}; }, L));
  cs.push_back(C("linear_nobias", [] { return TV{rn({3, 4}, 433), rn({2, 4}, 434)}; }, L));
  cs.push_back(C("linear_3d_input", [] { return TV{rn({2, 3, 4}, 435), rn({2, 4}, 436), rn({2}, 437)}; }, L));
  cs.push_back(C("linear_1d_input", [] { return TV{rn({4}, 438), rn({3, 4}, 439), rn({3}, 440)}; }, L));
  cs.push_back(C("linear_noncontig",
                 [] { return TV{rn({4, 3}, 441).t(), rn({4, 2}, 442).t(), rn({4}, 443).slice(0, 0, 4, 2)}; }, L));
  cs.push_back(C("linear_3d_noncontig_input",
                 [] { return TV{rn({3, 2, 4}, 444).transpose(0, 1), rn({2, 4}, 445)}; }, L));

  // The fused MLP (x, w1, b1, w2, b2): both GELUs; hidden 8 (cuBLASLt's GELU epilogue needs a multiple of 8) and 6
  // (CUDA's composed steps); 3-D, non-contiguous (transposed x and weights, strided biases) and bias-free inputs.
  auto mlp = [](GeluApproximate form) {
    return [form](const TV& in) {
      return linear_gelu_linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), in.size() > 3 ? in[3] : in[1].t(),
                                in.size() > 4 ? in[4] : Tensor(), {.approximate = form});
    };
  };
  for (auto [form, tag] : {std::pair{GeluApproximate::None, "exact"}, {GeluApproximate::Tanh, "tanh"}}) {
    const std::string n = std::string("linear_gelu_linear_") + tag;
    cs.push_back(C(n, [] { return TV{rn({5, 4}, 2001), rn({8, 4}, 2002), rn({8}, 2003), rn({3, 8}, 2004), rn({3}, 2005)}; },
                   mlp(form)));
    cs.push_back(C(n + "_hidden6_3d",
                   [] { return TV{rn({2, 3, 4}, 2006), rn({6, 4}, 2007), rn({6}, 2008), rn({4, 6}, 2009), rn({4}, 2010)}; },
                   mlp(form)));
    cs.push_back(C(n + "_noncontig", [] {
      return TV{rn({4, 5}, 2011).t(), rn({4, 8}, 2012).t(), rn({16}, 2013).slice(0, 0, 16, 2), rn({8, 3}, 2014).t(),
                rn({6}, 2015).slice(0, 0, 6, 2)};
    }, mlp(form)));
    cs.push_back(C(n + "_nobias", [] { return TV{rn({5, 4}, 2016), rn({8, 4}, 2017)}; }, mlp(form)));
  }
}

inline void add_conv_pool(std::vector<OpCase>& cs) {
  struct Conv {
    std::string name;
    int64_t stride, pad;
    bool bias;
  };
  const std::vector<Conv> convs = {
      {"conv2d_s1_p0_bias", 1, 0, true},   {"conv2d_s1_p0_nobias", 1, 0, false},
      {"conv2d_s1_p1_bias", 1, 1, true},   {"conv2d_s2_p0_bias", 2, 0, true},
      {"conv2d_s2_p1_nobias", 2, 1, false}, {"conv2d_s2_p1_bias", 2, 1, true},
  };
  uint64_t seed = 500;
  for (const Conv& c : convs) {
    TensorFn f = [c](const TV& in) {
      return conv2d(in[0], in[1], c.bias ? in[2] : Tensor(), {c.stride}, {c.pad});
    };
    cs.push_back(C(c.name, [seed, c] {
      TV v{rn({2, 2, 5, 5}, seed), rn({3, 2, 3, 3}, seed + 1)};
      if (c.bias) v.push_back(rn({3}, seed + 2));
      return v;
    }, f));
    seed += 3;
  }
  // rectangular stride/padding, non-contiguous x and w
  cs.push_back(C("conv2d_rect_s21_p01", [] { return TV{rn({1, 2, 5, 4}, 520), rn({2, 2, 2, 3}, 521), rn({2}, 522)}; },
                 [](const TV& in) { return conv2d(in[0], in[1], in[2], {2, 1}, {0, 1}); }));
  cs.push_back(C("conv2d_noncontig",
                 [] {
                   return TV{rn({2, 2, 5, 5}, 523).transpose(2, 3), rn({2, 3, 3, 3}, 524).transpose(0, 1),
                             rn({6}, 525).slice(0, 0, 6, 2)};
                 },
                 [](const TV& in) { return conv2d(in[0], in[1], in[2], {1}, {1}); }));
  // "same" convolutions (stride 1, OW == W): the CPU's im2col/col2im take the one-run-per-row path there
  cs.push_back(C("conv2d_k5_same", [] { return TV{rn({2, 2, 6, 7}, 526), rn({3, 2, 5, 5}, 527), rn({3}, 528)}; },
                 [](const TV& in) { return conv2d(in[0], in[1], in[2], {1}, {2}); }));
  cs.push_back(C("conv2d_k35_same_width", [] { return TV{rn({1, 2, 4, 6}, 529), rn({2, 2, 3, 5}, 5290)}; },
                 [](const TV& in) { return conv2d(in[0], in[1], Tensor(), {1}, {0, 2}); }));
  // more output channels than C*KH*KW (a first layer): the CPU computes the weight gradient transposed
  cs.push_back(C("conv2d_wide_oc", [] { return TV{rn({2, 1, 5, 5}, 5291), rn({7, 1, 2, 2}, 5292), rn({7}, 5293)}; },
                 [](const TV& in) { return conv2d(in[0], in[1], in[2], {1}, {1}); }));

  cs.push_back(C("max_pool2d_k2", [] { return TV{distinct({2, 2, 4, 4}, 530)}; },
                 F1([](const Tensor& x) { return max_pool2d(x, {2}); })));
  cs.push_back(C("max_pool2d_k2_odd_input", [] { return TV{distinct({1, 2, 5, 5}, 531)}; },
                 F1([](const Tensor& x) { return max_pool2d(x, {2}); })));
  cs.push_back(C("max_pool2d_k3_s2_p1", [] { return TV{distinct({2, 2, 5, 5}, 532)}; },
                 F1([](const Tensor& x) { return max_pool2d(x, {3}, {2}, {1}); })));
  cs.push_back(C("max_pool2d_k3_s1_overlap", [] { return TV{distinct({1, 1, 5, 5}, 533)}; },
                 F1([](const Tensor& x) { return max_pool2d(x, {3}, {1}); })));
  cs.push_back(C("max_pool2d_rect", [] { return TV{distinct({1, 2, 4, 6}, 534)}; },
                 F1([](const Tensor& x) { return max_pool2d(x, {2, 3}, {2, 3}); })));
  cs.push_back(C("max_pool2d_noncontig", [] { return TV{distinct({2, 2, 5, 5}, 535).transpose(2, 3)}; },
                 F1([](const Tensor& x) { return max_pool2d(x, {3}, {2}, {1}); })));

  cs.push_back(C("avg_pool2d_k2", [] { return TV{rn({2, 2, 4, 4}, 540)}; },
                 F1([](const Tensor& x) { return avg_pool2d(x, {2}); })));
  cs.push_back(C("avg_pool2d_k3_s2_p1", [] { return TV{rn({2, 2, 5, 5}, 541)}; },
                 F1([](const Tensor& x) { return avg_pool2d(x, {3}, {2}, {1}); })));
  cs.push_back(C("avg_pool2d_k3_s1_p1", [] { return TV{rn({1, 2, 4, 4}, 542)}; },
                 F1([](const Tensor& x) { return avg_pool2d(x, {3}, {1}, {1}); })));
  cs.push_back(C("avg_pool2d_rect", [] { return TV{rn({1, 2, 4, 6}, 543)}; },
                 F1([](const Tensor& x) { return avg_pool2d(x, {2, 3}, {1, 2}, {1, 0}); })));
  cs.push_back(C("avg_pool2d_noncontig", [] { return TV{rn({2, 2, 5, 5}, 544).permute({1, 0, 3, 2})}; },
                 F1([](const Tensor& x) { return avg_pool2d(x, {3}, {2}, {1}); })));
  // channels-last (memory_format.h): a channels-last input or weight makes the convolution channels-last; 1x1
  // stride-1 ones are a GEMM over the NHWC rows on the CPU, the rest go through NCHW copies there
  cs.push_back(C("conv2d_channels_last_3x3", [] { return TV{cl(rn({2, 3, 5, 5}, 5500)), rn({4, 3, 3, 3}, 5501), rn({4}, 5502)}; },
                 [](const TV& in) { return conv2d(in[0], in[1], in[2], {1}, {1}); }));
  cs.push_back(C("conv2d_channels_last_1x1", [] { return TV{cl(rn({2, 3, 4, 3}, 5503)), cl(rn({5, 3, 1, 1}, 5504)), rn({5}, 5505)}; },
                 [](const TV& in) { return conv2d(in[0], in[1], in[2], {1}, {0}); }));
  cs.push_back(C("conv2d_channels_last_1x1_s2", [] { return TV{cl(rn({2, 4, 5, 5}, 5506)), rn({3, 4, 1, 1}, 5507)}; },
                 [](const TV& in) { return conv2d(in[0], in[1], Tensor(), {2}, {0}); }));
  cs.push_back(C("conv2d_channels_last_weight", [] { return TV{rn({1, 2, 4, 5}, 5508), cl(rn({3, 2, 2, 3}, 5509)), rn({3}, 5510)}; },
                 [](const TV& in) { return conv2d(in[0], in[1], in[2], {1, 2}, {1, 0}); }));
  cs.push_back(C("max_pool2d_channels_last", [] { return TV{cl(distinct({2, 3, 5, 5}, 5511))}; },
                 F1([](const Tensor& x) { return max_pool2d(x, {3}, {2}, {1}); })));
  cs.push_back(C("avg_pool2d_channels_last", [] { return TV{cl(rn({2, 3, 4, 4}, 5512))}; },
                 F1([](const Tensor& x) { return avg_pool2d(x, {2}); })));
  // elementwise ops and a sum over H, W on channels-last tensors (a residual block's add + relu, a [1, C, 1, 1] bias)
  cs.push_back(C("add_relu_channels_last", [] { return TV{cl(away({2, 3, 3, 4}, 5513)), cl(rn({2, 3, 3, 4}, 5514)), rn({1, 3, 1, 1}, 5515)}; },
                 [](const TV& in) { return relu(in[0] + in[1] * in[2]) + in[0].sigmoid(); }));
  cs.push_back(C("mean_hw_channels_last", [] { return TV{cl(rn({2, 3, 3, 4}, 5516))}; },
                 F1([](const Tensor& x) { return x.mean({2, 3}) * x.mean({2, 3}); })));

  // adaptive_avg_pool2d: bins that overlap (5 -> 3), that repeat inputs (3 -> 5), one global bin, [C, H, W]
  auto AP = [](int64_t oh, int64_t ow) { return F1([=](const Tensor& x) { return adaptive_avg_pool2d(x, {oh, ow}); }); };
  cs.push_back(C("adaptive_avg_pool2d_5x7_to_3x4", [] { return TV{rn({2, 2, 5, 7}, 545)}; }, AP(3, 4)));
  cs.push_back(C("adaptive_avg_pool2d_upsample", [] { return TV{rn({1, 2, 3, 2}, 546)}; }, AP(5, 4)));
  cs.push_back(C("adaptive_avg_pool2d_global", [] { return TV{rn({2, 3, 4, 3}, 547)}; }, AP(1, 1)));
  cs.push_back(C("adaptive_avg_pool2d_chw", [] { return TV{rn({2, 5, 5}, 548)}; }, AP(2, 3)));
  cs.push_back(C("adaptive_avg_pool2d_noncontig", [] { return TV{rn({2, 2, 6, 5}, 549).transpose(2, 3)}; }, AP(4, 4)));
}

inline void add_shape(std::vector<OpCase>& cs) {
  auto Cat = [](int64_t d) { return TensorFn([d](const TV& in) { return cat({in[0], in[1], in[2]}, d); }); };
  cs.push_back(C("cat_dim0", [] { return TV{rn({1, 3}, 600), rn({2, 3}, 601), rn({3, 3}, 602)}; }, Cat(0)));
  cs.push_back(C("cat_dim1", [] { return TV{rn({2, 1}, 603), rn({2, 3}, 604), rn({2, 2}, 605)}; }, Cat(1)));
  cs.push_back(C("cat_negdim", [] { return TV{rn({2, 2, 1}, 606), rn({2, 2, 3}, 607), rn({2, 2, 2}, 608)}; }, Cat(-1)));
  cs.push_back(C("cat_noncontig",
                 [] { return TV{rn({3, 2}, 609).t(), rn({2, 6}, 610).slice(1, 0, 6, 2), rn({2, 2}, 611)}; }, Cat(1)));
  cs.push_back(C("cat_same_tensor_twice", [] { return TV{rn({2, 3}, 612), rn({1, 3}, 613)}; },
                 F2([](const Tensor& a, const Tensor& b) { return cat({a, b, a}, 0) * 2; })));

  auto Stack = [](int64_t d) { return TensorFn([d](const TV& in) { return stack({in[0], in[1], in[2]}, d); }); };
  cs.push_back(C("stack_dim0", [] { return TV{rn({2, 3}, 620), rn({2, 3}, 621), rn({2, 3}, 622)}; }, Stack(0)));
  cs.push_back(C("stack_dim1", [] { return TV{rn({2, 3}, 623), rn({2, 3}, 624), rn({2, 3}, 625)}; }, Stack(1)));
  cs.push_back(C("stack_negdim", [] { return TV{rn({2, 3}, 626), rn({2, 3}, 627), rn({2, 3}, 628)}; }, Stack(-1)));
  cs.push_back(C("stack_noncontig",
                 [] { return TV{rn({3, 2}, 629).t(), rn({2, 6}, 630).slice(1, 1, 6, 2), rn({2, 3}, 631)}; }, Stack(-1)));

  auto IS = [](int64_t d) { return TensorFn([d](const TV& in) { return index_select(in[0], d, in[1]); }); };
  cs.push_back(C("index_select_dim0_repeat", [] { return TV{rn({4, 3}, 640), idx({2, 0, 2, 3, 2})}; }, IS(0)));
  cs.push_back(C("index_select_dim1_repeat", [] { return TV{rn({2, 4, 3}, 641), idx({3, 3, 1})}; }, IS(1)));
  cs.push_back(C("index_select_negdim", [] { return TV{rn({2, 4}, 642), idx({1, 0, 1})}; }, IS(-1)));
  cs.push_back(C("index_select_noncontig", [] { return TV{rn({3, 4}, 643).t(), idx({3, 1, 1, 0})}; }, IS(0)));
  cs.push_back(C("index_select_method", [] { return TV{rn({4, 3}, 644), idx({1, 1})}; },
                 [](const TV& in) { return in[0].index_select(1, in[1]); }));
}

// issue 17's shape ops: chunk / split pieces (views) put back together differently, pad (negative pads crop)
inline void add_pieces_and_pad(std::vector<OpCase>& cs) {
  cs.push_back(C("chunk_3_of_5", [] { return TV{rn({5, 3}, 650)}; }, F1([](const Tensor& x) {
                   std::vector<Tensor> p = chunk(x, 3);  // sizes 2, 2, 1
                   return cat({p[2] * -2.0, p[0] * 1.5, p[1] * p[1]}, 0);
                 })));
  cs.push_back(C("chunk_fewer_pieces_dim1", [] { return TV{rn({2, 6}, 651)}; }, F1([](const Tensor& x) {
                   std::vector<Tensor> p = chunk(x, 4, 1);  // sizes 2, 2, 2: three pieces
                   return p[0] * p[2] + p[1];
                 })));
  cs.push_back(C("split_size_dim1", [] { return TV{rn({2, 7}, 652)}; }, F1([](const Tensor& x) {
                   std::vector<Tensor> p = split(x, 3, 1);  // sizes 3, 3, 1
                   return p[0] * p[1] + p[2];
                 })));
  cs.push_back(C("split_sizes_noncontig", [] { return TV{rn({5, 4}, 653).t()}; }, F1([](const Tensor& x) {
                   std::vector<Tensor> p = split(x, std::vector<int64_t>{1, 0, 4}, 1);  // an empty piece too
                   return p[2] * p[0] + sum(p[1]);
                 })));
  cs.push_back(C("chunk_split_methods", [] { return TV{rn({4, 6}, 654)}; }, F1([](const Tensor& x) {
                   return x.chunk(2)[1] * x.split({3, 1}, 0)[1] + x.split(2, 0)[0];
                 })));

  auto P = [](std::vector<int64_t> pads, double value) { return F1([=](const Tensor& x) { return pad(x, pads, value); }); };
  cs.push_back(C("pad_last_dim", [] { return TV{rn({2, 3}, 660)}; }, P({1, 2}, 0)));
  cs.push_back(C("pad_two_dims_value", [] { return TV{rn({2, 3, 4}, 661)}; }, P({1, 0, 2, 1}, 0.7)));
  cs.push_back(C("pad_negative_crop", [] { return TV{rn({3, 5}, 662)}; }, P({-1, 2, 1, -2}, -1.5)));
  cs.push_back(C("pad_three_dims", [] { return TV{rn({2, 2, 2}, 663)}; }, P({0, 1, 1, 0, 1, 1}, 0)));
  cs.push_back(C("pad_noncontig", [] { return TV{rn({4, 3}, 664).t()}; }, P({2, -1}, 0)));
}

// gather / scatter_add / masked_fill, and the values of sort and topk (gathers); index and mask are inputs that
// carry no gradient
inline void add_indexing(std::vector<OpCase>& cs) {
  auto G = [](int64_t d) { return TensorFn([d](const TV& in) { return gather(in[0], d, in[1]); }); };
  cs.push_back(C("gather_dim1", [] { return TV{rn({3, 4}, 670), idx({3, 0, 1, 1, 2, 0}, {3, 2})}; }, G(1)));
  cs.push_back(C("gather_dim0_index_narrower", [] { return TV{rn({3, 4}, 671), idx({2, 0, 1, 2, 2, 0}, {2, 3})}; }, G(0)));
  cs.push_back(C("gather_negdim_3d",
                 [] { return TV{rn({2, 3, 4}, 672), idx({0, 2, 1, 1, 2, 0, 0, 1, 2, 2, 1, 0}, {2, 2, 3})}; }, G(-2)));
  cs.push_back(C("gather_noncontig", [] { return TV{rn({4, 3}, 673).t(), idx({1, 3, 3, 0, 2, 2}, {3, 2})}; }, G(1)));
  cs.push_back(C("gather_method", [] { return TV{rn({3, 4}, 674), idx({1, 1, 0, 2}, {1, 4})}; },
                 [](const TV& in) { return in[0].gather(0, in[1]); }));

  auto S = [](int64_t d) { return TensorFn([d](const TV& in) { return scatter_add(in[0], d, in[1], in[2]); }); };
  cs.push_back(C("scatter_add_dim1",
                 [] { return TV{rn({3, 5}, 680), idx({0, 1, 0, 4, 4, 2}, {2, 3}), rn({2, 3}, 681)}; }, S(1)));
  cs.push_back(C("scatter_add_dim0_src_larger",
                 [] { return TV{rn({3, 5}, 682), idx({2, 0, 2, 1}, {1, 4}), rn({3, 4}, 683)}; }, S(0)));
  cs.push_back(C("scatter_add_noncontig",
                 [] { return TV{rn({5, 3}, 684).t(), idx({4, 4, 1, 0, 2, 4}, {2, 3}), rn({3, 2}, 685).t()}; }, S(1)));
  cs.push_back(C("scatter_add_method_then_mul",
                 [] { return TV{rn({4, 2}, 686), idx({3, 0, 3, 3}, {2, 2}), rn({2, 2}, 687)}; },
                 [](const TV& in) { return in[0].scatter_add(0, in[1], in[2]) * in[0]; }));

  auto M = [](const TV& in) { return masked_fill(in[0], in[1], 0.5); };
  cs.push_back(C("masked_fill_plain", [] { return TV{rn({3, 4}, 690), pattern({3, 4})}; }, M));
  cs.push_back(C("masked_fill_bcast_mask", [] { return TV{rn({2, 3, 4}, 691), pattern({4})}; }, M));
  cs.push_back(C("masked_fill_bcast_x", [] { return TV{rn({4}, 692), pattern({3, 4})}; }, M));
  cs.push_back(C("masked_fill_noncontig", [] { return TV{rn({4, 3}, 693).t(), pattern({4, 3}).t()}; }, M));
  cs.push_back(C("masked_fill_tensor_value", [] { return TV{rn({3, 4}, 694), pattern({3, 4}), rn({}, 695)}; },
                 [](const TV& in) { return masked_fill(in[0], in[1], in[2]) * in[0]; }));
  cs.push_back(C("masked_fill_method", [] { return TV{rn({2, 3}, 696), pattern({2, 3})}; },
                 [](const TV& in) { return in[0].masked_fill(in[1], -2.0); }));

  // distinct values: no ties, whose order would not be differentiable
  auto D = [](const Shape& s, uint64_t seed) { return [s, seed] { return TV{distinct(s, seed)}; }; };
  cs.push_back(C("sort_values_dim1", D({3, 5}, 700), F1([](const Tensor& x) { return sort(x, 1).values; })));
  cs.push_back(C("sort_values_desc_dim0", D({4, 3}, 701), F1([](const Tensor& x) { return sort(x, 0, true).values; })));
  cs.push_back(C("sort_values_noncontig", [] { return TV{distinct({5, 3}, 702).t()}; },
                 F1([](const Tensor& x) { return sort(x).values * x; })));
  cs.push_back(C("topk_values_k2", D({3, 5}, 703), F1([](const Tensor& x) { return topk(x, 2).values; })));
  cs.push_back(C("topk_smallest_dim0", D({4, 3}, 704), F1([](const Tensor& x) { return topk(x, 3, 0, false).values; })));
  cs.push_back(C("topk_noncontig", [] { return TV{distinct({2, 6, 3}, 705).transpose(1, 2)}; },
                 F1([](const Tensor& x) { return square(topk(x, 4).values); })));
  cs.push_back(C("sort_topk_methods", D({3, 4}, 706),
                 F1([](const Tensor& x) { return x.sort(0).values + x.topk(4, 1, false).values; })));
}

// einsum: contractions, batch indices, outer products, lone indices summed, broadcast ellipsis, three operands
inline void add_einsum(std::vector<OpCase>& cs) {
  auto E = [](const std::string& eq) { return TensorFn([eq](const TV& in) { return einsum(eq, in); }); };
  cs.push_back(C("einsum_matmul", [] { return TV{rn({2, 3}, 710), rn({3, 4}, 711)}; }, E("ij,jk->ik")));
  cs.push_back(C("einsum_batch_matmul", [] { return TV{rn({2, 2, 3}, 712), rn({2, 3, 2}, 713)}; }, E("bij,bjk->bik")));
  cs.push_back(C("einsum_outer", [] { return TV{rn({3}, 714), rn({2}, 715)}; }, E("i,j->ij")));
  cs.push_back(C("einsum_transpose", [] { return TV{rn({2, 3}, 716)}; }, E("ij->ji")));
  cs.push_back(C("einsum_sum_all", [] { return TV{rn({2, 3}, 717)}; }, E("ij->")));
  cs.push_back(C("einsum_dot", [] { return TV{rn({4}, 718), rn({4}, 719)}; }, E("i,i->")));
  cs.push_back(C("einsum_hadamard_batch", [] { return TV{rn({4}, 720), rn({4}, 721)}; }, E("i,i->i")));
  cs.push_back(C("einsum_lone_index_summed", [] { return TV{rn({2, 3}, 722), rn({3, 4}, 723)}; }, E("ij,jk->k")));
  cs.push_back(C("einsum_ellipsis_bcast", [] { return TV{rn({2, 1, 2, 3}, 724), rn({4, 3, 2}, 725)}; },
                 E("...ij,...jk->...ik")));
  cs.push_back(C("einsum_three_operands", [] { return TV{rn({2, 3}, 726), rn({3, 4}, 727), rn({4, 2}, 728)}; },
                 E("ij,jk,kl->il")));
  cs.push_back(C("einsum_bilinear", [] { return TV{rn({2, 3}, 729), rn({4, 3, 5}, 730), rn({2, 5}, 731)}; },
                 E("bn,anm,bm->ba")));
  cs.push_back(C("einsum_size1_broadcast", [] { return TV{rn({2, 1}, 732), rn({3}, 733)}; }, E("ij,j->i")));
  cs.push_back(C("einsum_implicit_output", [] { return TV{rn({2, 3}, 734), rn({3, 2}, 735)}; }, E("ij,jk")));
  cs.push_back(C("einsum_noncontig", [] { return TV{rn({3, 2}, 736).t(), rn({4, 3}, 737).t()}; }, E("ij,jk->ki")));
}

// nn losses with PyTorch's options: targets, weights and ignored entries (-100) are inputs (weights get a gradient)
inline void add_losses(std::vector<OpCase>& cs) {
  using namespace nn;
  const auto targets = [] { return idx({0, 2, -100, 1}); };
  cs.push_back(C("nll_loss_mean_ignore", [=] { return TV{rn({4, 3}, 740), targets()}; },
                 [](const TV& in) { return nll_loss(in[0], in[1]); }));
  cs.push_back(C("nll_loss_weight_mean", [=] { return TV{rn({4, 3}, 741), targets(), pos({3}, 742)}; },
                 [](const TV& in) { return nll_loss(in[0], in[1], {.weight = in[2]}); }));
  cs.push_back(C("nll_loss_kdim_none", [] { return TV{rn({2, 3, 2}, 743), idx({0, 2, -100, 1}, {2, 2})}; },
                 [](const TV& in) { return nll_loss(in[0], in[1], {.reduction = Reduction::None}); }));
  cs.push_back(C("cross_entropy_opts_smoothing_weight", [=] { return TV{rn({4, 3}, 744), targets(), pos({3}, 745)}; },
                 [](const TV& in) { return cross_entropy(in[0], in[1], {.label_smoothing = 0.2, .weight = in[2]}); }));
  cs.push_back(C("cross_entropy_opts_kdim_sum", [] { return TV{rn({2, 3, 2}, 746), idx({0, 2, -100, 1}, {2, 2})}; },
                 [](const TV& in) {
                   return cross_entropy(in[0], in[1], {.reduction = Reduction::Sum, .label_smoothing = 0.1});
                 }));
  // cross_entropy with class indices (its own node: the picked log-probabilities, softmax - one-hot), non-contiguous
  // logits and int32 targets too
  cs.push_back(C("cross_entropy_class_indices", [] { return TV{rn({4, 3}, 757), idx({0, 2, 1, 1})}; },
                 [](const TV& in) { return cross_entropy(in[0], in[1]); }));
  cs.push_back(C("cross_entropy_noncontig_int32", [] { return TV{rn({3, 5}, 758).t(), idx({2, 0, 1, 2, 2}).to(kInt32)}; },
                 [](const TV& in) { return cross_entropy(in[0], in[1]) * 3.0; }));
  // elementwise losses away from their kinks: pred - target stays away from 0 (l1) and from delta / beta
  cs.push_back(C("l1_loss_mean", [] { return TV{away({2, 3}, 747), rn({2, 3}, 748) * 0.05}; },
                 F2([](const Tensor& p, const Tensor& t) { return l1_loss(p, t); })));
  cs.push_back(C("mse_loss_none", [] { return TV{rn({2, 3}, 749), rn({2, 3}, 750)}; },
                 F2([](const Tensor& p, const Tensor& t) { return mse_loss(p, t, {.reduction = Reduction::None}); })));
  cs.push_back(C("huber_loss_delta", [] { return TV{rn({3, 4}, 751) * 2.0, rn({3, 4}, 752)}; },
                 F2([](const Tensor& p, const Tensor& t) { return huber_loss(p, t, {.delta = 0.8}); })));
  cs.push_back(C("smooth_l1_loss_sum", [] { return TV{rn({3, 4}, 753) * 2.0, rn({3, 4}, 754)}; },
                 F2([](const Tensor& p, const Tensor& t) {
                   return smooth_l1_loss(p, t, {.beta = 0.5, .reduction = Reduction::Sum});
                 })));
}

inline void add_views(std::vector<OpCase>& cs) {
  // Views are followed by an elementwise multiply with a fixed weight so that each output element gets a
  // different gradient.
  auto R = [](const Shape& s, uint64_t seed) { return [s, seed] { return TV{rn(s, seed)}; }; };
  auto Rt = [](const Shape& s, uint64_t seed) { return [s, seed] { return TV{rn(s, seed).transpose(0, 1)}; }; };
  struct V {
    std::string name;
    std::function<Tensor(const Tensor&)> f;
  };
  // inputs: [3, 4] for plain, a transposed [4, 3] -> [3, 4] for non-contiguous
  const std::vector<V> views = {
      {"reshape", [](const Tensor& x) { return x.reshape({2, 6}); }},
      {"reshape_infer", [](const Tensor& x) { return x.reshape({-1, 3, 2}); }},
      {"flatten", [](const Tensor& x) { return x.flatten(); }},
      {"transpose", [](const Tensor& x) { return x.transpose(0, 1); }},
      {"transpose_neg", [](const Tensor& x) { return x.transpose(-1, -2); }},
      {"permute", [](const Tensor& x) { return x.permute({1, 0}); }},
      {"t", [](const Tensor& x) { return x.t(); }},
      {"slice_step2", [](const Tensor& x) { return x.slice(1, 0, 4, 2); }},
      {"slice_dim0", [](const Tensor& x) { return x.slice(0, 1, 3); }},
      {"select", [](const Tensor& x) { return x.select(1, 2); }},
      {"select_neg", [](const Tensor& x) { return x.select(0, -1); }},
      {"unsqueeze", [](const Tensor& x) { return x.unsqueeze(1); }},
      {"unsqueeze_neg", [](const Tensor& x) { return x.unsqueeze(-1); }},
      {"unsqueeze_squeeze", [](const Tensor& x) { return x.unsqueeze(0).squeeze(0); }},
      {"unsqueeze_squeeze_all", [](const Tensor& x) { return x.unsqueeze(2).unsqueeze(0).squeeze(); }},
      {"expand_mul", [](const Tensor& x) { return x.unsqueeze(1).expand({3, 2, 4}) * on(x, rn({3, 2, 4}, 9)); }},
      {"expand_new_lead", [](const Tensor& x) { return x.expand({2, 3, 4}) * on(x, rn({2, 3, 4}, 8)); }},
      {"contiguous", [](const Tensor& x) { return x.contiguous(); }},
      {"contiguous_of_t", [](const Tensor& x) { return x.t().contiguous(); }},
      {"clone", [](const Tensor& x) { return x.clone(); }},
      {"to_f32_f64", [](const Tensor& x) { return x.to(kFloat32).to(kFloat64); }},
      {"chain", [](const Tensor& x) { return x.t().reshape({2, 6}).slice(1, 1, 6, 2).unsqueeze(0).permute({2, 0, 1}); }},
  };
  uint64_t seed = 700;
  for (const V& v : views) {
    auto f = v.f;
    TensorFn fn = [f](const TV& in) {
      Tensor y = f(in[0]);
      // a fixed, element-varying weight so every output element's gradient differs
      Tensor w = on(y, arange(y.numel(), f64).reshape(y.shape()) * 0.5 - 1.0);
      return y * w;
    };
    // The float32 round trip rounds at ~6e-8 relative, which a 1e-6 step would amplify to ~5% in the
    // numeric slope; the function is linear, so a large step costs no truncation error.
    const bool f32 = v.name == "to_f32_f64";
    const double atol = f32 ? 1e-4 : 1e-5, eps = f32 ? 1e-3 : 1e-6;
    cs.push_back(C(v.name, R({3, 4}, seed), fn, atol, 1e-3, eps));
    cs.push_back(C(v.name + "_noncontig", Rt({4, 3}, seed + 1), fn, atol, 1e-3, eps));
    seed += 2;
  }
  cs.push_back(C("view", R({3, 4}, 760), F1([](const Tensor& x) { return x.view({4, 3}) * 2; })));
  cs.push_back(C("view_of_view", R({3, 4}, 761), F1([](const Tensor& x) { return x.view({12}).view({2, 2, 3}) * 2; })));
  cs.push_back(C("flatten_range", R({2, 3, 2}, 762), F1([](const Tensor& x) { return x.flatten(1, 2) * 3; })));
  cs.push_back(C("flatten_range_noncontig", [] { return TV{rn({2, 2, 3}, 763).transpose(1, 2)}; },
                 F1([](const Tensor& x) { return x.flatten(1) * 3; })));
  cs.push_back(C("permute_3d", [] { return TV{rn({2, 3, 4}, 764)}; },
                 F1([](const Tensor& x) { return x.permute({2, 0, 1}) * on(x, rn({4, 2, 3}, 7)); })));
  cs.push_back(C("squeeze_dim", [] { return TV{rn({3, 1, 2}, 765)}; },
                 F1([](const Tensor& x) { return x.squeeze(1) * on(x, rn({3, 2}, 6)); })));
  cs.push_back(C("t_1d", [] { return TV{rn({4}, 766)}; }, F1([](const Tensor& x) { return x.t() * on(x, rn({4}, 5)); })));
  cs.push_back(C("slice_overlap_sum", [] { return TV{rn({6}, 767)}; },
                 F1([](const Tensor& x) { return x.slice(0, 0, 4) * x.slice(0, 2, 6); })));
  cs.push_back(C("select_then_select", [] { return TV{rn({2, 3, 4}, 768)}; },
                 F1([](const Tensor& x) { return x.select(2, 1) + x.select(2, 3) * 2; })));
}

inline void add_inplace(std::vector<OpCase>& cs) {
  // In-place ops on a temporary that requires grad (a leaf may not be changed in place while recording).
  cs.push_back(C("inplace_add_", [] { return TV{rn({3, 4}, 800), rn({4}, 801)}; },
                 F2([](const Tensor& a, const Tensor& b) { Tensor t = a * 1.0; t.add_(b); return t * a; })));
  cs.push_back(C("inplace_sub_", [] { return TV{rn({3, 4}, 802), rn({3, 1}, 803)}; },
                 F2([](const Tensor& a, const Tensor& b) { Tensor t = a * 2.0; t.sub_(b); return t * a; })));
  cs.push_back(C("inplace_mul_", [] { return TV{rn({3, 4}, 804), rn({4}, 805)}; },
                 F2([](const Tensor& a, const Tensor& b) { Tensor t = a * 1.0; t.mul_(b); return t * a; })));
  cs.push_back(C("inplace_div_", [] { return TV{rn({3, 4}, 806), away({3, 4}, 807)}; },
                 F2([](const Tensor& a, const Tensor& b) { Tensor t = a * 1.0; t.div_(b); return t * a; })));
  cs.push_back(C("inplace_scalar_ops", [] { return TV{rn({3, 4}, 808)}; }, F1([](const Tensor& a) {
                   Tensor t = a * 1.0;
                   t.add_(1.5).mul_(3.0).sub_(0.5).div_(4.0);
                   return t * a;
                 })));
  cs.push_back(C("inplace_relu_", [] { return TV{away({3, 4}, 809)}; },
                 F1([](const Tensor& a) { Tensor t = a * 1.0; t.relu_(); return t * a; })));
  cs.push_back(C("inplace_clamp_", [] { return TV{rn({3, 4}, 810)}; },
                 F1([](const Tensor& a) { Tensor t = a * 1.0; t.clamp_(-0.45, 0.55); return t * a; })));
  cs.push_back(C("inplace_copy_", [] { return TV{rn({3, 4}, 811), rn({4}, 812)}; },
                 F2([](const Tensor& a, const Tensor& b) { Tensor t = a * 2.0; t.copy_(b); return t * a; })));
  cs.push_back(C("inplace_copy_into_plain", [] { return TV{rn({3, 4}, 813), rn({3, 4}, 814)}; },
                 F2([](const Tensor& a, const Tensor& b) {
                   Tensor t = zeros({3, 4}, {.dtype = kFloat64, .device = a.device()});
                   t.copy_(b);
                   return t * a;
                 })));
  cs.push_back(C("inplace_fill_", [] { return TV{rn({3, 4}, 815), rn({3, 4}, 816)}; },
                 F2([](const Tensor& a, const Tensor& b) { Tensor t = a * 2.0; t.fill_(1.5); return t * b; })));
  cs.push_back(C("inplace_on_clone", [] { return TV{rn({3, 4}, 817), rn({4}, 818)}; },
                 F2([](const Tensor& a, const Tensor& b) { Tensor t = a.clone(); t.mul_(b); return t; })));
}

// The math members of Tensor (x.sum(), x.exp(), ...) record the same graph as the free functions.
inline void add_methods(std::vector<OpCase>& cs) {
  cs.push_back(C("methods_elementwise", [] { return TV{pos({3, 4}, 950)}; }, F1([](const Tensor& x) {
                   return x.exp().log1p() + x.log().sin() * x.cos() + x.sqrt().tanh() + x.neg().sigmoid() +
                          x.square().abs() + x.pow(1.5) + x.pow(x) + (x - 1).relu() * 0.5 + x.clamp(0.7, 1.2);
                 })));
  cs.push_back(C("methods_reductions", [] { return TV{rn({3, 4}, 951).t()}; }, F1([](const Tensor& x) {
                   return x.sum() + x.sum({1}, true).mean() + x.mean({0}).sum() + x.logsumexp({1}).sum() +
                          x.norm() + x.norm(1.5, {0}).sum() + x.cumsum(1).sum({0}).sum();
                 })));
  cs.push_back(C("methods_matmul", [] { return TV{rn({3, 4}, 952), rn({4, 2}, 953)}; },
                 F2([](const Tensor& a, const Tensor& b) { return a.matmul(b); })));
  cs.push_back(C("methods_refusing", [] { return TV{distinct({3, 4}, 954)}; }, F1([](const Tensor& x) {
                   return x.max() + x.min() + x.var() + x.var({1}, false, 0).sum() + x.softmax(1).select(1, 0).sum() +
                          x.log_softmax(0).select(0, 1).sum();
                 })));
}

inline void add_composite(std::vector<OpCase>& cs) {
  // A tiny 2-layer MLP with fan-out (h feeds two branches, x feeds two ops) and fan-in (their sum), ending in
  // log_softmax and a picked-out negative log-likelihood (index_select on the flattened log-probs + mean).
  cs.push_back(C("mlp_nll",
                 [] {
                   return TV{rn({4, 3}, 900), rn({5, 3}, 901), rn({5}, 902), rn({3, 5}, 903), rn({3}, 904),
                             idx({0 * 3 + 2, 1 * 3 + 0, 2 * 3 + 1, 3 * 3 + 2})};
                 },
                 [](const TV& in) {
                   const Tensor &x = in[0], &w1 = in[1], &b1 = in[2], &w2 = in[3], &b2 = in[4], &pick = in[5];
                   Tensor h = tanh(linear(x, w1, b1));
                   Tensor logits = linear(h, w2, b2) + sum(h, {1}, true) * 0.1 + x;
                   Tensor lp = log_softmax(logits, 1);
                   return -mean(index_select(lp.flatten(), 0, pick));
                 }));
  cs.push_back(C("conv_pool_head",
                 [] { return TV{rn({2, 1, 6, 6}, 910), rn({2, 1, 3, 3}, 911), rn({2}, 912), rn({3, 8}, 913)}; },
                 [](const TV& in) {
                   Tensor y = sigmoid(conv2d(in[0], in[1], in[2], {1}, {0}));  // [2, 2, 4, 4]
                   y = avg_pool2d(y, {2});                                      // [2, 2, 2, 2]
                   return softmax(linear(y.flatten(1), in[3]), -1);
                 }));
  cs.push_back(C("gelu_var_norm", [] { return TV{rn({3, 5}, 920)}; }, F1([](const Tensor& x) {
                   Tensor c = x - mean(x, {1}, true);
                   return gelu(c / sqrt(var(x, {1}, true, 0) + 1e-3));
                 })));
}

// batch_norm: batch statistics (the [N, C] row path, the [N, C, S] run path, no affine, a strided input) and
// running statistics (evaluation mode). Channels get distinct scales so that their statistics differ.
inline void add_norm(std::vector<OpCase>& cs) {
  auto BN = [](bool training, bool affine) {
    return [=](const TV& in) {
      const int64_t c = in[0].size(1);
      Tensor rm, rv;
      if (!training) {
        std::vector<double> m, v;
        for (int64_t i = 0; i < c; ++i) { m.push_back(0.1 * static_cast<double>(i) - 0.2); v.push_back(0.5 + 0.3 * static_cast<double>(i)); }
        rm = on(in[0], tensor(m, {c}, f64));
        rv = on(in[0], tensor(v, {c}, f64));
      }
      return batch_norm(in[0], rm, rv, affine ? in[1] : Tensor(), affine ? in[2] : Tensor(), training, 0.1, 1e-3);
    };
  };
  auto scaled = [](const Shape& s, uint64_t seed) {
    Shape ps(s.size(), 1);
    ps[1] = s[1];
    return rn(s, seed) * (arange(s[1]).to(kFloat64).reshape(ps) + 0.5) + 0.3;
  };
  cs.push_back(C("batch_norm_rows", [=] { return TV{scaled({6, 3}, 930), rn({3}, 931), rn({3}, 932)}; }, BN(true, true)));
  cs.push_back(C("batch_norm_2d", [=] { return TV{scaled({3, 2, 3, 4}, 933), rn({2}, 934), rn({2}, 935)}; }, BN(true, true)));
  cs.push_back(C("batch_norm_1d_length", [=] { return TV{scaled({4, 3, 5}, 936), rn({3}, 937), rn({3}, 938)}; }, BN(true, true)));
  cs.push_back(C("batch_norm_no_affine", [=] { return TV{scaled({3, 2, 2, 3}, 939)}; }, BN(true, false)));
  cs.push_back(C("batch_norm_noncontig", [=] { return TV{scaled({4, 3, 5}, 940).transpose(0, 2).transpose(0, 2).slice(2, 0, 5, 2), rn({3}, 941), rn({3}, 942)}; }, BN(true, true)));
  cs.push_back(C("batch_norm_eval", [=] { return TV{scaled({3, 2, 3, 4}, 943), rn({2}, 944), rn({2}, 945)}; }, BN(false, true)));
  // batch_norm_relu: relu(batch_norm) fused, on the same paths (values away from 0 after normalising: the kink)
  auto BNR = [](bool training) {
    return [=](const TV& in) {
      const int64_t c = in[0].size(1);
      Tensor rm = training ? Tensor() : on(in[0], full({c}, 0.1, f64));
      Tensor rv = training ? Tensor() : on(in[0], full({c}, 0.8, f64));
      return batch_norm_relu(in[0], rm, rv, in[1], in[2], training, 0.1, 1e-3);
    };
  };
  cs.push_back(C("batch_norm_relu_rows", [=] { return TV{scaled({6, 3}, 946), rn({3}, 947), rn({3}, 948)}; }, BNR(true)));
  cs.push_back(C("batch_norm_relu_2d", [=] { return TV{scaled({3, 2, 3, 4}, 949), rn({2}, 950), rn({2}, 951)}; }, BNR(true)));
  cs.push_back(C("batch_norm_relu_noncontig", [=] { return TV{scaled({4, 3, 5}, 952).slice(2, 0, 5, 2), rn({3}, 953), rn({3}, 954)}; }, BNR(true)));
  cs.push_back(C("batch_norm_relu_eval", [=] { return TV{scaled({3, 2, 3, 4}, 955), rn({2}, 956), rn({2}, 957)}; }, BNR(false)));
  // channels-last input (memory_format.h): the kernels see it as [N*H*W, C] rows; y and dx keep the layout
  cs.push_back(C("batch_norm_channels_last", [=] { return TV{cl(scaled({3, 4, 3, 2}, 958)), rn({4}, 959), rn({4}, 960)}; }, BN(true, true)));
  cs.push_back(C("batch_norm_relu_channels_last", [=] { return TV{cl(scaled({2, 3, 3, 3}, 961)), rn({3}, 962), rn({3}, 963)}; }, BNR(true)));
  cs.push_back(C("batch_norm_eval_channels_last", [=] { return TV{cl(scaled({3, 2, 3, 4}, 964)), rn({2}, 965), rn({2}, 966)}; }, BN(false, true)));
  // layer_norm over the last dim or the last two, with and without weight / bias, non-contiguous, weight broadcast
  // over the rows (its gradient sums them)
  auto LN = [](std::vector<int64_t> ns, bool w, bool b) {
    return [=](const TV& in) { return layer_norm(in[0], ns, w ? in[1] : Tensor(), b ? in[w ? 2 : 1] : Tensor(), 1e-3); };
  };
  cs.push_back(C("layer_norm_last", [] { return TV{rn({4, 5}, 950) * 2.0 + 0.5, rn({5}, 951), rn({5}, 952)}; }, LN({5}, true, true)));
  cs.push_back(C("layer_norm_last2_3d", [] { return TV{rn({2, 3, 4}, 953), rn({3, 4}, 954), rn({3, 4}, 955)}; }, LN({3, 4}, true, true)));
  cs.push_back(C("layer_norm_no_affine", [] { return TV{rn({3, 2, 6}, 956)}; }, LN({6}, false, false)));
  cs.push_back(C("layer_norm_bias_only", [] { return TV{rn({3, 6}, 957), rn({6}, 958)}; }, LN({6}, false, true)));
  cs.push_back(C("layer_norm_noncontig", [] { return TV{rn({5, 3, 4}, 959).transpose(0, 2), rn({5}, 960), rn({5}, 961)}; }, LN({5}, true, true)));
  // rms_norm (the same fused kernels without the mean): with and without weight, over two dims, non-contiguous
  auto RMS = [](std::vector<int64_t> ns, bool w) {
    return [=](const TV& in) { return rms_norm(in[0], ns, w ? in[1] : Tensor(), 1e-3); };
  };
  cs.push_back(C("rms_norm_last", [] { return TV{rn({4, 5}, 962) * 2.0 + 0.5, rn({5}, 963)}; }, RMS({5}, true)));
  cs.push_back(C("rms_norm_last2_3d", [] { return TV{rn({2, 3, 4}, 964), rn({3, 4}, 965)}; }, RMS({3, 4}, true)));
  cs.push_back(C("rms_norm_no_weight", [] { return TV{rn({3, 2, 6}, 966)}; }, RMS({6}, false)));
  cs.push_back(C("rms_norm_noncontig", [] { return TV{rn({5, 3, 4}, 967).transpose(0, 2), rn({5}, 968)}; }, RMS({5}, true)));
}

// scaled_dot_product_attention: the tiled kernel against finite differences. Sizes cross its 64-row blocks
// (70, 130), Tq != Tk, d != dv, causal, a broadcast bool mask, an additive mask, a custom scale, no heads dim, and
// q/k/v as the transposed views a model makes ([B, T, H, d] -> [B, H, T, d]).
inline void add_attention(std::vector<OpCase>& cs) {
  using Opts = SdpaOptions;
  auto A = [](Opts o) {
    return [o](const TV& in) { return scaled_dot_product_attention(in[0], in[1], in[2], o); };
  };
  cs.push_back(C("sdpa", [] { return TV{rn({2, 2, 5, 3}, 960), rn({2, 2, 6, 3}, 961), rn({2, 2, 6, 4}, 962)}; }, A({})));
  cs.push_back(C("sdpa_causal_blocks", [] { return TV{rn({1, 2, 70, 3}, 963), rn({1, 2, 70, 3}, 964), rn({1, 2, 70, 2}, 965)}; },
                 A({.causal = true})));
  cs.push_back(C("sdpa_bool_mask", [] { return TV{rn({2, 2, 5, 3}, 966), rn({2, 2, 6, 3}, 967), rn({2, 2, 6, 4}, 968)}; },
                 [](const TV& in) {
                   return scaled_dot_product_attention(in[0], in[1], in[2], {.mask = on(in[0], pattern({5, 6}))});
                 }));
  cs.push_back(C("sdpa_additive_mask_long_keys", [] { return TV{rn({2, 1, 3, 4}, 969), rn({2, 1, 130, 4}, 970), rn({2, 1, 130, 3}, 971)}; },
                 [](const TV& in) {
                   Tensor m = on(in[0], rn({2, 1, 1, 130}, 972)).to(in[0].dtype());  // the mask takes q's dtype
                   return scaled_dot_product_attention(in[0], in[1], in[2], {.mask = m, .scale = 0.7});
                 }));
  cs.push_back(C("sdpa_no_heads_dim", [] { return TV{rn({3, 5, 4}, 973), rn({3, 5, 4}, 974), rn({3, 5, 4}, 975)}; },
                 A({.causal = true, .scale = 0.3})));
  cs.push_back(C("sdpa_noncontig", [] {
                   return TV{rn({2, 5, 2, 3}, 976).transpose(1, 2), rn({2, 6, 2, 3}, 977).transpose(1, 2),
                             rn({2, 4, 6, 2}, 978).transpose(2, 3).transpose(1, 2).transpose(2, 3).slice(3, 0, 4, 2)};
                 }, A({})));
  // q, k, v cut from one packed projection [B, T, 3 d] (MultiheadAttention's self-attention): on the CPU their
  // gradients land side by side in one buffer, which split's backward then hands on as it is
  cs.push_back(C("sdpa_packed_qkv_split", [] { return TV{rn({2, 5, 12}, 979)}; }, F1([](const Tensor& x) {
                   const std::vector<Tensor> p = split(x, 4, -1);
                   auto heads = [](const Tensor& t) { return t.reshape({2, 5, 2, 2}).transpose(1, 2); };
                   return scaled_dot_product_attention(heads(p[0]), heads(p[1]), heads(p[2]), {.causal = true});
                 })));
}

// clang-format on

inline std::vector<OpCase> all_cases() {
  std::vector<OpCase> cs;
  add_arithmetic(cs);
  add_unary(cs);
  add_reductions(cs);
  add_linalg(cs);
  add_conv_pool(cs);
  add_norm(cs);
  add_shape(cs);
  add_pieces_and_pad(cs);
  add_indexing(cs);
  add_einsum(cs);
  add_losses(cs);
  add_views(cs);
  add_inplace(cs);
  add_methods(cs);
  add_composite(cs);
  add_attention(cs);
  return cs;
}

}  // namespace ember::test_ops
