// Tests nn::MultiheadAttention and nn::TransformerBlock: numbers from torch.nn.MultiheadAttention with the same
// weights, the causal rule (no position sees a later one), the fused self-attention projection against the
// separate one, parameter names and counts, a float64 gradcheck of a block, dropout in train/eval, weight tying
// (one tensor in parameters(), in the optimiser and in the safetensors file), and bad input.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"

using namespace ember;
using test::values;

namespace {

std::map<std::string, Tensor> params_of(const nn::Module& m) {
  std::map<std::string, Tensor> out;
  for (auto& [n, t] : m.named_parameters()) out[n] = t;
  return out;
}

bool allclose(const Tensor& a, const Tensor& b, double atol) {
  const std::vector<double> x = values(a), y = values(b);
  if (a.shape() != b.shape()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::abs(x[i] - y[i]) <= atol)) return false;
  return true;
}

// The weights of the PyTorch reference below.
void set_reference_weights(nn::MultiheadAttention& m, int64_t d) {
  NoGradGuard g;
  auto p = params_of(m);
  const TensorOptions f64{.dtype = kFloat64};
  p["in_proj_weight"].copy_(sin(arange(3 * d * d, f64) * 0.37).reshape({3 * d, d}) * 0.5);
  p["in_proj_bias"].copy_(cos(arange(3 * d, f64)) * 0.1);
  p["out_proj.weight"].copy_(cos(arange(d * d, f64) * 0.21).reshape({d, d}) * 0.4);
  p["out_proj.bias"].copy_(arange(d, f64) * 0.05 - 0.1);
}

// torch 1.13 (Debian's python3-torch): torch.nn.MultiheadAttention(4, 2, batch_first=True).double() with the
// weights above, x = sin(arange(24) * 0.5).view(2, 3, 4); m(x, x, x) and with attn_mask = triu(ones(3, 3), 1).
TEST(MultiheadAttention, MatchesPyTorch) {
  nn::MultiheadAttention m(4, 2);
  m.to(kFloat64);
  set_reference_weights(m, 4);
  Tensor x = sin(arange(24, {.dtype = kFloat64}) * 0.5).reshape({2, 3, 4});
  const std::vector<double> plain = {
      -0.06440643694565645, 0.04353656186793624,  0.08927079275336265,  0.0756333093245701,   -0.08649230796530047,
      0.008253805307144625, 0.0642568069779328,   0.07752425462291636,  -0.3540568500825131,  -0.2712613303541515,
      -0.0413105755326654,  0.2161147833898243,   -0.0964777411719724,  0.004401428547249474, 0.06909960362787472,
      0.08784140485670164,  -0.07086852920522473, 0.02323519598584199,  0.06863207093272905,  0.06838351603035882,
      -0.34754688782169063, -0.27537189172609605, -0.053307831611712334, 0.2042098998720439};
  const std::vector<double> causal = {
      -0.01330806505024977, 0.13558597373670273,  0.16105154198387078,  0.07940586090060611,  -0.04485638405733456,
      0.05174123411580106,  0.08067336731236403,  0.05595171331708752,  -0.3540568500825131,  -0.2712613303541515,
      -0.0413105755326654,  0.2161147833898243,   -0.0648842339235683,  0.09185875145047113,  0.15425512015047088,
      0.1140603653417764,   -0.04786719583787075, 0.0491665891312313,   0.08024721945902205,  0.05795748260082159,
      -0.34754688782169063, -0.27537189172609605, -0.053307831611712334, 0.2042098998720439};
  EXPECT_TENSOR_NEAR(m(x), Shape({2, 3, 4}), plain, 1e-12);
  EXPECT_TENSOR_NEAR(m.attend(x, x, x, {.causal = true}), Shape({2, 3, 4}), causal, 1e-12);
  // an explicit bool mask (true = attend) is the same thing
  Tensor keep = le(arange(3).unsqueeze(0), arange(3).unsqueeze(1));
  EXPECT_TENSOR_NEAR(m.attend(x, x, x, {.mask = keep}), Shape({2, 3, 4}), causal, 1e-12);
  // separate query/key/value tensors take the per-part projections: the same numbers
  EXPECT_TENSOR_NEAR(m.attend(x.clone(), x.clone(), x.clone()), Shape({2, 3, 4}), plain, 1e-12);
  // unbatched [T, d]
  EXPECT_TENSOR_NEAR(m(x.select(0, 1)), Shape({3, 4}), std::vector<double>(plain.begin() + 12, plain.end()), 1e-12);
}

