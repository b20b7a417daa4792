// models::Bert: the encoder that was examples/bert's, loaded by Hugging Face's names, and its parity with
// transformers' BertModel (a small random one in float64, padding included: the last hidden state and every
// gradient) with `make models-ref`; bad input and folders.
#include <fstream>

#include "model_ref.h"

using namespace ember;
using models_test::close;

TEST(Bert, ForwardAndBadInput) {
  manual_seed(0);
  models::Bert bert({.vocab_size = 50, .hidden = 16, .layers = 2, .heads = 4, .intermediate = 32, .max_positions = 12});
  bert.eval();
  const Tensor ids = randint(1, 50, {2, 6}, {.dtype = kInt64});
  const Tensor mask = tensor<int64_t>({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 6});
  const Tensor h = bert(ids, mask);
  EXPECT_EQ(h.shape(), Shape({2, 6, 16}));
  // Padding changes nothing for the real tokens.
  Tensor ids2 = ids.clone();
  ids2.select(0, 1).select(0, 5).fill_(7);
  EXPECT_TENSOR_NEAR(bert(ids2, mask).select(0, 1).slice(0, 0, 4), Shape({4, 16}),
                     test::values(h.select(0, 1).slice(0, 0, 4)), 1e-5);
  EXPECT_EQ(models::mean_pool(h, mask).shape(), Shape({2, 16}));
  EXPECT_THROW_MSG(bert(ids, ones({2, 5})), ShapeError, "attention mask [2, 5]", "[2, 6]");
  EXPECT_THROW_MSG(bert(randint(1, 50, {1, 13}, {.dtype = kInt64}), ones({1, 13})), ValueError, "12 positions");
  EXPECT_THROW_MSG(bert(tensor<int64_t>({3, 50}, {1, 2}), ones({1, 2})), IndexError, "50");
  EXPECT_THROW_MSG(models::Bert({.hidden = 16, .heads = 4, .intermediate = 20}), ValueError, "intermediate");
  const auto dir = test::tmpdir("bert_folder");
  std::ofstream(dir / "config.json") << R"({"model_type": "bert", "hidden_act": "relu", "vocab_size": 10,
      "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16})";
  EXPECT_THROW_MSG(models::Bert::from_pretrained(dir.string()), ValueError, "hidden_act \"relu\"");
}

TEST(Bert, MatchesTransformersInFloat64) {
  std::string why;
  const std::string dir = models_test::run_reference("bert", &why);
  if (dir.empty()) GTEST_SKIP() << why;
  auto loaded = models::Bert::from_pretrained(dir);
  models::Bert bert(loaded.config());
  bert.to(kFloat64);
  const nn::LoadResult r = models::load_pretrained(bert, dir + "/model.safetensors");
  EXPECT_TRUE(r.complete());  // the pooler is not this encoder's and is left out by name
  bert.eval();
  auto in = models_test::read_all(dir + "/inputs.safetensors");
  auto want = models_test::read_all(dir + "/expected.safetensors");
  const Tensor out = bert(in.at("ids"), in.at("mask"));
  EXPECT_TRUE(close(out, want.at("out"), 1e-6));
  EXPECT_TRUE(close(loaded(in.at("ids"), in.at("mask")), want.at("out"), 1e-4)) << "float32";
  (out * in.at("gy")).sum().backward();
  // Hugging Face's name of each of this model's parameters (the inverse of load_pretrained's map).
  auto hf = [](std::string n) {
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {".attn.q_proj.", ".attention.self.query."}, {".attn.k_proj.", ".attention.self.key."},
             {".attn.v_proj.", ".attention.self.value."}, {".attn.out_proj.", ".attention.output.dense."},
             {".ln1.", ".attention.output.LayerNorm."},   {".mlp.0.", ".intermediate.dense."},
             {".mlp.1.", ".output.dense."},               {".ln2.", ".output.LayerNorm."}})
      if (size_t at = n.find(from); at != std::string::npos) n.replace(at, from.size(), to);
    return n;
  };
  size_t compared = 0;
  for (const auto& [n, p] : bert.named_parameters()) {
    ASSERT_TRUE(want.count("grad." + hf(n))) << n << " as " << hf(n);
    if (n.find("k_proj.bias") != std::string::npos) {
      // Zero in exact arithmetic (a key bias adds one constant to a query's scores, which softmax ignores): both
      // are rounding noise, compared as such.
      EXPECT_LT(abs(p.grad()).max().item<double>(), 1e-12) << n;
      EXPECT_LT(abs(want.at("grad." + hf(n))).max().item<double>(), 1e-12) << n;
    } else {
      EXPECT_TRUE(close(p.grad(), want.at("grad." + hf(n)), 1e-6)) << n;
    }
    ++compared;
  }
  EXPECT_EQ(compared, 37u);
}
