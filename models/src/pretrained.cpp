// defines: models::load_pretrained (pretrained.h): each family's map from upstream names (and layouts) to the
// module's, then one check of the whole file against the model before anything is copied.
#include "ember/models/pretrained.h"

#include <map>
#include <set>

#include "ember/models/bert.h"
#include "ember/models/gpt2.h"
#include "ember/models/resnet.h"
#include "ember/models/vit.h"

namespace ember::models {
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}
// s with every `from` replaced by `to`.
std::string replaced(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// A file entry under the module's name, transposed where the layouts differ; an empty name drops it.
struct Mapped {
  std::string name;
  bool transpose = false;
};

// torchvision / timm: the names are the module's; a DataParallel save's "module." prefix is dropped.
Mapped vision_name(const std::string& n) { return {starts_with(n, "module.") ? n.substr(7) : n}; }

// Hugging Face GPT-2: "transformer." may be missing (GPT2Model files, older saves); Conv1D weights are [in, out];
// the causal-mask buffers of older files are not weights.
Mapped gpt2_name(const std::string& file_name) {
  std::string n = file_name;
  if (ends_with(n, ".attn.bias") || ends_with(n, ".attn.masked_bias")) return {""};
  if (!starts_with(n, "transformer.") && !starts_with(n, "lm_head.")) n = "transformer." + n;
  const bool conv1d = ends_with(n, ".attn.c_attn.weight") || ends_with(n, ".attn.c_proj.weight") ||
                      ends_with(n, ".mlp.c_fc.weight") || ends_with(n, ".mlp.c_proj.weight");
  return {n, conv1d};
}

// Hugging Face BERT: the block parts under the TransformerBlock's names; a BertFor...'s "bert." prefix dropped; the
// pooler, the task heads ("cls.") and the position_ids buffer are not part of this encoder.
Mapped bert_name(const std::string& file_name) {
  std::string n = starts_with(file_name, "bert.") ? file_name.substr(5) : file_name;
  if (starts_with(n, "pooler.") || starts_with(n, "cls.") || ends_with(n, "position_ids")) return {""};
  static const std::pair<const char*, const char*> kParts[] = {
      {".attention.self.query.", ".attn.q_proj."},   {".attention.self.key.", ".attn.k_proj."},
      {".attention.self.value.", ".attn.v_proj."},   {".attention.output.dense.", ".attn.out_proj."},
      {".attention.output.LayerNorm.", ".ln1."},     {".intermediate.dense.", ".mlp.0."},
      {".output.dense.", ".mlp.1."},                 {".output.LayerNorm.", ".ln2."},
  };
  for (const auto& [from, to] : kParts) n = replaced(n, from, to);
  if (ends_with(n, ".gamma")) n = n.substr(0, n.size() - 6) + ".weight";  // older checkpoints' LayerNorm names
  if (ends_with(n, ".beta")) n = n.substr(0, n.size() - 5) + ".bias";
  return {n};
}

using NameMap = Mapped (*)(const std::string&);
NameMap name_map_of(nn::Module& model) {
  if (dynamic_cast<ResNet*>(&model) || dynamic_cast<ViT*>(&model)) return vision_name;
  if (dynamic_cast<GPT2*>(&model)) return gpt2_name;
  if (dynamic_cast<Bert*>(&model)) return bert_name;
  throw ValueError("models::load_pretrained: the model is not one of the library's (ResNet, ViT, GPT2, Bert); use "
                   "nn::load with .rename for other modules");
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

}  // namespace

nn::LoadResult load_pretrained(nn::Module& model, const std::string& file, const PretrainedOptions& opts) {
  const NameMap map = name_map_of(model);
  const std::string what = "models::load_pretrained " + file;
  nn::NamedTensors from;
  try {
    from = nn::load_tensors(file);
  } catch (const IOError& e) {  // the reader's messages start "load: "; this call is load_pretrained
    const std::string m = e.what();
    throw IOError("models::load_pretrained: " + (starts_with(m, "load: ") ? m.substr(6) : m));
  }
  std::map<std::string, Tensor> own;
  for (const auto& [n, t] : model.state_dict()) own.emplace(n, t);

  // Every entry under the module's name; the mis-shaped ones listed all at once.
  nn::NamedTensors renamed;
  std::vector<std::string> misshaped, unexpected;
  std::set<std::string> seen;
  for (const auto& [file_name, t] : from) {
    const Mapped m = map(file_name);
    if (m.name.empty()) continue;
    const Tensor v = m.transpose && t.dim() == 2 ? t.transpose(0, 1) : t;
    EMBER_CHECK(seen.insert(m.name).second, IOError, what, ": two tensors of the file map to \"", m.name, "\"");
    auto it = own.find(m.name);
    if (it == own.end()) {
      unexpected.push_back(file_name);
      continue;
    }
    if (v.shape() != it->second.shape()) {
      misshaped.push_back(ember::detail::str("\"", file_name, "\" (", t.shape(), m.transpose ? ", transposed " : " ",
                                             "in the file, ", it->second.shape(), " in the model)"));
      continue;
    }
    renamed.emplace_back(m.name, v);
  }
  EMBER_CHECK(misshaped.empty(), IOError, what, ": ", misshaped.size(), " weight(s) of another shape: ",
              joined(misshaped), " (a model built with another configuration?)");
  // Missing: the model's tensors the file lacks (a tied tensor's later names may be absent: it is loaded once).
  nn::LoadResult r;
  r.unexpected = unexpected;
  std::set<const TensorImpl*> loaded;
  for (const auto& [n, t] : renamed) loaded.insert(own.at(n).impl());
  for (const auto& [n, t] : model.state_dict())
    if (!seen.count(n) && !loaded.count(t.impl())) r.missing.push_back(n);
  if (opts.strict && !r.complete()) {
    std::string why;
    if (!r.missing.empty()) why += ember::detail::str(r.missing.size(), " missing: ", joined(r.missing));
    if (!r.unexpected.empty())
      why += ember::detail::str(why.empty() ? "" : "; ", r.unexpected.size(),
                                " in the file that the model does not have: ", joined(r.unexpected));
    throw IOError(ember::detail::str(what, ": ", why, " (pass .strict = false to load the rest)"));
  }
  nn::assign_tensors(model, renamed, {.strict = false, .rename = {}, .dtype_cast = true});
  return r;
}

}  // namespace ember::models
