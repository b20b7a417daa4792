// models::GPT2: Hugging Face's names, the tied head, the key/value cache (the same logits as the full forward),
// sampling options, save_pretrained / from_pretrained, bad input; and parity with transformers' GPT2LMHeadModel (a
// small random one in float64: logits, every gradient and greedy generate's 20 tokens; GPT-2 124M's forward in
// float32) with `make models-ref`.
#include <fstream>

#include "model_ref.h"

using namespace ember;
using models_test::close;

namespace {
models::GPT2Config tiny() {
  return {.vocab_size = 61, .n_positions = 40, .n_embd = 16, .n_layer = 2, .n_head = 4, .dropout = 0.0};
}
}  // namespace

TEST(GPT2, HuggingFaceNamesAndATiedHead) {
  auto gpt = models::gpt2();
  EXPECT_EQ(gpt.num_parameters(), 124439808);  // GPT-2 small: the head is the embedding
  std::map<std::string, Tensor> s;
  for (const auto& [n, t] : gpt.state_dict()) s.emplace(n, t);
  for (const auto& [name, shape] : std::map<std::string, Shape>{{"transformer.wte.weight", {50257, 768}},
                                                                {"transformer.wpe.weight", {1024, 768}},
                                                                {"transformer.h.0.ln_1.weight", {768}},
                                                                {"transformer.h.0.attn.c_attn.weight", {2304, 768}},
                                                                {"transformer.h.0.attn.c_proj.bias", {768}},
                                                                {"transformer.h.11.mlp.c_fc.weight", {3072, 768}},
                                                                {"transformer.h.11.mlp.c_proj.weight", {768, 3072}},
                                                                {"transformer.ln_f.bias", {768}},
                                                                {"lm_head.weight", {50257, 768}}}) {
    ASSERT_TRUE(s.count(name)) << name;
    EXPECT_EQ(s.at(name).shape(), shape) << name;
  }
  EXPECT_EQ(s.at("lm_head.weight").impl(), s.at("transformer.wte.weight").impl());  // one tensor
  size_t listed = 0;
  for (const auto& [n, p] : gpt.named_parameters()) listed += n == "lm_head.weight";
  EXPECT_EQ(listed, 0u);  // parameters once, under the first name
}

// One position at a time through the cache gives the logits of the whole sequence at once; a prompt then several
// tokens per step too (the mask of the new positions over the cached ones).
TEST(GPT2, TheCacheGivesTheFullForwardsLogits) {
  manual_seed(2);
  models::GPT2 gpt(tiny());
  gpt.to(kFloat64).eval();
  const Tensor ids = randint(0, 61, {2, 9}, {.dtype = kInt64});
  NoGradGuard g;
  const Tensor full = gpt(ids);
  const Tensor w = gpt.state_dict()[0].second;  // wte
  for (const std::vector<int64_t>& steps : {std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 1}, {4, 3, 2}, {9}}) {
    models::KVCache cache;
    for (int64_t i = 0; i < 2; ++i) {
      cache.keys.push_back(zeros({2, 4, 9, 4}, {.dtype = kFloat64}));
      cache.values.push_back(zeros({2, 4, 9, 4}, {.dtype = kFloat64}));
    }
    auto& body = static_cast<models::GPT2Model&>(*gpt.named_children()[0].second);
    int64_t at = 0;
    for (int64_t n : steps) {
      const Tensor part = linear(body.forward_cached(ids.slice(1, at, at + n), cache), w);
      EXPECT_TENSOR_NEAR(part, Shape({2, n, 61}), test::values(full.slice(1, at, at + n)), 1e-12);
      at += n;
    }
    EXPECT_EQ(cache.length, 9);
  }
}

