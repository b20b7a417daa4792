// defines: nn::MultiheadAttention and nn::TransformerBlock of transformer.h.
#include "ember/nn/transformer.h"

#include "ember/core/factory.h"
#include "ember/nn/init.h"

namespace ember::nn {

namespace {
// The batch-first input as [B, T, d] (a [T, d] input is one batch), and whether it was unbatched.
Tensor batched(const Tensor& x, int64_t d, const std::string& who) {
  EMBER_CHECK_SHAPE((x.dim() == 3 || x.dim() == 2) && x.size(-1) == d, who, ": expected input [B, T, ", d,
                    "] or [T, ", d, "], got ", x.shape());
  return x.dim() == 2 ? x.unsqueeze(0) : x;
}
}  // namespace

// --- MultiheadAttention
MultiheadAttention::MultiheadAttention(int64_t d_model, int64_t heads, MultiheadAttentionOptions opts)
    : d_(d_model), heads_(heads), opts_(opts), out_proj_(d_model, d_model, identity, {.bias = opts.bias}) {
  EMBER_CHECK_VALUE(d_model > 0 && heads > 0 && d_model % heads == 0, "MultiheadAttention: d_model (", d_model,
                    ") must be a positive multiple of heads (", heads, ")");
  EMBER_CHECK_VALUE(opts.dropout >= 0 && opts.dropout < 1, "MultiheadAttention: dropout must be in [0, 1), got ",
                    opts.dropout);
  // PyTorch's initialisation: Xavier-uniform in_proj (each of the separate ones), zero biases, the output
  // projection as a Linear
  if (opts.separate_qkv) {
    for (auto [name, proj] : {std::pair{"q_proj", &q_proj_}, std::pair{"k_proj", &k_proj_}, std::pair{"v_proj", &v_proj_}}) {
      proj->emplace(d_model, d_model, identity, DenseOptions{.bias = opts.bias});
      init::xavier_uniform_((*proj)->weight());
      if (opts.bias) init::zeros_((*proj)->bias());
      register_module(name, **proj);
    }
  } else {
    in_w_ = register_parameter("in_proj_weight", init::xavier_uniform_(empty({3 * d_model, d_model})));
    if (opts.bias) in_b_ = register_parameter("in_proj_bias", zeros({3 * d_model}));
  }
  register_module("out_proj", out_proj_);
  if (opts.bias) init::zeros_(out_proj_.bias());
}

Tensor MultiheadAttention::project(const Tensor& x, int part) const {
  const int64_t B = x.size(0), T = x.size(1);
  Tensor y;
  if (opts_.separate_qkv) {
    const std::optional<Dense>& proj = part == 0 ? q_proj_ : part == 1 ? k_proj_ : v_proj_;
    y = (*proj)(x);
  } else {
    const Tensor w = in_w_.slice(0, part * d_, (part + 1) * d_);
    const Tensor b = in_b_.defined() ? in_b_.slice(0, part * d_, (part + 1) * d_) : Tensor();
    y = linear(x, w, b);
  }
  return y.reshape({B, T, heads_, d_ / heads_}).transpose(1, 2);
}

Tensor MultiheadAttention::attend(const Tensor& query, const Tensor& key, const Tensor& value,
                                  const AttendOptions& opts) const {
  const std::string who = repr();
  const Tensor q = batched(query, d_, who), k = batched(key, d_, who), v = batched(value, d_, who);
  EMBER_CHECK_SHAPE(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == v.size(1), who,
                    ": query ", query.shape(), ", key ", key.shape(), " and value ", value.shape(),
                    " need one batch size, and key and value one length");
  const int64_t B = q.size(0), T = q.size(1);
  const double p = is_training() ? opts_.dropout : 0.0;
  // Self-attention with the packed in-projection: q, k and v as one [B, T, 3 d] product cut in three (split, whose
  // backward finds attention's gradients side by side in one buffer: one product each way, no copy). Otherwise
  // q, k and v each through their own rows of it.
  const bool packed = !opts_.separate_qkv && query.is_same(key) && key.is_same(value);
  Tensor pq, pk, pv;
  if (packed) {
    const std::vector<Tensor> qkv = split(linear(q, in_w_, in_b_), d_, -1);
    auto heads = [&](const Tensor& t) { return t.reshape({B, T, heads_, d_ / heads_}).transpose(1, 2); };
    pq = heads(qkv[0]), pk = heads(qkv[1]), pv = heads(qkv[2]);
  } else {
    pq = project(q, 0), pk = project(k, 1), pv = project(v, 2);
  }
  Tensor y = scaled_dot_product_attention(pq, pk, pv, {.causal = opts.causal, .mask = opts.mask, .dropout_p = p});
  y = out_proj_(y.transpose(1, 2).reshape({B, T, d_}));
  return query.dim() == 2 ? y.squeeze(0) : y;
}

Tensor MultiheadAttention::forward(const Tensor& x) { return attend(x, x, x, {.causal = opts_.causal}); }
Tensor MultiheadAttention::forward(const Tensor& x, const Tensor& mask) {
  return attend(x, x, x, {.mask = mask, .causal = opts_.causal});
}

std::string MultiheadAttention::repr() const {
  return detail::str("MultiheadAttention(", d_, ", heads = ", heads_, opts_.causal ? ", causal" : "",
                     opts_.separate_qkv ? ", separate_qkv" : "",
                     opts_.dropout > 0 ? detail::str(", dropout = ", opts_.dropout) : "", ")");
}

// --- TransformerBlock
namespace {
int64_t checked_mlp_width(int64_t d_model, int64_t mlp_ratio) {
  EMBER_CHECK_VALUE(mlp_ratio > 0, "TransformerBlock: mlp_ratio must be positive, got ", mlp_ratio);
  return mlp_ratio * d_model;
}
}  // namespace

TransformerBlock::TransformerBlock(int64_t d_model, int64_t heads, TransformerBlockOptions opts)
    : d_(d_model),
      opts_(opts),
      ln1_(d_model, {.eps = opts.layer_norm_eps}),
      ln2_(d_model, {.eps = opts.layer_norm_eps}),
      attn_(d_model, heads, {.dropout = opts.dropout, .causal = opts.causal, .separate_qkv = opts.separate_qkv}),
      fc1_(d_model, checked_mlp_width(d_model, opts.mlp_ratio), gelu),
      fc2_(opts.mlp_ratio * d_model, d_model),
      mlp_{fc1_, fc2_},
      drop_(opts.dropout) {
  register_module("ln1", ln1_);
  register_module("attn", attn_);
  register_module("ln2", ln2_);
  register_module("mlp", mlp_);
  register_module("drop", drop_);
}

// y + x for a sublayer's output y. Added into y where nothing else can see it: y is a fresh tensor that no op saved
// (x + y and y + x are the same bits), so unless a hook on the sublayer, its children or the dropout may have kept
// it, or the sum would promote or broadcast. No new buffer then, whose lines would come from memory before being
// written: charlm +1% on one thread (a [4096, 128] sum twice a block).
Tensor TransformerBlock::add_residual(Tensor y, const Tensor& x, const Module& sublayer) {
  bool seen = drop_.has_hooks();
  for (const Module* m : sublayer.modules()) seen = seen || m->has_hooks();
  if (seen || y.dtype() != x.dtype() || y.shape() != x.shape() || y.device() != x.device()) return y + x;
  return y.add_(x);
}

// Dense -> GELU -> Dense as the fused op (cuBLASLt's epilogues on CUDA; the same values on the CPU), unless a hook
// or checkpointing on the Chain or its layers would see the calls the fused op skips.
Tensor TransformerBlock::mlp(const Tensor& x) const {
  bool layered = mlp_.children().size() != 2;
  for (const Module* m : mlp_.modules()) layered = layered || m->has_hooks() || m->checkpointing();
  if (layered) return mlp_(x);
  return linear_gelu_linear(x, fc1_.weight(), fc1_.bias(), fc2_.weight(), fc2_.bias());
}

Tensor TransformerBlock::forward(const Tensor& x) { return forward(x, Tensor()); }

Tensor TransformerBlock::forward(const Tensor& x, const Tensor& mask) {
  if (opts_.norm_first) {
    Tensor h = add_residual(drop_(attn_(ln1_(x), mask)), x, attn_);
    return add_residual(drop_(mlp(ln2_(h))), h, mlp_);
  }
  Tensor h = ln1_(add_residual(drop_(attn_(x, mask)), x, attn_));
  return ln2_(add_residual(drop_(mlp(h)), h, mlp_));
}

std::string TransformerBlock::repr() const {
  return detail::str("TransformerBlock(", d_, ", heads = ", attn_.heads(), ", mlp_ratio = ", opts_.mlp_ratio,
                     opts_.causal ? ", causal" : "", opts_.norm_first ? "" : ", post-norm", ")");
}

}  // namespace ember::nn