// Self-attention (one tensor as query, key and value) takes one packed [B, T, 3 d] product cut in three; separate
// tensors take each part's rows of the in-projection. The same numbers either way, gradients too.
TEST(MultiheadAttention, PackedSelfAttentionGradientsMatchThePerPartPath) {
  for (bool causal : {false, true}) {
    manual_seed(21);
    nn::MultiheadAttention m(12, 3);
    m.to(kFloat64);
    const Tensor x = randn({2, 9, 12}, {.dtype = kFloat64});
    const Tensor gy = randn({2, 9, 12}, {.dtype = kFloat64});
    std::vector<Tensor> params;
    for (auto& [n, t] : m.named_parameters()) params.push_back(t);
    auto grads = [&](bool packed) {
      const Tensor xl = x.clone().requires_grad_();
      const Tensor y = packed ? m.attend(xl, xl, xl, {.causal = causal})
                              : m.attend(xl, xl.clone(), xl.clone(), {.causal = causal});  // three tensors
      std::vector<Tensor> wrt = params;
      wrt.push_back(xl);
      std::vector<Tensor> g = autograd::grad({y}, wrt, {gy});
      g.push_back(y);
      return g;
    };
    const std::vector<Tensor> packed = grads(true), per_part = grads(false);
    ASSERT_EQ(packed.size(), per_part.size());
    for (size_t i = 0; i < packed.size(); ++i)
      EXPECT_LT(max(abs(packed[i] - per_part[i])).item<double>(), 1e-12)
          << "gradient " << i << (causal ? " causal" : "");
  }
}

TEST(MultiheadAttention, NamesAndShapesAsPyTorch) {
  nn::MultiheadAttention m(8, 2);
  auto p = params_of(m);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p["in_proj_weight"].shape(), Shape({24, 8}));
  EXPECT_EQ(p["in_proj_bias"].shape(), Shape({24}));
  EXPECT_EQ(p["out_proj.weight"].shape(), Shape({8, 8}));
  EXPECT_EQ(values(p["in_proj_bias"]), std::vector<double>(24, 0.0));
  nn::MultiheadAttention nb(8, 2, {.bias = false});
  EXPECT_EQ(nb.parameters().size(), 2u);
  // cross-attention: Tq != Tk
  Tensor y = m.attend(randn({2, 5, 8}), randn({2, 7, 8}), randn({2, 7, 8}));
  EXPECT_EQ(y.shape(), Shape({2, 5, 8}));
}