TEST(GPT2, GenerateOptionsAndBadInput) {
  manual_seed(3);
  models::GPT2 gpt(tiny());
  gpt.eval();
  const Tensor prompt = randint(0, 61, {2, 5}, {.dtype = kInt64});
  const Tensor greedy = gpt.generate(prompt, {.max_new_tokens = 7, .temperature = 0});
  EXPECT_EQ(greedy.shape(), Shape({2, 12}));
  EXPECT_EQ(greedy.slice(1, 0, 5).to_vector<int64_t>(), prompt.to_vector<int64_t>());  // the prompt included
  // Greedy is the argmax of the full forward at each step.
  {
    NoGradGuard g;
    const Tensor logits = gpt(greedy.slice(1, 0, 11));
    EXPECT_EQ(argmax(logits.slice(1, 4, 11), -1).to_vector<int64_t>(), greedy.slice(1, 5, 12).to_vector<int64_t>());
  }
  // Sampling: the same seed, the same tokens; top_k = 1 is greedy.
  const Tensor a = gpt.generate(prompt, {.max_new_tokens = 7, .temperature = 1.0, .seed = 11});
  const Tensor b = gpt.generate(prompt, {.max_new_tokens = 7, .temperature = 1.0, .seed = 11});
  EXPECT_EQ(a.to_vector<int64_t>(), b.to_vector<int64_t>());
  EXPECT_EQ(gpt.generate(prompt, {.max_new_tokens = 7, .temperature = 0.7, .top_k = 1, .seed = 5}).to_vector<int64_t>(),
            greedy.to_vector<int64_t>());
  for (int64_t t : gpt.generate(prompt, {.max_new_tokens = 30, .temperature = 2.0, .seed = 1}).to_vector<int64_t>())
    EXPECT_TRUE(t >= 0 && t < 61);
  // Bad input: a clear error, the model as it was.
  EXPECT_THROW_MSG(gpt.generate(prompt, {.max_new_tokens = 36}), ValueError, "5 tokens and 36 new ones make 41",
                   "40 positions");
  EXPECT_THROW_MSG(gpt(randint(0, 61, {1, 41}, {.dtype = kInt64})), ValueError, "41 tokens", "40 positions");
  EXPECT_THROW_MSG(gpt(tensor<int64_t>({1, 2, 61}, {1, 3})), IndexError, "index 61", "num_embeddings = 61");
  EXPECT_THROW_MSG(gpt(randn({1, 3})), DTypeError, "int64 or int32");
  EXPECT_THROW_MSG(gpt.generate(prompt, {.temperature = -1}), ValueError, "temperature");
}

// save_pretrained writes a Hugging Face folder (Conv1D weights [in, out]) that from_pretrained reads back to the
// same model; a folder without config.json, or of another architecture or activation, is refused clearly.
TEST(GPT2, SaveAndFromPretrainedRoundTrip) {
  manual_seed(4);
  models::GPT2 gpt(tiny());
  const auto dir = test::tmpdir("gpt2_folder");
  gpt.save_pretrained(dir.string());
  std::map<std::string, Tensor> file;
  for (const auto& [n, t] : nn::load_tensors((dir / "model.safetensors").string())) file.emplace(n, t);
  EXPECT_EQ(file.at("transformer.h.0.attn.c_attn.weight").shape(), Shape({16, 48}));  // [in, out]
  EXPECT_FALSE(file.count("lm_head.weight"));
  auto back = models::GPT2::from_pretrained(dir.string());
  EXPECT_FALSE(back.is_training());
  const Tensor ids = randint(0, 61, {1, 6}, {.dtype = kInt64});
  gpt.eval();
  EXPECT_TENSOR_NEAR(back(ids), Shape({1, 6, 61}), test::values(gpt(ids)), 0.0);

  // A file holding the tied weight under the head's name only loads it into the embedding (it once stayed random
  // while the load reported success).
  nn::NamedTensors head_only;
  for (const auto& [n, t] : nn::load_tensors((dir / "model.safetensors").string()))
    head_only.emplace_back(n == "transformer.wte.weight" ? "lm_head.weight" : n, t);
  nn::save_tensors((dir / "head_only.safetensors").string(), head_only);
  models::GPT2 fresh(tiny());
  EXPECT_TRUE(models::load_pretrained(fresh, (dir / "head_only.safetensors").string()).complete());
  fresh.eval();
  EXPECT_TENSOR_NEAR(fresh(ids), Shape({1, 6, 61}), test::values(gpt(ids)), 0.0);

  const auto empty = test::tmpdir("gpt2_empty");
  EXPECT_THROW_MSG(models::GPT2::from_pretrained(empty.string()), IOError, "has no config.json");
  EXPECT_THROW_MSG(models::GPT2::from_pretrained((empty / "absent").string()), IOError, "is not a folder");
  auto write = [](const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; };
  write(empty / "config.json", R"({"model_type": "bert", "vocab_size": 10})");
  EXPECT_THROW_MSG(models::GPT2::from_pretrained(empty.string()), ValueError, "\"bert\" model, not GPT-2");
  write(empty / "config.json",
        R"({"model_type": "gpt2", "activation_function": "relu", "vocab_size": 10, "n_embd": 8, "n_layer": 1,
            "n_head": 2})");
  EXPECT_THROW_MSG(models::GPT2::from_pretrained(empty.string()), ValueError, "activation_function \"relu\"");
  write(empty / "config.json", R"({"model_type": "gpt2", "vocab_size": 10, "n_embd": 8.5, "n_layer": 1, "n_head": 2})");
  EXPECT_THROW_MSG(models::GPT2::from_pretrained(empty.string()), ValueError, "\"n_embd\" must be an integer");
  write(empty / "config.json", R"({"model_type": "gpt2", "vocab_size": 10, "n_embd": 8, "n_layer": 1, "n_head": 2})");
  EXPECT_THROW_MSG(models::GPT2::from_pretrained(empty.string()), IOError, "has no model.safetensors");
  // A file of another configuration: every mis-shaped weight named, nothing loaded.
  models::GPT2 wider({.vocab_size = 61, .n_positions = 40, .n_embd = 24, .n_layer = 2, .n_head = 4});
  EXPECT_THROW_MSG(models::load_pretrained(wider, (dir / "model.safetensors").string()), IOError,
                   "\"transformer.wte.weight\"", "[61, 16]", "[61, 24]", "another configuration");
}

