// defines: save_checkpoint / load_checkpoint of a Checkpoint. File layout (safetensors): tensors "model.<name>",
// "optim.<name>", "sched.<name>", "scaler.<name>", "loader.<name>", "extra.<key>.<name>"; metadata "format"
// ("ember-checkpoint"), "step", "parts" (the parts saved, comma-separated), "rng.seed" / "rng.offset" and the
// user's metadata as "user.<key>". The two-part files of save_checkpoint(path, model, opt, step) are the same
// format with parts "model,optim".
#include "ember/nn/checkpoint.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/autograd/grad_mode.h"
#include "ember/core/factory.h"
#include "ember/nn/serialize.h"

namespace ember::nn {
namespace {

// The stateful parts of `c`, by file prefix, in load order. The loader comes last: its state_dict snapshot could
// not put back an epoch in progress exactly, and last it never needs putting back (its load checks everything
// before changing anything).
std::vector<std::pair<std::string, Stateful>> stateful_parts(const Checkpoint& c) {
  std::vector<std::pair<std::string, Stateful>> out;
  if (c.optimizer) out.emplace_back("optim", c.optimizer);
  if (c.scheduler) out.emplace_back("sched", c.scheduler);
  if (c.scaler) out.emplace_back("scaler", c.scaler);
  for (const auto& [key, s] : c.extra) {
    EMBER_CHECK_VALUE(!key.empty() && key.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                            "0123456789_-") == std::string::npos,
                      "checkpoint: extra part name \"", key, "\" must be letters, digits, '_' or '-'");
    if (s) out.emplace_back("extra." + key, s);
  }
  if (c.loader) out.emplace_back("loader", c.loader);
  return out;
}

// A whole metadata string as an integer (uint64_t: no sign; int64_t: a sign allowed), or IOError naming it.
template <class T>
T parse_int(const std::string& text, const std::string& what, const std::string& path) {
  size_t used = 0;
  T v = 0;
  try {
    if constexpr (std::is_signed_v<T>) v = std::stoll(text, &used);
    else v = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  EMBER_CHECK(used > 0 && used == text.size() && (std::is_signed_v<T> || text[0] != '-'), IOError,
              "load_checkpoint: ", path, ": malformed ", what, " \"", text, "\" in the metadata");
  return v;
}

// Deep copies: what to put back if a later part fails.
NamedTensors copy_of(const NamedTensors& sd) {
  NoGradGuard g;
  NamedTensors out;
  for (const auto& [n, t] : sd) out.emplace_back(n, t.detach().clone());
  return out;
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& c) {
  NamedTensors all;
  std::vector<std::string> parts;
  if (c.model) {
    for (const auto& [n, t] : tensors_once(c.model->state_dict())) all.emplace_back("model." + n, t);
    parts.push_back("model");
  }
  for (const auto& [prefix, s] : stateful_parts(c)) {
    for (const auto& [n, t] : s.state_dict()) all.emplace_back(prefix + "." + n, t);
    parts.push_back(prefix);
  }
  std::map<std::string, std::string> meta = {{"format", "ember-checkpoint"}, {"step", std::to_string(c.step)}};
  std::string joined;
  for (const std::string& p : parts) joined += (joined.empty() ? "" : ",") + p;
  meta["parts"] = joined;
  if (c.rng) {
    const PhiloxState s = get_rng_state();
    meta["rng.seed"] = std::to_string(s.seed);
    meta["rng.offset"] = std::to_string(s.offset);
  }
  for (const auto& [k, v] : c.metadata) meta["user." + k] = v;
  save_tensors(path, all, meta);
}

namespace {

using Parts = std::vector<std::pair<std::string, Stateful>>;

// What a checkpoint's metadata says, read and checked before anything is loaded.
struct Header {
  std::set<std::string> parts;  // the parts the file holds
  std::string parts_text;       // as the file lists them
  LoadedCheckpoint info;
  PhiloxState rng;  // when asked for
};

Header read_header(const std::string& path, std::map<std::string, std::string>& meta, bool want_rng) {
  EMBER_CHECK(meta["format"] == "ember-checkpoint" && meta.count("step"), IOError, "load_checkpoint: ", path,
              " is not an ember checkpoint (no format/step metadata); use load() for plain model files");
  Header h;
  // Which parts the file has: listed since "parts" existed; older files are model + optimiser.
  h.parts_text = meta.count("parts") ? meta["parts"] : std::string("model,optim");
  std::stringstream ss(h.parts_text);
  for (std::string p; std::getline(ss, p, ',');) h.parts.insert(p);
  h.info.step = parse_int<int64_t>(meta["step"], "step", path);
  for (const auto& [k, v] : meta)
    if (k.rfind("user.", 0) == 0) h.info.metadata[k.substr(5)] = v;
  if (want_rng) {
    EMBER_CHECK(meta.count("rng.seed") && meta.count("rng.offset"), IOError, "load_checkpoint: ", path,
                " has no random-generator state (saved with .rng = false, or by an older version); pass .rng = false");
    h.rng = {.seed = parse_int<uint64_t>(meta["rng.seed"], "rng.seed", path),
             .offset = parse_int<uint64_t>(meta["rng.offset"], "rng.offset", path)};
  }
  return h;
}

// The tensors of one part, without its prefix.
NamedTensors part_of(const NamedTensors& all, const std::string& prefix) {
  NamedTensors out;
  const std::string pre = prefix + ".";
  for (const auto& [n, t] : all)
    if (n.rfind(pre, 0) == 0) out.emplace_back(n.substr(pre.size()), t);
  return out;
}

// Loads the model, then the parts in order; on a failure puts back every part touched, the failing one included,
// and rethrows. A failure while restoring must not hide the original error (nor stop the other restores).
void load_or_restore(const std::string& path, const Checkpoint& c, const Parts& parts, const NamedTensors& all) {
  // Snapshots first (nothing has changed yet).
  NamedTensors model_before = c.model ? copy_of(c.model->state_dict()) : NamedTensors{};
  std::vector<NamedTensors> before;
  for (const auto& [prefix, s] : parts) before.push_back(s.state_dict());
  size_t loaded = 0;  // parts [0, loaded) loaded; parts[loaded] may be half loaded when it threw
  bool model_touched = false;
  try {
    if (c.model) {
      model_touched = true;  // a copy may fail half way (device memory)
      assign_tensors(c.model->state_dict(), part_of(all, "model"), "load_checkpoint " + path + " (model)");
    }
    for (; loaded < parts.size(); ++loaded) {
      try {
        parts[loaded].second.load_state_dict(part_of(all, parts[loaded].first));
      } catch (const Error& e) {
        throw IOError(detail::str("load_checkpoint ", path, " (", parts[loaded].first, "): ", e.what()));
      }
    }
  } catch (...) {
    auto quietly = [](const std::function<void()>& restore) {
      try {
        restore();
      } catch (...) {  // keep restoring; the original error is the one to report
      }
    };
    for (size_t i = std::min(loaded + 1, parts.size()); i-- > 0;)
      quietly([&] { parts[i].second.load_state_dict(before[i]); });
    if (model_touched)
      quietly([&] { assign_tensors(c.model->state_dict(), model_before, "load_checkpoint (restoring the model)"); });
    throw;
  }
}

}  // namespace

LoadedCheckpoint load_checkpoint(const std::string& path, const Checkpoint& c) {
  std::map<std::string, std::string> meta;
  NamedTensors all;
  try {
    all = load_tensors(path, &meta);
  } catch (const IOError& e) {  // the reader's messages start "load: "; this call is load_checkpoint
    const std::string m = e.what();
    throw IOError("load_checkpoint: " + (m.rfind("load: ", 0) == 0 ? m.substr(6) : m));
  }
  const Header h = read_header(path, meta, c.rng);
  const Parts parts = stateful_parts(c);
  auto require = [&](const std::string& prefix, const std::string& what) {
    EMBER_CHECK(h.parts.count(prefix), IOError, "load_checkpoint: ", path, " has no ", what,
                " state (it holds: ", h.parts_text, ")");
  };
  if (c.model) require("model", "model");
  for (const auto& [prefix, s] : parts)
    require(prefix, prefix == "optim" ? "optimizer" : prefix == "sched" ? "scheduler" : prefix);
  load_or_restore(path, c, parts, all);
  if (c.rng) set_rng_state(h.rng);
  return h.info;
}

}  // namespace ember::nn
