// Tests scaled_dot_product_attention beyond its gradcheck rows (tests/support/op_cases.h): the tiled kernel
// against the plain composite softmax(q k^T * scale + mask) v (values and gradients, float32 and float64, sizes
// across its blocks), numbers from PyTorch, fully masked rows, memory that stays linear in T, the dropout path,
// the refusal of double backward, and every bad input.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ember/core/raw_ops.h"
#include "test_util.h"

using namespace ember;
using test::values;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The reference: the weights materialised, built of public ops (autograd differentiates it).
Tensor naive(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& o) {
  const double scale = o.scale != 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor s = matmul(q, k.transpose(-2, -1)) * scale;
  const Tensor ninf = full({}, kNegInf, {.dtype = s.dtype()});
  if (o.causal) {
    Tensor i = arange(q.size(-2)).unsqueeze(1), j = arange(k.size(-2)).unsqueeze(0);
    s = where(le(j, i), s, ninf);
  }
  if (o.mask.defined()) s = o.mask.dtype() == kBool ? where(o.mask, s, ninf) : s + o.mask;
  return matmul(softmax(s, -1), v);
}

struct Grads3 {
  Tensor y, gq, gk, gv;
};
// Output and gradients of sum(f(q, k, v) * w) for a fixed weighting w.
template <class F>
Grads3 run(const Tensor& q0, const Tensor& k0, const Tensor& v0, F f) {
  Tensor q = q0.detach().requires_grad_(true), k = k0.detach().requires_grad_(true),
         v = v0.detach().requires_grad_(true);
  Tensor y = f(q, k, v);
  Generator g(77);
  Tensor w = randn(y.shape(), {.dtype = y.dtype(), .generator = &g});
  sum(y * w).backward();
  return {y.detach(), q.grad(), k.grad(), v.grad()};
}

void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const double err = max(abs(a.to(kFloat64) - b.to(kFloat64))).item<double>();
  const double scale = std::max(1.0, max(abs(b.to(kFloat64))).item<double>());
  EXPECT_LE(err, tol * scale) << what;
}

struct Config {
  const char* name;
  int64_t b, h, tq, tk, d, dv;
  bool causal;
  int mask;  // 0 none, 1 bool [tq, tk], 2 additive [b, 1, tq, tk]
};

TEST(Attention, TiledEqualsTheCompositeInValueAndGradient) {
  const Config configs[] = {
      {"plain", 2, 3, 17, 17, 8, 8, false, 0},           {"causal_blocks", 1, 2, 150, 150, 16, 16, true, 0},
      {"cross_lengths", 2, 2, 70, 129, 8, 12, false, 0}, {"bool_mask", 1, 2, 65, 90, 8, 8, false, 1},
      {"additive_mask", 2, 2, 40, 64, 4, 4, false, 2},   {"causal_and_mask", 1, 1, 100, 100, 8, 8, true, 1},
      {"wide_head", 1, 1, 33, 33, 96, 80, true, 0},
  };
  for (const Config& c : configs) {
    for (DType dt : {kFloat32, kFloat64}) {
      manual_seed(5);
      const TensorOptions o{.dtype = dt};
      Tensor q = randn({c.b, c.h, c.tq, c.d}, o), k = randn({c.b, c.h, c.tk, c.d}, o),
             v = randn({c.b, c.h, c.tk, c.dv}, o);
      SdpaOptions opts{.causal = c.causal};
      if (c.mask == 1) opts.mask = gt(rand({c.tq, c.tk}), 0.3);
      if (c.mask == 2) opts.mask = randn({c.b, 1, c.tq, c.tk}, o);
      if (c.mask == 1) opts.mask.select(1, 0).fill_(true);  // no row entirely masked (tested on its own)
      const Grads3 t =
          run(q, k, v, [&](auto& a, auto& b, auto& cc) { return scaled_dot_product_attention(a, b, cc, opts); });
      const Grads3 r = run(q, k, v, [&](auto& a, auto& b, auto& cc) { return naive(a, b, cc, opts); });
      const double tol = dt == kFloat64 ? 1e-11 : 2e-5;
      const std::string what = std::string(c.name) + (dt == kFloat64 ? " f64" : " f32");
      expect_close(t.y, r.y, tol, what + " out");
      expect_close(t.gq, r.gq, 10 * tol, what + " dq");
      expect_close(t.gk, r.gk, 10 * tol, what + " dk");
      expect_close(t.gv, r.gv, 10 * tol, what + " dv");
    }
  }
}