TEST(GPT2, MatchesTransformersInFloat64) {
  std::string why;
  const std::string dir = models_test::run_reference("gpt2", &why);
  if (dir.empty()) GTEST_SKIP() << why;
  auto loaded = models::GPT2::from_pretrained(dir);  // float32, as Ember builds models
  EXPECT_EQ(loaded.config().vocab_size, 97);
  models::GPT2 gpt(loaded.config());
  gpt.to(kFloat64);
  EXPECT_TRUE(models::load_pretrained(gpt, dir + "/model.safetensors").complete());
  gpt.eval();
  auto in = models_test::read_all(dir + "/inputs.safetensors");
  auto want = models_test::read_all(dir + "/expected.safetensors");
  const Tensor out = gpt(in.at("ids"));
  EXPECT_TRUE(close(out, want.at("out"), 1e-6));
  EXPECT_TRUE(close(loaded(in.at("ids")), want.at("out"), 1e-4)) << "float32";
  (out * in.at("gy")).sum().backward();
  size_t compared = 0;
  for (const auto& [n, p] : gpt.named_parameters()) {
    ASSERT_TRUE(want.count("grad." + n)) << n;
    const bool conv1d = p.dim() == 2 && n.find(".h.") != std::string::npos;  // Hugging Face's [in, out]
    EXPECT_TRUE(close(conv1d ? p.grad().t() : p.grad(), want.at("grad." + n), 1e-6)) << n;
    ++compared;
  }
  EXPECT_EQ(compared, 28u);
  const Tensor generated = gpt.generate(in.at("ids").slice(1, 0, 5), {.max_new_tokens = 20, .temperature = 0});
  EXPECT_EQ(generated.to_vector<int64_t>(), want.at("generated").to_vector<int64_t>());
}

TEST(GPT2, FullSizeForwardMatchesTransformers) {
  std::string why;
  const std::string dir = models_test::run_reference("gpt2-full", &why);
  if (dir.empty()) GTEST_SKIP() << why;
  auto gpt = models::GPT2::from_pretrained(dir);
  NoGradGuard g;
  const Tensor out = gpt(models_test::read_all(dir + "/inputs.safetensors").at("ids"));
  EXPECT_TRUE(close(out, models_test::read_all(dir + "/expected.safetensors").at("out"), 1e-4));
}
