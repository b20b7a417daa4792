// defines: GPT2::from_pretrained and GPT2::save_pretrained — Hugging Face folders (config.json as transformers 5.x
// writes it, model.safetensors with the Conv1D weights [in, out]).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ember/autograd/grad_mode.h"
#include "ember/core/file_io.h"
#include "ember/models/gpt2.h"
#include "ember/models/pretrained.h"
#include "ember/nn/serialize.h"
#include "hf_config.h"

namespace ember::models {
namespace {

// The config of a folder, refusing what this class does not build (another activation, attention scaled by layer,
// cross-attention, an untied head).
GPT2Config read_config(const detail::HfConfig& c) {
  const char* who = c.who();
  const std::string type = c.model_type();
  EMBER_CHECK_VALUE(type == "gpt2" || type.empty(), who, ": ", c.path(), " describes a \"", type,
                    "\" model, not GPT-2");
  const std::string act = c.text("activation_function").value_or("gelu_new");
  EMBER_CHECK_VALUE(act == "gelu_new" || act == "gelu_pytorch_tanh", who, ": activation_function \"", act,
                    "\" is not built (GPT-2's is \"gelu_new\", the tanh approximation)");
  EMBER_CHECK_VALUE(!c.flag("scale_attn_by_inverse_layer_idx").value_or(false), who,
                    ": scale_attn_by_inverse_layer_idx is not built");
  EMBER_CHECK_VALUE(!c.flag("add_cross_attention").value_or(false), who, ": add_cross_attention is not built");
  EMBER_CHECK_VALUE(c.flag("tie_word_embeddings").value_or(true), who,
                    ": tie_word_embeddings = false is not built (the LM head is the token embedding)");
  EMBER_CHECK_VALUE(c.flag("scale_attn_weights").value_or(true), who, ": scale_attn_weights = false is not built");
  GPT2Config g;
  g.vocab_size = c.required_integer("vocab_size");
  g.n_positions = c.integer("n_positions").value_or(g.n_positions);
  g.n_embd = c.required_integer("n_embd");
  g.n_layer = c.required_integer("n_layer");
  g.n_head = c.required_integer("n_head");
  g.n_inner = c.integer("n_inner").value_or(0);
  g.layer_norm_epsilon = c.number("layer_norm_epsilon").value_or(g.layer_norm_epsilon);
  g.dropout = c.number("resid_pdrop").value_or(g.dropout);
  return g;
}

bool is_conv1d_weight(const std::string& n) {
  for (const char* s : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"}) {
    const std::string suffix = s;
    if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) return true;
  }
  return false;
}

}  // namespace

GPT2 GPT2::from_pretrained(const std::string& folder) {
  const detail::HfConfig c(folder, "models::GPT2::from_pretrained");
  GPT2 model(read_config(c));
  const std::string weights = (std::filesystem::path(folder) / "model.safetensors").string();
  std::error_code ec;
  EMBER_CHECK(std::filesystem::exists(weights, ec), IOError, "models::GPT2::from_pretrained: ", folder,
              " has no model.safetensors (a sharded checkpoint, model.safetensors.index.json, is not read yet)");
  load_pretrained(model, weights);
  model.eval();  // as transformers' from_pretrained
  return model;
}

void GPT2::save_pretrained(const std::string& folder) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(folder, ec);
  EMBER_CHECK(fs::is_directory(folder), IOError, "models::GPT2::save_pretrained: cannot create the folder ", folder,
              ec ? " (" + ec.message() + ")" : std::string());
  const GPT2Config& g = config_;
  const nlohmann::ordered_json config = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"activation_function", "gelu_new"},
      {"vocab_size", g.vocab_size},
      {"n_positions", g.n_positions},
      {"n_ctx", g.n_positions},
      {"n_embd", g.n_embd},
      {"n_layer", g.n_layer},
      {"n_head", g.n_head},
      {"n_inner", g.n_inner > 0 ? nlohmann::ordered_json(g.n_inner) : nlohmann::ordered_json(nullptr)},
      {"layer_norm_epsilon", g.layer_norm_epsilon},
      {"resid_pdrop", g.dropout},
      {"embd_pdrop", g.dropout},
      {"attn_pdrop", g.dropout},
      {"tie_word_embeddings", true},
  };
  // Hugging Face's layout: Conv1D weights [in, out]; the tied head is not written (transformers ties it on load).
  nn::NamedTensors out;
  NoGradGuard no_grad;
  for (const auto& [n, t] : named_parameters()) out.emplace_back(n, is_conv1d_weight(n) ? t.t().contiguous() : t);
  nn::save_tensors((fs::path(folder) / "model.safetensors").string(), out, {{"format", "pt"}});
  const std::string text = config.dump(2) + "\n";
  write_atomically((fs::path(folder) / "config.json").string(), "models::GPT2::save_pretrained",
                   [&](int fd, const std::string& tmp) {
                     write_all(fd, text.data(), text.size(), tmp, "models::GPT2::save_pretrained");
                   });
}

}  // namespace ember::models