// A head split (q, k, v as x.reshape({B, T, H, hd}).transpose(1, 2), as MultiheadAttention makes them): on the CPU
// the output and the gradients take that layout, so that merging the heads back is a view, and a gradient of the
// output that arrives as such a view is read in place. Values as with contiguous copies of everything; a mutation
// that ignores any one of the five strides (writes or reads rows as if contiguous) breaks them.
TEST(Attention, HeadSplitLayoutsStayInPlace) {
  for (DType dt : {kFloat32, kFloat64}) {
    for (bool causal : {false, true}) {
      manual_seed(9);
      const int64_t B = 2, T = 70, H = 3, hd = 8;
      const TensorOptions o{.dtype = dt};
      auto split = [&](const Tensor& x) { return x.reshape({B, T, H, hd}).transpose(1, 2); };
      const Tensor q = split(randn({B, T, H * hd}, o)), k = split(randn({B, T, H * hd}, o)),
                   v = split(randn({B, T, H * hd}, o));
      const Tensor gy = split(randn({B, T, H * hd}, o));  // the gradient as merge-heads' backward hands it over
      const raw::AttentionResult r = raw::attention(q, k, v, {}, 0, causal);
      EXPECT_TRUE(r.out.transpose(1, 2).is_contiguous()) << "out is not laid out as a head split";
      const raw::AttentionGrads g = raw::attention_backward(gy, q, k, v, r.out, r.lse, {}, 0, causal);
      for (const Tensor* t : {&g.q, &g.k, &g.v})
        EXPECT_TRUE(t->transpose(1, 2).is_contiguous()) << "a gradient is not laid out as its input";

      const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
      const raw::AttentionResult rc = raw::attention(qc, kc, vc, {}, 0, causal);
      EXPECT_TRUE(rc.out.is_contiguous());
      const raw::AttentionGrads gc =
          raw::attention_backward(gy.contiguous(), qc, kc, vc, rc.out, rc.lse, {}, 0, causal);
      const std::string what = std::string(dt == kFloat64 ? "f64" : "f32") + (causal ? " causal" : "");
      const double tol = dt == kFloat64 ? 1e-12 : 1e-5;
      expect_close(r.out, rc.out, tol, what + " out");
      expect_close(g.q, gc.q, tol, what + " dq");
      expect_close(g.k, gc.k, tol, what + " dk");
      expect_close(g.v, gc.v, tol, what + " dv");
      const Grads3 ref = run(qc, kc, vc, [&](auto& a, auto& b, auto& c) { return naive(a, b, c, {.causal = causal}); });
      const Grads3 got = run(q, k, v, [&](auto& a, auto& b, auto& c) {
        return scaled_dot_product_attention(a, b, c, {.causal = causal});
      });
      expect_close(got.y, ref.y, 10 * tol, what + " autograd out");
      expect_close(got.gq, ref.gq, 100 * tol, what + " autograd dq");
      expect_close(got.gk, ref.gk, 100 * tol, what + " autograd dk");
      expect_close(got.gv, ref.gv, 100 * tol, what + " autograd dv");
    }
  }
}

