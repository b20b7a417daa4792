// defines: models::Bert — a BERT encoder (Hugging Face's BertModel without its pooler) made of Ember's modules:
// word, position and token-type embeddings, then post-norm nn::TransformerBlocks with separate q/k/v projections;
// and sentence-transformers' mean pooling. Hugging Face's names load through models::load_pretrained (its
// "encoder.layer.3.attention.self.query" is this model's "encoder.layer.3.attn.q_proj").
//
//   auto bert = models::Bert::from_pretrained(dir);                 // config.json + model.safetensors
//   Tensor h = bert(ids, mask);                                      // ids, mask [B, T] -> [B, T, hidden]
//   Tensor e = models::mean_pool(h, mask);                           // [B, hidden]
#pragma once
#include <cstdint>
#include <string>

#include "ember/nn/containers.h"
#include "ember/nn/layers.h"
#include "ember/nn/module.h"

namespace ember::models {

struct BertConfig {
  int64_t vocab_size = 30522, hidden = 768, layers = 12, heads = 12, intermediate = 3072;
  int64_t max_positions = 512, type_vocab = 2, pad_token_id = 0;
  double layer_norm_eps = 1e-12, dropout = 0.1;
};

// Word, position and token-type embeddings, summed, then LayerNorm and dropout (Hugging Face's names).
class BertEmbeddings : public nn::Module {
 public:
  explicit BertEmbeddings(const BertConfig& c);
  Tensor forward(const Tensor& ids, const Tensor& token_types) override;  // [B, T] each

 private:
  nn::Embedding word_embeddings_, position_embeddings_, token_type_embeddings_;
  nn::LayerNorm layer_norm_;  // "LayerNorm", Hugging Face's name
  nn::Dropout dropout_;
};

// The blocks, under Hugging Face's path "encoder.layer.<i>".
class BertEncoder : public nn::Module {
 public:
  explicit BertEncoder(const BertConfig& c);
  Tensor forward(const Tensor& x, const Tensor& keep) override;  // x [B, T, hidden], keep [B, 1, 1, T] bool

 private:
  nn::ModuleList layer_;
};

class Bert : public nn::Module {
 public:
  explicit Bert(BertConfig config = {});
  // ids [B, T] (int64 / int32) and attention mask [B, T] (1 = a real token, 0 = padding): the last hidden state
  // [B, T, hidden].
  Tensor forward(const Tensor& ids, const Tensor& mask) override;
  const BertConfig& config() const { return config_; }
  // A Hugging Face BERT folder (config.json, model.safetensors; a BertModel's or a BertFor...'s, whose heads are
  // left out). The model comes back in eval mode, as transformers' from_pretrained.
  static Bert from_pretrained(const std::string& folder);

 private:
  BertConfig config_;
  BertEmbeddings embeddings_;
  BertEncoder encoder_;
};

// sentence-transformers' mean pooling: the average of the real tokens' vectors. h [B, T, H], mask [B, T] -> [B, H].
Tensor mean_pool(const Tensor& h, const Tensor& mask);

}  // namespace ember::models
