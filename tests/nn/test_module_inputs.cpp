// Modules with several inputs and outputs (issue 34, item 2): forward(a, b) .. forward(a, b, c, d) called as
// m(a, b, ...), forward_many called as m.call({...}); hooks of both forms, full backward hooks with one gradient
// per input, nn::summary, memory plans' per-module attribution, checkpointing and the messages of forms a module
// does not define.
#include "ember/autograd/checkpoint.h"
#include "ember/core/memory_plan.h"
#include "ember/nn/summary.h"
#include "test_util.h"

using namespace ember;

namespace {

// y = fc(a) * b: the second input scales the first's projection (as a mask would).
struct Gated : nn::Module {
  nn::Dense fc{3, 2};
  Gated() {
    register_module("fc", fc);
    NoGradGuard g;
    fc.weight().copy_(tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
    fc.bias().copy_(tensor<float>({0.5f, -0.5f}, {2}));
  }
  Tensor forward(const Tensor& a, const Tensor& b) override { return fc(a) * b; }
};

struct Sum3 : nn::Module {
  Tensor forward(const Tensor& a, const Tensor& b, const Tensor& c) override { return a + b * 2.0 + c * 3.0; }
};
struct Sum4 : nn::Module {
  Tensor forward(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) override { return a + b + c + d; }
};

// Two outputs: the sum and the product of its inputs.
struct SumAndProduct : nn::Module {
  std::vector<Tensor> forward_many(const std::vector<Tensor>& in) override { return {in[0] + in[1], in[0] * in[1]}; }
};

// A model of several inputs made of modules of several inputs: ids [B, T] and a padding mask [B, T].
struct TinyEncoder : nn::Module {
  nn::Embedding emb{20, 8};
  nn::TransformerBlock block{8, 2, {.norm_first = false}};
  TinyEncoder() {
    register_module("emb", emb);
    register_module("block", block);
  }
  Tensor forward(const Tensor& ids, const Tensor& mask) override {
    Tensor keep = mask.to(kBool).reshape({mask.size(0), 1, 1, mask.size(1)});
    return block(emb(ids), keep);
  }
};

Tensor ids_2x4() { return tensor<int64_t>({1, 2, 3, 0, 4, 5, 0, 0}, {2, 4}); }
Tensor mask_2x4() { return tensor<float>({1, 1, 1, 0, 1, 1, 0, 0}, {2, 4}); }

}  // namespace

TEST(ModuleInputs, CalledWithTwoThreeAndFourTensors) {
  Gated g;
  const Tensor a = tensor<float>({1, -1, 2}, {1, 3});
  const Tensor b = tensor<float>({2, -1}, {1, 2});
  EXPECT_TENSOR_NEAR(g(a, b), Shape({1, 2}), std::vector<double>({11.0, -10.5}));
  Sum3 s3;
  EXPECT_TENSOR_NEAR(s3(ones({2}), ones({2}), ones({2})), Shape({2}), std::vector<double>({6, 6}));
  Sum4 s4;
  EXPECT_TENSOR_NEAR(s4(ones({2}), ones({2}), ones({2}), full({2}, 2.0)), Shape({2}), std::vector<double>({5, 5}));
  // call() reaches the same forward, as a list of one output.
  const std::vector<Tensor> out = g.call({a, b});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TENSOR_NEAR(out[0], Shape({1, 2}), std::vector<double>({11.0, -10.5}));
}

TEST(ModuleInputs, SeveralOutputsThroughCall) {
  SumAndProduct m;
  const std::vector<Tensor> out = m.call({full({2}, 3.0), full({2}, 4.0)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TENSOR_NEAR(out[0], Shape({2}), std::vector<double>({7, 7}));
  EXPECT_TENSOR_NEAR(out[1], Shape({2}), std::vector<double>({12, 12}));
  // m(a, b) wants one output: the message says how to get both.
  EXPECT_THROW_MSG(m(ones({2}), ones({2})), ValueError, "SumAndProduct's forward_many returned 2 outputs; call it as");
}

TEST(ModuleInputs, FormsAModuleDoesNotDefineSayWhichToOverride) {
  Gated g;
  EXPECT_THROW_MSG(g(ones({1, 3})), Error,
                   "Gated has no forward() of 1 tensor; override Tensor forward(const Tensor&)");
  EXPECT_THROW_MSG(g(ones({1}), ones({1}), ones({1})), Error,
                   "Gated has no forward() of 3 tensors; override Tensor forward(const Tensor&, const Tensor&, const "
                   "Tensor&)");
  EXPECT_THROW_MSG(g.call({}), ValueError, "Gated called with 0 inputs; override std::vector<Tensor> forward_many");
  EXPECT_THROW_MSG(g.call({ones({1}), ones({1}), ones({1}), ones({1}), ones({1})}), ValueError, "called with 5 inputs");
  // A single-input module keeps its one form, and is not reached by two tensors.
  nn::Dense d(3, 2);
  EXPECT_THROW_MSG(d(ones({1, 3}), ones({1, 3})), Error, "Dense has no forward() of 2 tensors");
  EXPECT_EQ(d.call({ones({1, 3})})[0].shape(), Shape({1, 2}));
}

TEST(ModuleInputs, OneTensorHooksSeeTheFirstInputAndOutput) {
  Gated g;
  const Tensor a = tensor<float>({1, -1, 2}, {1, 3});
  const Tensor b = tensor<float>({2, -1}, {1, 2});
  int pre = 0, post = 0;
  g.register_forward_pre_hook([&](nn::Module&, const Tensor& in) {
    ++pre;
    EXPECT_TRUE(in.is_same(a));
  });
  // Replacing the first input: forward sees 2a.
  g.register_forward_pre_hook([](nn::Module&, const Tensor& in) -> std::optional<Tensor> { return in * 2.0; });
  g.register_forward_hook([&](nn::Module&, const Tensor& in, const Tensor& out) {
    ++post;
    EXPECT_TENSOR_NEAR(in, Shape({1, 3}), std::vector<double>({2, -2, 4}));
    EXPECT_TENSOR_NEAR(out, Shape({1, 2}), std::vector<double>({21, -21.5}));
  });
  EXPECT_TENSOR_NEAR(g(a, b), Shape({1, 2}), std::vector<double>({21, -21.5}));
  EXPECT_EQ(pre, 1);
  EXPECT_EQ(post, 1);
}

TEST(ModuleInputs, ListHooksSeeAndReplaceEveryInputAndOutput) {
  Gated g;
  const Tensor a = tensor<float>({1, -1, 2}, {1, 3});
  const Tensor b = tensor<float>({2, -1}, {1, 2});
  std::vector<Shape> seen;
  g.register_forward_pre_hook([&](nn::Module&, const std::vector<Tensor>& in) {
    for (const Tensor& t : in) seen.push_back(t.shape());
  });
  nn::HookHandle flip =
      g.register_forward_pre_hook([](nn::Module&, const std::vector<Tensor>& in) -> std::optional<std::vector<Tensor>> {
        return std::vector<Tensor>{in[0], in[1] * -1.0};
      });
  g.register_forward_hook([](nn::Module&, const std::vector<Tensor>& in,
                             const std::vector<Tensor>& out) -> std::optional<std::vector<Tensor>> {
    EXPECT_EQ(in.size(), 2u);
    EXPECT_EQ(out.size(), 1u);
    return std::vector<Tensor>{out[0] + 1.0};
  });
  EXPECT_TENSOR_NEAR(g(a, b), Shape({1, 2}), std::vector<double>({-10, 11.5}));
  EXPECT_EQ(seen, (std::vector<Shape>{{1, 3}, {1, 2}}));
  flip.remove();
  // A replacement list of another length is refused, naming the module.
  g.register_forward_pre_hook([](nn::Module&, const std::vector<Tensor>& in) -> std::optional<std::vector<Tensor>> {
    return std::vector<Tensor>{in[0]};
  });
  EXPECT_THROW_MSG(g(a, b), ValueError,
                   "register_forward_pre_hook: the hook of Gated returned 1 inputs for a call with 2");
  // A list hook on a module with several outputs sees them all.
  SumAndProduct m;
  size_t outputs = 0;
  m.register_forward_hook(
      [&](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>& out) { outputs = out.size(); });
  (void)m.call({ones({2}), ones({2})});
  EXPECT_EQ(outputs, 2u);
}

// d(sum(fc(a) * b))/da = W^T b, d/db = fc(a): one gradient per input, in order.
TEST(ModuleInputs, BackwardHooksGetOneGradientPerInput) {
  Gated g;
  Tensor a = tensor<float>({1, -1, 2}, {1, 3}).requires_grad_();
  Tensor b = tensor<float>({2, -1}, {1, 2}).requires_grad_();
  std::vector<Tensor> got_in, got_out;
  g.register_full_backward_hook([&](nn::Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>& go) {
    got_in = gi;
    got_out = go;
  });
  g(a, b).sum().backward();
  ASSERT_EQ(got_in.size(), 2u);
  ASSERT_EQ(got_out.size(), 1u);
  EXPECT_TENSOR_NEAR(got_out[0], Shape({1, 2}), std::vector<double>({1, 1}));
  EXPECT_TENSOR_NEAR(got_in[0], Shape({1, 3}), std::vector<double>({-2, -1, 0}));  // W^T [2, -1]
  EXPECT_TENSOR_NEAR(got_in[1], Shape({1, 2}), std::vector<double>({5.5, 10.5}));  // fc(a)
  EXPECT_TENSOR_NEAR(a.grad(), Shape({1, 3}), std::vector<double>({-2, -1, 0}));

  // Only b requires grad: a's entry is undefined, and a replacement for b reaches b.grad.
  Gated h;
  const Tensor a2 = tensor<float>({1, -1, 2}, {1, 3});
  Tensor b2 = tensor<float>({2, -1}, {1, 2}).requires_grad_();
  h.register_full_backward_hook(
      [](nn::Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>&) -> std::optional<std::vector<Tensor>> {
        EXPECT_FALSE(gi[0].defined());
        return std::vector<Tensor>{Tensor(), gi[1] * 10.0};
      });
  h(a2, b2).sum().backward();
  EXPECT_TENSOR_NEAR(b2.grad(), Shape({1, 2}), std::vector<double>({55, 105}));

  // A gradient for the input that does not require grad is refused, naming which input.
  Gated k;
  Tensor b3 = tensor<float>({2, -1}, {1, 2}).requires_grad_();
  k.register_full_backward_hook(
      [](nn::Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>&) -> std::optional<std::vector<Tensor>> {
        return std::vector<Tensor>{ones({1, 3}), gi[1]};
      });
  EXPECT_THROW_MSG(k(a2, b3).sum().backward(), ValueError,
                   "returned a gradient for input 0, which does not require grad");
}

TEST(ModuleInputs, BackwardHooksOfSeveralOutputs) {
  SumAndProduct m;
  Tensor a = full({2}, 3.0).requires_grad_();
  Tensor b = full({2}, 4.0).requires_grad_();
  std::vector<Tensor> go;
  m.register_full_backward_hook([&](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>& g) { go = g; });
  const std::vector<Tensor> out = m.call({a, b});
  out[1].sum().backward();  // the sum is unused: its gradient is undefined
  ASSERT_EQ(go.size(), 2u);
  EXPECT_FALSE(go[0].defined());
  EXPECT_TENSOR_NEAR(go[1], Shape({2}), std::vector<double>({1, 1}));
  EXPECT_TENSOR_NEAR(a.grad(), Shape({2}), std::vector<double>({4, 4}));

  // The *last* output unused: its grad_output entry is undefined too (this crashed: the engine handed the node
  // one gradient for its two outputs, and the hook's node read the second).
  a.set_grad({});
  const std::vector<Tensor> out2 = m.call({a, b});
  out2[0].sum().backward();
  ASSERT_EQ(go.size(), 2u);
  EXPECT_TENSOR_NEAR(go[0], Shape({2}), std::vector<double>({1, 1}));
  EXPECT_FALSE(go[1].defined());
  EXPECT_TENSOR_NEAR(a.grad(), Shape({2}), std::vector<double>({1, 1}));
}

TEST(ModuleInputs, SummaryTakesExampleInputs) {
  manual_seed(0);
  TinyEncoder enc;
  const std::string s = nn::summary(enc, {ids_2x4(), mask_2x4()});
  std::printf("%s", s.c_str());
  for (const char* want : {"(model)", "TinyEncoder", "emb", "block", "block.attn", "MultiheadAttention", "[2, 4, 8]",
                           "Input [2, 4] int64, [2, 4] float32"})
    EXPECT_NE(s.find(want), std::string::npos) << want;
  EXPECT_EQ(s.find("(not called)"), std::string::npos) << s;  // the block's attention was called through block(x, m)
  for (const Tensor& p : enc.parameters()) EXPECT_FALSE(p.grad().defined());
  // Several outputs: each shape.
  SumAndProduct m;
  const std::string t = nn::summary(m, {ones({2, 3}), ones({2, 3})});
  EXPECT_NE(t.find("[2, 3], [2, 3]"), std::string::npos) << t;
  EXPECT_THROW_MSG((void)nn::summary(m, std::vector<Tensor>{}), ValueError, "nn::summary: no example inputs given");
  EXPECT_THROW_MSG((void)nn::summary(m, {ones({2}), Tensor()}), ValueError, "example input 1 is an undefined tensor");
}

// A plan made of modules called with two inputs attributes their bytes to their paths.
TEST(ModuleInputs, MemoryPlansAttributeByModulePath) {
  manual_seed(1);
  TinyEncoder enc;
  const memory::Plan p = memory::plan(Device::cpu(), [&] {
    Tensor y = enc(ids_2x4(), mask_2x4());
    y.sum().backward();
  });
  std::vector<std::string> paths;
  for (const auto& [path, bytes] : p.by_module) paths.push_back(path);
  auto has_prefix = [&](const std::string& prefix) {
    return std::any_of(paths.begin(), paths.end(), [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
  };
  EXPECT_TRUE(has_prefix("block")) << p.to_string();
  for (Tensor q : enc.parameters()) q.set_grad(Tensor());
}

// Checkpointing a module of two inputs gives the gradients of the plain call.
TEST(ModuleInputs, CheckpointedCallMatchesThePlainOne) {
  manual_seed(3);
  TinyEncoder enc;
  const Tensor ids = ids_2x4(), mask = mask_2x4();
  enc(ids, mask).square().sum().backward();
  std::vector<std::vector<float>> want;
  for (const Tensor& q : enc.parameters()) want.push_back(q.grad().to_vector<float>());
  enc.zero_grad();
  Tensor y = autograd::checkpoint([&](const std::vector<Tensor>& in) { return enc(in[0], in[1]); }, {ids, mask});
  y.square().sum().backward();
  size_t i = 0;
  for (const Tensor& q : enc.parameters()) {
    const std::vector<float> got = q.grad().to_vector<float>();
    ASSERT_EQ(got.size(), want[i].size());
    for (size_t j = 0; j < got.size(); ++j) EXPECT_NEAR(got[j], want[i][j], 1e-5);
    ++i;
  }
}

// The padding mask reaches attention through block(x, mask): a padded position changes no other output.
TEST(ModuleInputs, MaskThroughTheCallChangesNothingUnmasked) {
  manual_seed(4);
  TinyEncoder enc;
  enc.eval();
  const Tensor mask = mask_2x4();
  Tensor y1 = enc(ids_2x4(), mask);
  const Tensor ids2 = tensor<int64_t>({1, 2, 3, 7, 4, 5, 0, 0}, {2, 4});  // a padded token changes
  Tensor y2 = enc(ids2, mask);
  const std::vector<float> v1 = y1.to_vector<float>(), v2 = y2.to_vector<float>();
  for (size_t i = 0; i < 8 * 3; ++i) EXPECT_NEAR(v1[i], v2[i], 1e-5) << i;  // row 0's three real tokens
  EXPECT_GT(std::abs(v1[8 * 3] - v2[8 * 3]), 1e-4);                         // the padded one itself changed
}