// separate_qkv: Dense children q_proj, k_proj, v_proj with Hugging Face's names; loaded with the packed module's
// rows, the same numbers as the packed one (and so as PyTorch's).
TEST(MultiheadAttention, SeparateProjectionsMatchThePackedOne) {
  nn::MultiheadAttention packed(4, 2), sep(4, 2, {.separate_qkv = true});
  packed.to(kFloat64);
  sep.to(kFloat64);
  set_reference_weights(packed, 4);
  auto pp = params_of(packed), ps = params_of(sep);
  ASSERT_EQ(ps.size(), 8u);
  for (const char* n : {"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias", "v_proj.weight", "v_proj.bias",
                        "out_proj.weight", "out_proj.bias"})
    EXPECT_EQ(ps.count(n), 1u) << n;
  {
    NoGradGuard g;
    const char* parts[] = {"q_proj", "k_proj", "v_proj"};
    for (int i = 0; i < 3; ++i) {
      ps[std::string(parts[i]) + ".weight"].copy_(pp["in_proj_weight"].slice(0, 4 * i, 4 * (i + 1)));
      ps[std::string(parts[i]) + ".bias"].copy_(pp["in_proj_bias"].slice(0, 4 * i, 4 * (i + 1)));
    }
    ps["out_proj.weight"].copy_(pp["out_proj.weight"]);
    ps["out_proj.bias"].copy_(pp["out_proj.bias"]);
  }
  Tensor x = sin(arange(24, {.dtype = kFloat64}) * 0.5).reshape({2, 3, 4});
  EXPECT_TRUE(allclose(sep(x), packed(x), 1e-12));
  // a padding mask [B, 1, 1, T] through forward(x, mask): the masked key changes nothing
  Tensor keep = tensor<bool>({true, true, false, true, true, true}, {2, 1, 1, 3});
  Tensor y = sep.forward(x, keep), x2 = x.clone();
  {
    NoGradGuard g;
    x2.select(0, 0).select(0, 2).fill_(100.0);  // batch 0's padded position
  }
  EXPECT_TRUE(allclose(sep.forward(x2, keep).select(0, 0).slice(0, 0, 2), y.select(0, 0).slice(0, 0, 2), 1e-12));
  EXPECT_NE(sep.repr().find("separate_qkv"), std::string::npos);
  // A mask of the wrong key length names the mask, the shape it must have and the module it reached.
  struct Masked : nn::Module {
    nn::MultiheadAttention attn;
    explicit Masked(nn::MultiheadAttention a) : attn(std::move(a)) { register_module("attn", attn); }
    Tensor forward(const Tensor& x, const Tensor& mask) override { return attn(x, mask); }
  } masked(sep);
  EXPECT_THROW_MSG(masked(x, ones({2, 1, 1, 7}, {.dtype = kBool})), ShapeError,
                   "scaled_dot_product_attention: the mask [2, 1, 1, 7]", "scores' shape [2, 2, 3, 3]",
                   "a padding mask is [batch, 1, 1, key length] = [2, 1, 1, 3]", "in module 'attn'");
}

// Post-norm (norm_first = false, BERT's): ln1(x + attn(x)), then ln2(h + mlp(h)), with the children's names of the
// pre-norm block; the LayerNorms take layer_norm_eps.
TEST(TransformerBlock, PostNormIsTheOriginalTransformersOrder) {
  manual_seed(81);
  nn::TransformerBlock block(8, 2, {.norm_first = false, .layer_norm_eps = 1e-12, .separate_qkv = true});
  block.to(kFloat64);
  std::map<std::string, std::shared_ptr<nn::Module>> c;
  for (auto& [n, m] : block.named_children()) c[n] = m;
  ASSERT_TRUE(c.count("ln1") && c.count("attn") && c.count("ln2") && c.count("mlp"));
  Tensor x = randn({2, 5, 8}, {.dtype = kFloat64});
  const nn::Module &ln1 = *c["ln1"], &attn = *c["attn"], &ln2 = *c["ln2"], &mlp = *c["mlp"];
  Tensor h = ln1(x + attn(x));
  EXPECT_TRUE(allclose(block(x), ln2(h + mlp(h)), 1e-12));
  EXPECT_EQ(ln1.repr(), "LayerNorm(8, eps = 1e-12)");
  EXPECT_NE(block.repr().find("post-norm"), std::string::npos);
  // a mask reaches the attention: an all-true mask is no mask
  Tensor all = ones({2, 1, 1, 5}, {.dtype = kBool});
  EXPECT_TRUE(allclose(block.forward(x, all), block(x), 1e-12));
}

// A causal block: changing positions after t leaves outputs up to t as they were.
TEST(TransformerBlock, CausalOutputsIgnoreTheFuture) {
  manual_seed(4);
  nn::TransformerBlock block(16, 4, {.causal = true});
  Tensor x = randn({2, 10, 16});
  Tensor y = block(x);
  Tensor x2 = x.clone();
  {
    NoGradGuard g;
    x2.slice(1, 6, 10).copy_(randn({2, 4, 16}));
  }
  Tensor y2 = block(x2);
  EXPECT_EQ(values(y.slice(1, 0, 6)), values(y2.slice(1, 0, 6)));
  EXPECT_NE(values(y.slice(1, 6, 10)), values(y2.slice(1, 6, 10)));
  // without the causal rule, every position sees the change
  nn::TransformerBlock open(16, 4);
  EXPECT_NE(values(open(x).slice(1, 0, 6)), values(open(x2).slice(1, 0, 6)));
}

