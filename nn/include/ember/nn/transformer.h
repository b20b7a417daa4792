// defines: nn::MultiheadAttention and nn::TransformerBlock (pre-LayerNorm, GELU MLP), both batch-first
// ([batch, T, d_model]) and built on scaled_dot_product_attention (tiled: memory linear in T).
//
//   nn::TransformerBlock block(128, 4, {.causal = true});
//   Tensor y = block(x);  // x [B, T, 128]
//
// MultiheadAttention's parameters have PyTorch's names and layout (in_proj_weight [3 d, d], in_proj_bias [3 d],
// out_proj.weight, out_proj.bias), so weights copy across from torch.nn.MultiheadAttention as they are; with
// .separate_qkv they are three Dense children q_proj, k_proj, v_proj (as Hugging Face's BERT and GPT-style models).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "ember/nn/layers.h"

namespace ember::nn {

struct MultiheadAttentionOptions {
  bool bias = true;           // biases of the input and output projections
  double dropout = 0;         // on the attention weights, in training mode only
  bool causal = false;        // forward(x) masks future positions
  bool separate_qkv = false;  // q_proj, k_proj, v_proj (Dense d => d each) instead of one packed in_proj_weight
};

struct AttendOptions {
  Tensor mask = {};      // bool (true = attend) or additive, broadcastable to [B, heads, Tq, Tk]
  bool causal = false;
};

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t d_model, int64_t heads, MultiheadAttentionOptions opts = {});
  // Self-attention of x [B, T, d_model] (or [T, d_model]).
  Tensor forward(const Tensor& x) override;
  // Self-attention with a mask (bool, true = attend, or additive; broadcastable to [B, heads, T, T]; undefined:
  // none), called as attn(x, mask): a padding mask [B, 1, 1, T] keeps every query off the padded keys.
  Tensor forward(const Tensor& x, const Tensor& mask) override;
  // Attention of query [B, Tq, d] over key/value [B, Tk, d] (cross-attention when they differ).
  Tensor attend(const Tensor& query, const Tensor& key, const Tensor& value, const AttendOptions& opts = {}) const;
  std::string repr() const override;
  int64_t heads() const { return heads_; }

 private:
  // x [B, T, d] projected by rows [part * d, (part + 1) * d) of in_proj, split into heads: [B, heads, T, d / heads]
  Tensor project(const Tensor& x, int part) const;
  int64_t d_, heads_;
  MultiheadAttentionOptions opts_;
  Tensor in_w_, in_b_;                   // packed q, k, v projections (not separate_qkv)
  std::optional<Dense> q_proj_, k_proj_, v_proj_;  // separate_qkv
  Dense out_proj_;
};

struct TransformerBlockOptions {
  int64_t mlp_ratio = 4;  // hidden width of the MLP = mlp_ratio * d_model
  double dropout = 0;     // on the attention weights and on both residual branches (training mode)
  bool causal = false;
  bool norm_first = true;          // pre-norm (GPT-2 and later); false: post-norm (the original Transformer, BERT)
  double layer_norm_eps = 1e-5;    // both LayerNorms (BERT: 1e-12)
  bool separate_qkv = false;       // the attention's projections as q_proj, k_proj, v_proj
};

// Pre-norm (norm_first): x = x + dropout(attn(ln1(x))); x = x + dropout(mlp(ln2(x))).
// Post-norm: x = ln1(x + dropout(attn(x))); x = ln2(x + dropout(mlp(x))). mlp = Dense(d, r d) -> GELU -> Dense(r d,
// d). The children are ln1, attn, ln2, mlp either way (PyTorch's TransformerEncoderLayer(norm_first) order).
class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t d_model, int64_t heads, TransformerBlockOptions opts = {});
  Tensor forward(const Tensor& x) override;
  // With an attention mask, as MultiheadAttention's (e.g. BERT's padding mask), called as block(x, mask).
  Tensor forward(const Tensor& x, const Tensor& mask) override;
  std::string repr() const override;

 private:
  Tensor add_residual(Tensor y, const Tensor& x, const Module& sublayer);  // y + x, in y where nothing can see it
  Tensor mlp(const Tensor& x) const;  // mlp_(x), as one linear_gelu_linear where nothing can tell the difference

  int64_t d_;
  TransformerBlockOptions opts_;
  LayerNorm ln1_, ln2_;
  MultiheadAttention attn_;
  Dense fc1_, fc2_;  // mlp_'s two layers (handles on the same modules)
  Chain mlp_;
  Dropout drop_;
};

}  // namespace ember::nn
