// defines: models::GPT2 — GPT-2 as Hugging Face's GPT2LMHeadModel builds it (pre-norm blocks, tanh GELU, learned
// positions, the LM head tied to the token embedding), with its parameter names ("transformer.wte",
// "transformer.h.0.attn.c_attn", ..., "transformer.ln_f"), and generation with a key/value cache.
//
//   auto gpt = models::GPT2::from_pretrained("gpt2");                 // a Hugging Face folder
//   Tensor logits = gpt(ids);                                          // ids [B, T] -> [B, T, vocab]
//   Tensor out = gpt.generate(ids, {.max_new_tokens = 20});            // greedy: temperature 0
//
// The Dense weights are Ember's [out, in]: loading a Hugging Face file transposes its Conv1D weights ([in, out]),
// save_pretrained writes them back in that layout. nn::save / nn::load keep Ember's own layout.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/nn/containers.h"
#include "ember/nn/layers.h"
#include "ember/nn/module.h"

namespace ember::models {

struct GPT2Config {
  int64_t vocab_size = 50257, n_positions = 1024, n_embd = 768, n_layer = 12, n_head = 12;
  int64_t n_inner = 0;  // the MLP's width; 0: 4 n_embd
  double layer_norm_epsilon = 1e-5;
  double dropout = 0.1;  // embeddings, attention weights and residual branches (resid/embd/attn_pdrop)
};

// The keys and values of every layer for the positions seen so far, so that each new token costs one position's
// work (GPT2::generate makes one; forward_cached uses it).
struct KVCache {
  std::vector<Tensor> keys, values;  // per layer: [B, heads, capacity, head_dim]
  int64_t length = 0;                // positions filled
};

class GPT2Attention : public nn::Module {
 public:
  GPT2Attention(const GPT2Config& c);
  Tensor forward(const Tensor& x) override;  // [B, T, n_embd], causal
  // The same with the keys and values of earlier positions in cache layer `layer` (appended to).
  Tensor forward_cached(const Tensor& x, KVCache& cache, size_t layer);

 private:
  int64_t heads_;
  double dropout_;
  nn::Dense c_attn_, c_proj_;
  nn::Dropout resid_dropout_;
};

class GPT2MLP : public nn::Module {
 public:
  GPT2MLP(const GPT2Config& c);
  Tensor forward(const Tensor& x) override;

 private:
  nn::Dense c_fc_, c_proj_;
  nn::Dropout dropout_;
};

class GPT2Block : public nn::Module {
 public:
  explicit GPT2Block(const GPT2Config& c);
  Tensor forward(const Tensor& x) override;
  Tensor forward_cached(const Tensor& x, KVCache& cache, size_t layer);

 private:
  nn::LayerNorm ln_1_, ln_2_;
  GPT2Attention attn_;
  GPT2MLP mlp_;
};

// Hugging Face's GPT2Model: the embeddings, the blocks ("h") and the final LayerNorm.
class GPT2Model : public nn::Module {
 public:
  explicit GPT2Model(const GPT2Config& c);
  Tensor forward(const Tensor& ids) override;  // [B, T] -> hidden states [B, T, n_embd]
  Tensor forward_cached(const Tensor& ids, KVCache& cache);
  const nn::Embedding& wte() const { return wte_; }
  void set_grad_checkpointing(bool enable) { checkpoint_ = enable; }

 private:
  GPT2Config config_;
  bool checkpoint_ = false;
  nn::Embedding wte_, wpe_;
  nn::Dropout drop_;
  nn::ModuleList h_;
  nn::LayerNorm ln_f_;
};

struct GenerateOptions {
  int64_t max_new_tokens = 20;
  double temperature = 1.0;  // 0: greedy (the most likely token at each step)
  int64_t top_k = 0;         // > 0: sample among the k most likely tokens only
  uint64_t seed = 0;         // sampling draws from a generator of its own, seeded with this
  std::optional<int64_t> eos_token_id;  // stop a sequence there (it is padded with it to the common length)
};

class GPT2 : public nn::Module {
 public:
  explicit GPT2(GPT2Config config = {});
  // ids [B, T] (int64 or int32, T <= n_positions) -> logits [B, T, vocab_size].
  Tensor forward(const Tensor& ids) override;
  // ids [B, T] followed by max_new_tokens generated tokens: [B, T + new], without gradients, with a key/value cache.
  // The prompt plus the new tokens must fit n_positions.
  Tensor generate(const Tensor& ids, const GenerateOptions& opts = {}) const;
  const GPT2Config& config() const { return config_; }
  // Activation checkpointing by block (transformers' gradient_checkpointing_enable): each block keeps only its
  // input for backward.
  GPT2& set_grad_checkpointing(bool enable = true);

  // A Hugging Face folder: config.json (as transformers writes it) and model.safetensors. IOError for a folder
  // without them, ValueError for an architecture or activation this class does not build.
  static GPT2 from_pretrained(const std::string& folder);
  // Writes such a folder (config.json, model.safetensors with Hugging Face's names and Conv1D layout).
  void save_pretrained(const std::string& folder) const;

 private:
  GPT2Config config_;
  GPT2Model transformer_;
  std::shared_ptr<nn::Module> lm_head_;  // "lm_head": the token embedding's weight, tied
};

inline GPT2 gpt2(GPT2Config config = {}) { return GPT2(config); }

}  // namespace ember::models