// q, k, v as the three pieces of one packed projection (split(x, d, -1) of x [B, T, 3 d], each a head split with
// rows of 3 d, as MultiheadAttention's self-attention makes them): read in place, the output a compact head split,
// and on the CPU the three gradients laid out the same way in one new buffer, so that split's backward copies
// nothing (the gradient of x is that buffer). Values as with contiguous copies.
TEST(Attention, PackedQkvGradientsShareOneBuffer) {
  for (bool causal : {false, true}) {
    manual_seed(12);
    const int64_t B = 2, T = 37, H = 3, hd = 8, d = H * hd;
    const TensorOptions o{.dtype = kFloat64};
    auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, hd}).transpose(1, 2); };
    const Tensor x = randn({B, T, 3 * d}, o);
    const std::vector<Tensor> p = split(x, d, -1);
    const Tensor q = heads(p[0]), k = heads(p[1]), v = heads(p[2]);
    const Tensor gy = heads(randn({B, T, d}, o));
    const raw::AttentionResult r = raw::attention(q, k, v, {}, 0, causal);
    EXPECT_TRUE(r.out.transpose(1, 2).is_contiguous()) << "out is not a compact head split";
    const raw::AttentionGrads g = raw::attention_backward(gy, q, k, v, r.out, r.lse, {}, 0, causal);
    for (const Tensor* t : {&g.k, &g.v}) {
      EXPECT_EQ(t->impl()->storage, g.q.impl()->storage) << "the gradients are not in one buffer";
      EXPECT_EQ(t->strides(), q.strides());
    }
    EXPECT_EQ(g.k.storage_offset(), g.q.storage_offset() + d);
    EXPECT_EQ(g.v.storage_offset(), g.q.storage_offset() + 2 * d);

    const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
    const raw::AttentionResult rc = raw::attention(qc, kc, vc, {}, 0, causal);
    const raw::AttentionGrads gc = raw::attention_backward(gy.contiguous(), qc, kc, vc, rc.out, rc.lse, {}, 0, causal);
    const std::string what = causal ? "causal" : "plain";
    expect_close(r.out, rc.out, 1e-12, what + " out");
    expect_close(g.q, gc.q, 1e-12, what + " dq");
    expect_close(g.k, gc.k, 1e-12, what + " dk");
    expect_close(g.v, gc.v, 1e-12, what + " dv");

    // through autograd: the gradient of x is the attention's buffer, with the values of the per-piece path
    const Tensor xl = x.clone().requires_grad_();
    const std::vector<Tensor> pl = split(xl, d, -1);
    const Tensor y = scaled_dot_product_attention(heads(pl[0]), heads(pl[1]), heads(pl[2]), {.causal = causal});
    const Tensor gx = autograd::grad({y}, {xl}, {gy})[0];
    EXPECT_TRUE(gx.is_contiguous());
    expect_close(gx,
                 cat({gc.q.transpose(1, 2).reshape({B, T, d}), gc.k.transpose(1, 2).reshape({B, T, d}),
                      gc.v.transpose(1, 2).reshape({B, T, d})},
                     -1),
                 1e-12, what + " dx");
  }
}

// Numbers from PyTorch 1.13 (Debian's python3-torch): q = sin(arange(24)/3).view(1, 2, 3, 4),
// k = cos(arange(32)/5).view(1, 2, 4, 4), v = arange(32).view(1, 2, 4, 4) / 10 - 1;
// torch.softmax(q @ k.transpose(-2, -1) / 2 + causal(-inf above the diagonal), -1) @ v, and the gradient of
// its sum with respect to q.
TEST(Attention, MatchesPyTorchNumbers) {
  Tensor q = sin(arange(24, {.dtype = kFloat64}) / 3).reshape({1, 2, 3, 4});
  Tensor k = cos(arange(32, {.dtype = kFloat64}) / 5).reshape({1, 2, 4, 4});
  Tensor v = (arange(32, {.dtype = kFloat64}) / 10 - 1).reshape({1, 2, 4, 4});
  Tensor ql = q.detach().requires_grad_(true);
  Tensor y = scaled_dot_product_attention(ql, k, v, {.causal = true});
  sum(y).backward();
  EXPECT_TENSOR_NEAR(y.select(1, 1).select(1, 2), Shape({1, 4}),
                     (std::vector<double>{1.2296843519, 1.3296843519, 1.4296843519, 1.5296843519}), 1e-9);
  EXPECT_TENSOR_NEAR(ql.grad().select(1, 0).select(1, 1), Shape({1, 4}),
                     (std::vector<double>{-0.0507503769, -0.0735862060, -0.0934883852, -0.1096634776}), 1e-9);
}

TEST(Attention, FullyMaskedRowsGiveZeroAndNoGradient) {
  manual_seed(9);
  Tensor q = randn({1, 1, 3, 4}), k = randn({1, 1, 5, 4}), v = randn({1, 1, 5, 4});
  Tensor mask = ones({3, 5}, {.dtype = kBool});
  mask.select(0, 1).fill_(false);  // row 1 sees no key
  Grads3 g =
      run(q, k, v, [&](auto& a, auto& b, auto& c) { return scaled_dot_product_attention(a, b, c, {.mask = mask}); });
  EXPECT_EQ(values(g.y.select(2, 1)), std::vector<double>(4, 0.0));
  EXPECT_EQ(values(g.gq.select(2, 1)), std::vector<double>(4, 0.0));
  EXPECT_TRUE(values(g.y.select(2, 0)) != std::vector<double>(4, 0.0));  // the other rows are not
  for (double x : values(g.gk)) EXPECT_FALSE(std::isnan(x));
}

