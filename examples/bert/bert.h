// A BERT encoder made of Ember's modules, with the layout of Hugging Face's BertModel, loaded from a model folder
// (config.json + model.safetensors), and sentence-transformers' mean pooling.
//
//   bert::Bert model(bert::Config::from_json(dir + "/config.json"));
//   nn::LoadResult r = bert::load_pretrained(model, dir + "/model.safetensors");   // r.unexpected: the pooler
//   Tensor h = model(ids, mask);                                                 // [B, T, hidden]
//   Tensor e = bert::mean_pool(h, mask);                                         // [B, hidden]
//
// The blocks are nn::TransformerBlock in post-norm (BERT's order), with separate q/k/v projections; load_pretrained
// maps Hugging Face's names onto them ("encoder.layer.3.attention.self.query" is "encoder.layer.3.attn.q_proj").
#pragma once
#include <ember/ember.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace bert {
using namespace ember;

struct Config {
  int64_t vocab_size = 30522, hidden = 384, layers = 6, heads = 12, intermediate = 1536;
  int64_t max_positions = 512, type_vocab = 2, pad_token_id = 0;
  double layer_norm_eps = 1e-12, dropout = 0.1;

  // The numbers of a Hugging Face config.json ("hidden_size", "num_hidden_layers", ...); IOError naming a key that
  // is missing, ValueError for an activation other than GELU.
  static Config from_json(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw IOError("bert::Config::from_json: cannot read \"" + path + "\"");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    auto number = [&](const char* key) {
      std::smatch m;
      const std::regex re(std::string("\"") + key + "\"\\s*:\\s*([-+0-9.eE]+)");
      if (!std::regex_search(text, m, re))
        throw IOError("bert::Config::from_json: \"" + path + "\" has no number \"" + key + "\"");
      return std::stod(m[1].str());
    };
    std::smatch act;
    if (std::regex_search(text, act, std::regex("\"hidden_act\"\\s*:\\s*\"([^\"]*)\"")) && act[1].str() != "gelu")
      throw ValueError("bert::Config::from_json: hidden_act \"" + act[1].str() + "\" (only \"gelu\" is built)");
    Config c;
    c.vocab_size = static_cast<int64_t>(number("vocab_size"));
    c.hidden = static_cast<int64_t>(number("hidden_size"));
    c.layers = static_cast<int64_t>(number("num_hidden_layers"));
    c.heads = static_cast<int64_t>(number("num_attention_heads"));
    c.intermediate = static_cast<int64_t>(number("intermediate_size"));
    c.max_positions = static_cast<int64_t>(number("max_position_embeddings"));
    c.type_vocab = static_cast<int64_t>(number("type_vocab_size"));
    c.pad_token_id = static_cast<int64_t>(number("pad_token_id"));
    c.layer_norm_eps = number("layer_norm_eps");
    c.dropout = number("hidden_dropout_prob");
    return c;
  }
};

// Word, position and token-type embeddings, summed, then LayerNorm and dropout.
struct Embeddings : nn::Module {
  nn::Embedding word_embeddings, position_embeddings, token_type_embeddings;
  nn::LayerNorm LayerNorm;  // Hugging Face's name, so that the file's names need no mapping here
  nn::Dropout dropout;

  explicit Embeddings(const Config& c)
      : word_embeddings(c.vocab_size, c.hidden, {.padding_idx = c.pad_token_id}),
        position_embeddings(c.max_positions, c.hidden),
        token_type_embeddings(c.type_vocab, c.hidden),
        LayerNorm(c.hidden, {.eps = c.layer_norm_eps}),
        dropout(c.dropout) {
    register_module("word_embeddings", word_embeddings);
    register_module("position_embeddings", position_embeddings);
    register_module("token_type_embeddings", token_type_embeddings);
    register_module("LayerNorm", LayerNorm);
    register_module("dropout", dropout);
  }
  // ids and token types [B, T] int64.
  Tensor forward(const Tensor& ids, const Tensor& token_types) override {
    const Tensor positions = arange(ids.size(1), {.dtype = kInt64, .device = ids.device()});
    return dropout(
        LayerNorm(word_embeddings(ids) + position_embeddings(positions) + token_type_embeddings(token_types)));
  }
};