// The residual is added into a sublayer's output in place only where nothing else can see that tensor: the block
// equals its parts composed out of place (output and input gradient, the same bits), pre- and post-norm; a hook on
// the attention and one on the MLP's last layer keep the sublayer's own outputs (adding in place regardless of
// hooks fails here), and the result is the same with them.
TEST(TransformerBlock, ResidualSumsLeaveObservedOutputsAlone) {
  for (bool pre : {true, false}) {
    manual_seed(7);
    nn::TransformerBlock block(16, 4, {.norm_first = pre});
    std::map<std::string, nn::Module*> part;
    for (auto& [n, m] : block.named_modules()) part[n] = m;
    nn::Module &ln1 = *part.at("ln1"), &ln2 = *part.at("ln2"), &attn = *part.at("attn"), &mlp = *part.at("mlp");
    const Tensor x0 = randn({2, 6, 16}), w = randn({2, 6, 16});
    auto composed = [&](const Tensor& x) {
      if (pre) {
        Tensor h = x + attn(ln1(x));
        return h + mlp(ln2(h));
      }
      Tensor h = ln1(x + attn(x));
      return ln2(h + mlp(h));
    };
    auto run = [&](auto&& f) {
      Tensor x = x0.detach().requires_grad_();
      Tensor y = f(x);
      return std::pair{y.detach(), autograd::grad({sum(y * w)}, {x})[0]};
    };
    const auto [ref_y, ref_g] = run(composed);
    const auto [y, g] = run([&](const Tensor& x) { return block(x); });
    EXPECT_EQ(values(y), values(ref_y)) << pre;
    EXPECT_EQ(values(g), values(ref_g)) << pre;

    Tensor seen_attn, seen_mlp;
    nn::HookHandle h1 =
        attn.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) { seen_attn = out; });
    nn::HookHandle h2 =
        part.at("mlp.1")->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) { seen_mlp = out; });
    const Tensor hooked = block(x0);
    h1.remove();
    h2.remove();
    EXPECT_EQ(values(hooked), values(ref_y)) << pre;
    const Tensor a = attn(pre ? ln1(x0) : x0);
    EXPECT_EQ(values(seen_attn), values(a)) << pre;
    const Tensor h = pre ? x0 + a : ln1(x0 + a);
    EXPECT_EQ(values(seen_mlp), values(mlp(pre ? ln2(h) : h))) << pre;
  }
  // Under autocast the sublayers give bfloat16 and the residual stream is float32: the sum promotes, as x + y.
  manual_seed(8);
  nn::TransformerBlock block(16, 4);
  const Tensor x = randn({2, 6, 16});
  amp::AutocastGuard ac(kBFloat16);
  EXPECT_EQ(block(x).dtype(), kFloat32);
}

TEST(TransformerBlock, ParametersAndGradcheck) {
  manual_seed(5);
  nn::TransformerBlock block(8, 2, {.mlp_ratio = 2});
  // ln1 2d, attn 4d^2 + 4d, ln2 2d, mlp 2 r d^2 + r d + d
  const int64_t d = 8, r = 2;
  EXPECT_EQ(block.num_parameters(), 2 * d + 4 * d * d + 4 * d + 2 * d + 2 * r * d * d + r * d + d);
  std::vector<std::string> names;
  for (auto& [n, t] : block.named_parameters()) names.push_back(n);
  EXPECT_EQ(names.front(), "ln1.weight");
  EXPECT_EQ(names[2], "attn.in_proj_weight");
  EXPECT_EQ(names.back(), "mlp.1.bias");
  block.to(kFloat64);
  Tensor x = randn({2, 5, 8}, {.dtype = kFloat64});
  // the gradient with respect to the input and, through a parameter, to the weights
  Tensor w = block.named_parameters()[2].second;
  auto f = [&](const std::vector<Tensor>& in) { return block(in[0]); };
  EXPECT_TRUE(autograd::gradcheck(f, {x}));
  sum(block(x)).backward();
  EXPECT_TRUE(w.grad().defined());
  EXPECT_GT(max(abs(w.grad())).item<double>(), 0.0);
}

