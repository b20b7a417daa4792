// defines: reading a Hugging Face model folder's config.json (as transformers 5.x writes it: every field, null where
// unset) with the JSON library the project uses, each value checked: a missing folder or file is an IOError, a
// field of the wrong type a ValueError naming it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ember::models::detail {

class HfConfig {
 public:
  // Reads <folder>/config.json; `who` names the caller in every message ("models::GPT2::from_pretrained").
  HfConfig(const std::string& folder, const char* who);
  // A field, or std::nullopt when it is absent or null.
  std::optional<int64_t> integer(const char* key) const;
  std::optional<double> number(const char* key) const;
  std::optional<std::string> text(const char* key) const;
  std::optional<bool> flag(const char* key) const;
  // A field that must be there.
  int64_t required_integer(const char* key) const;
  // The model type ("gpt2", "bert"): "model_type", else inferred from "architectures" (empty when neither says).
  std::string model_type() const;
  const std::string& path() const { return path_; }
  const char* who() const { return who_; }

 private:
  const nlohmann::json* field(const char* key) const;
  std::string path_;
  const char* who_;
  nlohmann::json json_;
};

}  // namespace ember::models::detail