// Under the causal rule, keys past the last query are seen by no query: their rows of dK and dV are zero, not
// whatever the buffers held. The kernel stores each gradient with its first product and zeroes only the rows no
// product reaches, so a first backward without the rule leaves nonzero gradients in the caching allocator's blocks
// of the same sizes for the second to reuse. Keys span three blocks (the last two past the 40 queries).
TEST(Attention, CausalKeysPastTheLastQueryHaveZeroGradients) {
  for (DType dt : {kFloat32, kFloat64}) {
    manual_seed(12);
    const TensorOptions o{.dtype = dt};
    Tensor q = randn({1, 2, 40, 8}, o), k = randn({1, 2, 150, 8}, o), v = randn({1, 2, 150, 8}, o);
    const auto sdpa = [](bool causal) {
      return [causal](auto& a, auto& b, auto& c) { return scaled_dot_product_attention(a, b, c, {.causal = causal}); };
    };
    Grads3 dirty = run(q, k, v, sdpa(false));
    ASSERT_GT(max(abs(dirty.gk.slice(2, 40, 150))).item<double>(), 0.0);
    dirty = Grads3{};
    const Grads3 g = run(q, k, v, sdpa(true));
    const std::string what = dt == kFloat64 ? "f64" : "f32";
    EXPECT_EQ(max(abs(g.gk.slice(2, 40, 150))).item<double>(), 0.0) << what;
    EXPECT_EQ(max(abs(g.gv.slice(2, 40, 150))).item<double>(), 0.0) << what;
    const Grads3 r = run(q, k, v, [](auto& a, auto& b, auto& c) { return naive(a, b, c, {.causal = true}); });
    const double tol = dt == kFloat64 ? 1e-10 : 2e-4;
    expect_close(g.gq, r.gq, tol, what + " dq");
    expect_close(g.gk, r.gk, tol, what + " dk");
    expect_close(g.gv, r.gv, tol, what + " dv");
  }
}

// The point of the tiling: forward + backward never hold a [T, T] matrix. At T = 2048 one head's scores are
// 16 MiB in float32; everything the op legitimately keeps (q, k, v, out, grads, lse) is under 3 MiB.
TEST(Attention, MemoryStaysLinearInT) {
  const int64_t T = 2048, d = 32;
  manual_seed(1);
  Tensor q = randn({1, 1, T, d}).requires_grad_(true), k = randn({1, 1, T, d}).requires_grad_(true),
         v = randn({1, 1, T, d}).requires_grad_(true);
  const size_t base = cpu_memory_stats().bytes_in_use;
  cpu_reset_peak_memory_stats();
  sum(scaled_dot_product_attention(q, k, v, {.causal = true})).backward();
  const size_t peak = cpu_memory_stats().peak_bytes_in_use - base;
  EXPECT_LT(peak, size_t{4} << 20) << "peak " << peak << " bytes";
  // and the composite does hold it (so the bound above means something)
  Tensor q2 = q.detach().requires_grad_(true);
  const size_t base2 = cpu_memory_stats().bytes_in_use;
  cpu_reset_peak_memory_stats();
  sum(naive(q2, k.detach(), v.detach(), {.causal = true})).backward();
  EXPECT_GT(cpu_memory_stats().peak_bytes_in_use - base2, size_t{16} << 20);
}

TEST(Attention, DropoutIsSeededAndKeepsTheExpectation) {
  manual_seed(2);
  Tensor q = randn({2, 2, 8, 4}), k = randn({2, 2, 8, 4}), v = randn({2, 2, 8, 4});
  Generator g1(11), g2(11);
  Tensor a, b;
  {
    GeneratorScope s(g1);
    a = scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5});
  }
  {
    GeneratorScope s(g2);
    b = scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5});
  }
  EXPECT_EQ(values(a), values(b));
  Tensor plain = scaled_dot_product_attention(q, k, v);
  EXPECT_GT(max(abs(a - plain)).item<double>(), 1e-3);
  // with v = 1 every output is (kept weights) / (1 - p): its mean over many rows is 1
  Tensor ones_v = ones({64, 4, 32, 1});
  Tensor y = scaled_dot_product_attention(randn({64, 4, 32, 4}), randn({64, 4, 32, 4}), ones_v, {.dropout_p = 0.25});
  EXPECT_NEAR(mean(y).item<double>(), 1.0, 0.02);
  // and gradients flow through it
  Tensor ql = q.detach().requires_grad_(true);
  sum(scaled_dot_product_attention(ql, k, v, {.dropout_p = 0.1})).backward();
  EXPECT_TRUE(ql.grad().defined());
}