TEST(TransformerBlock, DropoutOnlyWhenTraining) {
  manual_seed(6);
  nn::TransformerBlock block(16, 2, {.dropout = 0.3});
  Tensor x = randn({2, 6, 16});
  EXPECT_NE(values(block(x)), values(block(x)));
  block.eval();
  EXPECT_EQ(values(block(x)), values(block(x)));
}

// A language-model head that reuses the embedding matrix (GPT-2's tying).
struct TiedLM : nn::Module {
  nn::Embedding emb{10, 6};
  Tensor head;
  TiedLM() {
    register_module("emb", emb);
    head = register_parameter("head_weight", emb.weight());  // the same tensor under a second name
  }
  Tensor forward(const Tensor& idx) override { return matmul(emb(idx), head.t()); }
};

TEST(WeightTying, OneTensorInParametersOptimiserAndFile) {
  manual_seed(7);
  TiedLM m;
  EXPECT_EQ(m.parameters().size(), 1u);
  // the first name met, as PyTorch: a module's own parameters before its children's
  EXPECT_EQ(m.named_parameters()[0].first, "head_weight");
  EXPECT_EQ(m.num_parameters(), 60);
  // the gradient is the sum of both uses
  Tensor idx = tensor<int64_t>({1, 3, 3}, {3});
  sum(m(idx) * arange(30, {.dtype = kFloat32}).reshape({3, 10})).backward();
  Tensor g = m.emb.weight().grad().clone();
  EXPECT_GT(max(abs(g.select(0, 0))).item<double>(), 0.0);  // row 0: used by the head only
  EXPECT_GT(max(abs(g.select(0, 3) - g.select(0, 0))).item<double>(), 0.0);
  // one step moves the one tensor, once
  optim::SGD opt(m.parameters(), {.lr = 0.1});
  Tensor before = m.emb.weight().clone();
  opt.step();
  EXPECT_TENSOR_NEAR(m.emb.weight(), before.shape(), values(before - g * 0.1), 1e-6);
  EXPECT_TRUE(m.head.is_same(m.emb.weight()));
  // saved once, under the first name; loading restores the shared tensor
  const std::string path = ::testing::TempDir() + "tied.safetensors";
  nn::save(m, path);
  auto file = nn::load_tensors(path);
  ASSERT_EQ(file.size(), 1u);
  EXPECT_EQ(file[0].first, "head_weight");
  TiedLM fresh;
  nn::load(fresh, path);
  EXPECT_EQ(values(fresh.emb.weight()), values(m.emb.weight()));
  EXPECT_TRUE(fresh.head.is_same(fresh.emb.weight()));
  // a file that holds both names (PyTorch's state_dict) loads too
  nn::save_tensors(path, m.state_dict());
  nn::load(fresh, path);
  EXPECT_EQ(values(fresh.head), values(m.emb.weight()));
  std::remove(path.c_str());
}

TEST(Transformer, BadInput) {
  EXPECT_THROW_MSG(nn::MultiheadAttention(10, 3), ValueError, "MultiheadAttention", "10", "3");
  EXPECT_THROW_MSG(nn::TransformerBlock(8, 2, {.mlp_ratio = 0}), ValueError, "mlp_ratio");
  nn::MultiheadAttention m(8, 2);
  EXPECT_THROW_MSG(m(randn({2, 3, 7})), ShapeError, "MultiheadAttention", "[2, 3, 7]");
  EXPECT_THROW_MSG(m(randn({8})), ShapeError, "MultiheadAttention");
  EXPECT_THROW_MSG(m.attend(randn({2, 3, 8}), randn({3, 4, 8}), randn({3, 4, 8})), ShapeError, "batch size");
}

}  // namespace
