// defines: models::Bert (bert.h), the encoder that was examples/bert's, and mean_pool.
#include "ember/models/bert.h"

#include "ember/autograd/ops.h"
#include "ember/core/factory.h"
#include "ember/nn/transformer.h"
#include "ember/models/pretrained.h"
#include "hf_config.h"
#include "model_checks.h"

namespace ember::models {

BertEmbeddings::BertEmbeddings(const BertConfig& c)
    : word_embeddings_(c.vocab_size, c.hidden, {.padding_idx = c.pad_token_id}),
      position_embeddings_(c.max_positions, c.hidden),
      token_type_embeddings_(c.type_vocab, c.hidden),
      layer_norm_(c.hidden, {.eps = c.layer_norm_eps}),
      dropout_(c.dropout) {
  register_module("word_embeddings", word_embeddings_);
  register_module("position_embeddings", position_embeddings_);
  register_module("token_type_embeddings", token_type_embeddings_);
  register_module("LayerNorm", layer_norm_);
  register_module("dropout", dropout_);
}

Tensor BertEmbeddings::forward(const Tensor& ids, const Tensor& token_types) {
  const Tensor positions = arange(ids.size(1), {.dtype = kInt64, .device = ids.device()});
  return dropout_(
      layer_norm_(word_embeddings_(ids) + position_embeddings_(positions) + token_type_embeddings_(token_types)));
}

namespace {
BertConfig checked(const BertConfig& c) {
  const char* who = "models::Bert";
  EMBER_CHECK_VALUE(c.hidden > 0 && c.heads > 0 && c.hidden % c.heads == 0, who, ": hidden ", c.hidden,
                    " must be a positive multiple of heads ", c.heads);
  EMBER_CHECK_VALUE(c.intermediate > 0 && c.intermediate % c.hidden == 0, who, ": intermediate ", c.intermediate,
                    " must be a multiple of hidden ", c.hidden, " (TransformerBlock's mlp_ratio)");
  EMBER_CHECK_VALUE(c.layers > 0 && c.vocab_size > 0 && c.max_positions > 0 && c.type_vocab > 0, who,
                    ": layers, vocab_size, max_positions and type_vocab must be positive");
  return c;
}
}  // namespace

BertEncoder::BertEncoder(const BertConfig& c) {
  for (int64_t i = 0; i < c.layers; ++i)
    layer_.push_back(nn::TransformerBlock(c.hidden, c.heads,
                                          {.mlp_ratio = c.intermediate / c.hidden,
                                           .dropout = c.dropout,
                                           .norm_first = false,
                                           .layer_norm_eps = c.layer_norm_eps,
                                           .separate_qkv = true}));
  register_module("layer", layer_);
}

Tensor BertEncoder::forward(const Tensor& x, const Tensor& keep) {
  Tensor h = x;
  for (nn::Module& block : layer_) h = block(h, keep);
  return h;
}

Bert::Bert(BertConfig config) : config_(checked(config)), embeddings_(config_), encoder_(config_) {
  register_module("embeddings", embeddings_);
  register_module("encoder", encoder_);
}

Tensor Bert::forward(const Tensor& ids, const Tensor& mask) {
  const char* who = "models::Bert";
  detail::check_ids(who, ids, config_.max_positions);
  EMBER_CHECK(mask.defined(), Error, who, ": the attention mask is undefined");
  EMBER_CHECK_SHAPE(mask.shape() == ids.shape(), who, ": the attention mask ", mask.shape(),
                    " must have the ids' shape ", ids.shape());
  const Tensor keep = mask.to(kBool).reshape({mask.size(0), 1, 1, mask.size(1)});
  return encoder_(embeddings_(ids, zeros_like(ids)), keep);
}

Bert Bert::from_pretrained(const std::string& folder) {
  const char* who = "models::Bert::from_pretrained";
  const detail::HfConfig c(folder, who);
  const std::string type = c.model_type();
  EMBER_CHECK_VALUE(type == "bert" || type.empty(), who, ": ", c.path(), " describes a \"", type,
                    "\" model, not BERT");
  const std::string act = c.text("hidden_act").value_or("gelu");
  EMBER_CHECK_VALUE(act == "gelu", who, ": hidden_act \"", act, "\" is not built (BERT's is \"gelu\")");
  const std::string pos = c.text("position_embedding_type").value_or("absolute");
  EMBER_CHECK_VALUE(pos == "absolute", who, ": position_embedding_type \"", pos, "\" is not built (only \"absolute\")");
  BertConfig cfg;
  cfg.vocab_size = c.required_integer("vocab_size");
  cfg.hidden = c.required_integer("hidden_size");
  cfg.layers = c.required_integer("num_hidden_layers");
  cfg.heads = c.required_integer("num_attention_heads");
  cfg.intermediate = c.required_integer("intermediate_size");
  cfg.max_positions = c.integer("max_position_embeddings").value_or(cfg.max_positions);
  cfg.type_vocab = c.integer("type_vocab_size").value_or(cfg.type_vocab);
  cfg.pad_token_id = c.integer("pad_token_id").value_or(cfg.pad_token_id);
  cfg.layer_norm_eps = c.number("layer_norm_eps").value_or(cfg.layer_norm_eps);
  cfg.dropout = c.number("hidden_dropout_prob").value_or(cfg.dropout);
  Bert model(cfg);
  load_pretrained(model, folder + "/model.safetensors");
  model.eval();
  return model;
}

Tensor mean_pool(const Tensor& h, const Tensor& mask) {
  const Tensor m = mask.to(h.dtype()).unsqueeze(-1);  // [B, T, 1]
  return (h * m).sum({1}) / clamp_min(m.sum({1}), 1e-9);
}

}  // namespace ember::models
