// defines: HfConfig (hf_config.h).
#include "hf_config.h"

#include <filesystem>

#include "ember/core/error.h"
#include "ember/core/file_io.h"

namespace ember::models::detail {

HfConfig::HfConfig(const std::string& folder, const char* who) : who_(who) {
  namespace fs = std::filesystem;
  std::error_code ec;
  EMBER_CHECK(fs::is_directory(folder, ec), IOError, who, ": ", folder,
              " is not a folder (give a Hugging Face model folder: config.json and model.safetensors)");
  path_ = (fs::path(folder) / "config.json").string();
  EMBER_CHECK(fs::exists(path_, ec), IOError, who, ": ", folder, " has no config.json (a Hugging Face model folder ",
              "holds config.json and model.safetensors)");
  const std::string text = read_file(path_, who, size_t{16} << 20);
  try {
    json_ = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw IOError(ember::detail::str(who, ": ", path_, " is not valid JSON (", e.what(), ")"));
  }
  EMBER_CHECK(json_.is_object(), IOError, who, ": ", path_, " is not a JSON object");
}

const nlohmann::json* HfConfig::field(const char* key) const {
  auto it = json_.find(key);
  return it == json_.end() || it->is_null() ? nullptr : &*it;
}

std::optional<int64_t> HfConfig::integer(const char* key) const {
  const nlohmann::json* v = field(key);
  if (!v) return std::nullopt;
  EMBER_CHECK_VALUE(v->is_number_integer(), who_, ": ", path_, ": \"", key, "\" must be an integer, got ", v->dump());
  return v->get<int64_t>();
}

std::optional<double> HfConfig::number(const char* key) const {
  const nlohmann::json* v = field(key);
  if (!v) return std::nullopt;
  EMBER_CHECK_VALUE(v->is_number(), who_, ": ", path_, ": \"", key, "\" must be a number, got ", v->dump());
  return v->get<double>();
}

std::optional<std::string> HfConfig::text(const char* key) const {
  const nlohmann::json* v = field(key);
  if (!v) return std::nullopt;
  EMBER_CHECK_VALUE(v->is_string(), who_, ": ", path_, ": \"", key, "\" must be a string, got ", v->dump());
  return v->get<std::string>();
}

std::optional<bool> HfConfig::flag(const char* key) const {
  const nlohmann::json* v = field(key);
  if (!v) return std::nullopt;
  EMBER_CHECK_VALUE(v->is_boolean(), who_, ": ", path_, ": \"", key, "\" must be true or false, got ", v->dump());
  return v->get<bool>();
}

int64_t HfConfig::required_integer(const char* key) const {
  const std::optional<int64_t> v = integer(key);
  EMBER_CHECK(v.has_value(), IOError, who_, ": ", path_, " has no \"", key, "\"");
  return *v;
}

std::string HfConfig::model_type() const {
  if (std::optional<std::string> t = text("model_type")) return *t;
  if (const nlohmann::json* a = field("architectures"); a && a->is_array() && !a->empty() && (*a)[0].is_string()) {
    const std::string arch = (*a)[0].get<std::string>();
    if (arch.rfind("GPT2", 0) == 0) return "gpt2";
    if (arch.rfind("Bert", 0) == 0) return "bert";
    return arch;
  }
  return "";
}

}  // namespace ember::models::detail