// A create_graph pass differentiates the composite (the tiled kernel's backward keeps no graph): its first
// derivatives equal the fused backward's, and its second derivatives match finite differences of the first, with a
// causal rule and a boolean mask.
TEST(Attention, DoubleBackwardThroughTheComposite) {
  manual_seed(3);
  const Tensor mask = gt(randn({1, 1, 5, 6}, {.dtype = kFloat64}), -0.8);
  for (bool causal : {false, true}) {
    const SdpaOptions o{.causal = causal, .mask = causal ? Tensor() : mask};
    std::vector<Tensor> in = {randn({1, 2, 5, 3}, {.dtype = kFloat64}), randn({1, 2, 6, 3}, {.dtype = kFloat64}),
                              randn({1, 2, 6, 4}, {.dtype = kFloat64})};
    const Tensor wout = randn({1, 2, 5, 4}, {.dtype = kFloat64});
    auto first = [&](const std::vector<Tensor>& xs, bool create_graph) {
      EnableGradGuard on;
      std::vector<Tensor> leaves;
      for (const Tensor& x : xs) leaves.push_back(x.requires_grad() ? x : x.detach().requires_grad_(true));
      const Tensor y = sum(scaled_dot_product_attention(leaves[0], leaves[1], leaves[2], o) * wout);
      return autograd::grad({y}, leaves, {.create_graph = create_graph});
    };
    const std::vector<Tensor> fused = first(in, false), composite = first(in, true);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_TENSOR_NEAR(composite[i], fused[i].shape(), test::values(fused[i]), 1e-12, 1e-10) << "input " << i;
    auto flat_first = [&](const std::vector<Tensor>& xs) {
      std::vector<Tensor> parts;
      for (const Tensor& g : first(xs, true)) parts.push_back(g.reshape({-1}));
      return cat(parts);
    };
    EXPECT_TRUE(autograd::gradcheck(flat_first, in)) << (causal ? "causal" : "mask");
  }
}

TEST(Attention, BadInputsNameTheOpAndTheShapes) {
  Tensor q = randn({2, 2, 5, 4}), k = randn({2, 2, 6, 4}), v = randn({2, 2, 6, 3});
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, randn({2, 2, 6, 5}), v), ShapeError, "scaled_dot_product_attention",
                   "[2, 2, 5, 4]", "[2, 2, 6, 5]");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, randn({2, 2, 7, 3})), ShapeError, "key and value",
                   "[2, 2, 7, 3]");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, randn({2, 3, 6, 4}), v), ShapeError, "leading dims");
  EXPECT_THROW_MSG(scaled_dot_product_attention(randn({4}), randn({4}), randn({4})), ShapeError, "rank >= 2");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k.to(kFloat64), v), DTypeError, "one dtype", "float64");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q.to(kInt64), k.to(kInt64), v.to(kInt64)), DTypeError,
                   "floating-point");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.mask = ones({5, 7}, {.dtype = kBool})}), ShapeError,
                   "[5, 7]", "[2, 2, 5, 6]");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.mask = ones({5, 6}, {.dtype = kInt64})}), DTypeError, "mask",
                   "int64");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.dropout_p = 1.0}), ValueError, "dropout_p");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.scale = std::nan("")}), ValueError, "scale");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.mask = zeros({5, 6}).requires_grad_(true)}), ValueError,
                   "additive mask", "detach");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.mask = ones({5, 7}, {.dtype = kBool}), .dropout_p = 0.1}),
                   ShapeError, "scaled_dot_product_attention");
  EXPECT_THROW_MSG(scaled_dot_product_attention(Tensor(), k, v), Error, "query");
}

TEST(Attention, EmptyShapes) {
  Tensor y = scaled_dot_product_attention(randn({2, 0, 5, 4}), randn({2, 0, 6, 4}), randn({2, 0, 6, 3}));
  EXPECT_EQ(y.shape(), Shape({2, 0, 5, 3}));
  Tensor q = randn({1, 1, 3, 4}).requires_grad_(true);
  Tensor z = scaled_dot_product_attention(q, randn({1, 1, 0, 4}), randn({1, 1, 0, 2}));  // no keys: zeros
  EXPECT_EQ(values(z), std::vector<double>(6, 0.0));
  sum(z).backward();
  EXPECT_EQ(values(q.grad()), std::vector<double>(12, 0.0));
}

}  // namespace