// The blocks, under Hugging Face's path "encoder.layer.<i>".
struct Encoder : nn::Module {
  nn::ModuleList layer;
  explicit Encoder(const Config& c) {
    for (int64_t i = 0; i < c.layers; ++i)
      layer.push_back(nn::TransformerBlock(c.hidden, c.heads,
                                           {.mlp_ratio = c.intermediate / c.hidden,
                                            .dropout = c.dropout,
                                            .norm_first = false,
                                            .layer_norm_eps = c.layer_norm_eps,
                                            .separate_qkv = true}));
    register_module("layer", layer);
  }
  // x [B, T, hidden]; keep [B, 1, 1, T] bool (true = attend).
  Tensor forward(const Tensor& x, const Tensor& keep) override {
    Tensor h = x;
    for (size_t i = 0; i < layer.size(); ++i) h = layer[i](h, keep);
    return h;
  }
};

struct Bert : nn::Module {
  Config config;
  Embeddings embeddings;
  Encoder encoder;

  explicit Bert(const Config& c) : config(c), embeddings(c), encoder(c) {
    if (c.intermediate % c.hidden != 0)
      throw ValueError(
          "bert::Bert: intermediate_size must be a multiple of hidden_size (TransformerBlock's mlp_ratio)");
    register_module("embeddings", embeddings);
    register_module("encoder", encoder);
  }
  // ids and attention mask [B, T] int64 (mask 1 = a real token): the last hidden state [B, T, hidden].
  Tensor forward(const Tensor& ids, const Tensor& mask) override {
    const Tensor keep = mask.to(kBool).reshape({mask.size(0), 1, 1, mask.size(1)});
    return encoder(embeddings(ids, zeros_like(ids)), keep);
  }
};

// Hugging Face's BERT names -> this model's (applied by nn::load's .rename to each name in the file).
inline std::string hf_to_ember(const std::string& name) {
  static const std::pair<std::regex, std::string> kRules[] = {
      {std::regex(R"(\.attention\.self\.query\.)"), ".attn.q_proj."},
      {std::regex(R"(\.attention\.self\.key\.)"), ".attn.k_proj."},
      {std::regex(R"(\.attention\.self\.value\.)"), ".attn.v_proj."},
      {std::regex(R"(\.attention\.output\.dense\.)"), ".attn.out_proj."},
      {std::regex(R"(\.attention\.output\.LayerNorm\.)"), ".ln1."},
      {std::regex(R"(\.intermediate\.dense\.)"), ".mlp.0."},
      {std::regex(R"(\.output\.dense\.)"), ".mlp.1."},
      {std::regex(R"(\.output\.LayerNorm\.)"), ".ln2."},
      {std::regex(R"(\.gamma$)"), ".weight"},  // older checkpoints' LayerNorm names
      {std::regex(R"(\.beta$)"), ".bias"},
  };
  std::string out = name.rfind("bert.", 0) == 0 ? name.substr(5) : name;  // a BertFor...'s "bert." prefix
  for (const auto& [re, to] : kRules) out = std::regex_replace(out, re, to);
  return out;
}

// Loads a Hugging Face model.safetensors (float32, or bf16/f16 cast on load) non-strictly: every parameter of the
// model must be in the file (missing ones are an error listing them all), and the file's extra tensors (the
// pooler, position_ids) are returned in .unexpected.
inline nn::LoadResult load_pretrained(Bert& model, const std::string& path) {
  nn::LoadResult r = nn::load(model, path, {.strict = false, .rename = hf_to_ember});
  if (!r.missing.empty()) {
    std::string names;
    for (const std::string& n : r.missing) names += " " + n;
    throw IOError("bert::load_pretrained: \"" + path + "\" lacks" + names);
  }
  return r;
}

// sentence-transformers' mean pooling: the average of the real tokens' vectors. h [B, T, H], mask [B, T] -> [B, H].
inline Tensor mean_pool(const Tensor& h, const Tensor& mask) {
  const Tensor m = mask.to(h.dtype()).unsqueeze(-1);  // [B, T, 1]
  return (h * m).sum({1}) / clamp_min(m.sum({1}), 1e-9);
}

// Each row scaled to unit length (sentence-transformers' Normalize), so that a dot product is the cosine.
inline Tensor normalize(const Tensor& e) { return e / clamp_min(e.square().sum({-1}, true).sqrt(), 1e-12); }

}  // namespace bert
