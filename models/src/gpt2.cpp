// defines: models::GPT2 (gpt2.h): Hugging Face's modeling_gpt2.py for GPT2LMHeadModel on one page — attention,
// MLP, block, the model with its embeddings, the tied head — and the cached forward generation uses.
#include "ember/models/gpt2.h"

#include <cmath>

#include "ember/autograd/grad_mode.h"
#include "ember/autograd/ops.h"
#include "ember/core/factory.h"
#include "ember/nn/init.h"
#include "model_checks.h"

namespace ember::models {
namespace {

int64_t inner_width(const GPT2Config& c) { return c.n_inner > 0 ? c.n_inner : 4 * c.n_embd; }

// [B, T, D] -> [B, heads, T, D / heads] and back.
Tensor split_heads(const Tensor& x, int64_t heads) {
  return x.reshape({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
}
Tensor merge_heads(const Tensor& x) {
  return x.transpose(1, 2).reshape({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

// The LM head: the token embedding's own weight (one tensor under two names, saved once), no bias.
class TiedLMHead : public nn::Module {
 public:
  explicit TiedLMHead(const Tensor& w) : weight_(register_parameter("weight", w)) {}
  Tensor forward(const Tensor& h) override { return linear(h, weight_); }

 private:
  Tensor weight_;
};

}  // namespace

GPT2Attention::GPT2Attention(const GPT2Config& c)
    : heads_(c.n_head),
      dropout_(c.dropout),
      c_attn_(c.n_embd, 3 * c.n_embd),
      c_proj_(c.n_embd, c.n_embd),
      resid_dropout_(c.dropout) {
  register_module("c_attn", c_attn_);
  register_module("c_proj", c_proj_);
  register_module("resid_dropout", resid_dropout_);
}

Tensor GPT2Attention::forward(const Tensor& x) {
  const std::vector<Tensor> qkv = chunk(c_attn_(x), 3, -1);
  const Tensor y = scaled_dot_product_attention(split_heads(qkv[0], heads_), split_heads(qkv[1], heads_),
                                                split_heads(qkv[2], heads_),
                                                {.causal = true, .dropout_p = is_training() ? dropout_ : 0.0});
  return resid_dropout_(c_proj_(merge_heads(y)));
}

// The new positions' keys and values go into the cache after the earlier ones; the queries attend to all of them,
// each up to its own position (no mask for one new token, which may see everything before it).
Tensor GPT2Attention::forward_cached(const Tensor& x, KVCache& cache, size_t layer) {
  const std::vector<Tensor> qkv = chunk(c_attn_(x), 3, -1);
  const int64_t past = cache.length, t = x.size(1);
  EMBER_CHECK_VALUE(layer < cache.keys.size() && layer < cache.values.size(), "models::GPT2: the cache has ",
                    cache.keys.size(), " layers, the model more");
  Tensor& kc = cache.keys[layer];
  Tensor& vc = cache.values[layer];
  EMBER_CHECK_VALUE(past + t <= kc.size(2) && past + t <= vc.size(2), "models::GPT2: ", t, " new positions after ",
                    past, " cached ones do not fit the cache's ", kc.size(2));
  {
    NoGradGuard g;
    kc.slice(2, past, past + t).copy_(split_heads(qkv[1], heads_));
    vc.slice(2, past, past + t).copy_(split_heads(qkv[2], heads_));
  }
  const Tensor k = kc.slice(2, 0, past + t), v = vc.slice(2, 0, past + t);
  SdpaOptions o{.causal = past == 0};
  if (past > 0 && t > 1) {  // query i (at position past + i) sees keys j <= past + i
    const Tensor j = arange(past + t, {.dtype = kInt64, .device = x.device()}).unsqueeze(0);
    const Tensor i = arange(t, {.dtype = kInt64, .device = x.device()}).unsqueeze(1);
    o.mask = le(j, i + past);
  }
  const Tensor y = scaled_dot_product_attention(split_heads(qkv[0], heads_), k, v, o);
  return resid_dropout_(c_proj_(merge_heads(y)));
}

GPT2MLP::GPT2MLP(const GPT2Config& c)
    : c_fc_(c.n_embd, inner_width(c)), c_proj_(inner_width(c), c.n_embd), dropout_(c.dropout) {
  register_module("c_fc", c_fc_);
  register_module("c_proj", c_proj_);
  register_module("dropout", dropout_);
}

Tensor GPT2MLP::forward(const Tensor& x) {
  return dropout_(detail::dense_gelu_dense(c_fc_, c_proj_, x, GeluApproximate::Tanh));
}

GPT2Block::GPT2Block(const GPT2Config& c)
    : ln_1_(c.n_embd, {.eps = c.layer_norm_epsilon}), ln_2_(c.n_embd, {.eps = c.layer_norm_epsilon}), attn_(c), mlp_(c) {
  register_module("ln_1", ln_1_);
  register_module("attn", attn_);
  register_module("ln_2", ln_2_);
  register_module("mlp", mlp_);
}

Tensor GPT2Block::forward(const Tensor& x) {
  const Tensor h = x + attn_(ln_1_(x));
  return h + mlp_(ln_2_(h));
}

Tensor GPT2Block::forward_cached(const Tensor& x, KVCache& cache, size_t layer) {
  const Tensor h = x + attn_.forward_cached(ln_1_(x), cache, layer);
  return h + mlp_(ln_2_(h));
}

GPT2Model::GPT2Model(const GPT2Config& c)
    : config_(c),
      wte_(c.vocab_size, c.n_embd),
      wpe_(c.n_positions, c.n_embd),
      drop_(c.dropout),
      ln_f_(c.n_embd, {.eps = c.layer_norm_epsilon}) {
  register_module("wte", wte_);
  register_module("wpe", wpe_);
  register_module("drop", drop_);
  for (int64_t i = 0; i < c.n_layer; ++i) h_.push_back(GPT2Block(c));
  register_module("h", h_);
  register_module("ln_f", ln_f_);
}

Tensor GPT2Model::forward(const Tensor& ids) {
  detail::check_ids("models::GPT2", ids, config_.n_positions);
  const Tensor pos = arange(ids.size(1), {.dtype = kInt64, .device = ids.device()});
  Tensor h = drop_(wte_(ids) + wpe_(pos));
  for (nn::Module& block : h_) h = checkpoint_ ? detail::checkpointed(block, h) : block(h);
  return ln_f_(h);
}

Tensor GPT2Model::forward_cached(const Tensor& ids, KVCache& cache) {
  const int64_t past = cache.length, t = ids.size(1);
  const Tensor pos = arange(t, {.dtype = kInt64, .device = ids.device()}) + past;
  Tensor h = drop_(wte_(ids) + wpe_(pos));
  for (size_t i = 0; i < h_.size(); ++i) h = static_cast<GPT2Block&>(h_[i]).forward_cached(h, cache, i);
  cache.length += t;
  return ln_f_(h);
}

namespace {
GPT2Config checked(const GPT2Config& c) {
  const char* who = "models::GPT2";
  EMBER_CHECK_VALUE(c.vocab_size > 0 && c.n_positions > 0 && c.n_layer > 0 && c.n_inner >= 0, who,
                    ": vocab_size, n_positions and n_layer must be positive, got ", c.vocab_size, ", ", c.n_positions,
                    ", ", c.n_layer);
  EMBER_CHECK_VALUE(c.n_embd > 0 && c.n_head > 0 && c.n_embd % c.n_head == 0, who, ": n_embd ", c.n_embd,
                    " must be a positive multiple of n_head ", c.n_head);
  EMBER_CHECK_VALUE(c.dropout >= 0 && c.dropout < 1, who, ": dropout must be in [0, 1), got ", c.dropout);
  return c;
}
}  // namespace

GPT2::GPT2(GPT2Config config) : config_(checked(config)), transformer_(config_) {
  register_module("transformer", transformer_);
  lm_head_ = std::make_shared<TiedLMHead>(transformer_.wte().weight());
  add_child("lm_head", lm_head_);
  // Hugging Face's initialisation: N(0, 0.02) for the embeddings and Linear weights, the residual projections
  // scaled by 1 / sqrt(2 n_layer) (GPT-2's paper), biases zero, LayerNorms at 1 and 0.
  NoGradGuard g;
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  for (auto& [name, p] : named_parameters()) {
    const bool is_weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    if (!is_weight || name.find(".ln_") != std::string::npos) continue;
    const bool residual = name.find("c_proj.weight") != std::string::npos;
    nn::init::normal_(p, 0.0, residual ? residual_std : 0.02);
  }
}

GPT2& GPT2::set_grad_checkpointing(bool enable) {
  transformer_.set_grad_checkpointing(enable);
  return *this;
}

Tensor GPT2::forward(const Tensor& ids) { return (*lm_head_)(transformer_(ids)); }

}  // namespace ember::models
