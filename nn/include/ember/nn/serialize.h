// defines: save / load of a module's parameters and buffers in the safetensors format (readable by Python's
// safetensors and PyTorch; names are the state_dict names "0.weight", ...), and save_checkpoint /
// load_checkpoint (module + optimiser state + step) in one safetensors file. Files are written atomically:
// a temporary file is written, fsync'ed and renamed over the final name, so a crash never leaves half a file.
//
//   nn::save(model, "model.safetensors");
//   nn::load(model, "model.safetensors");           // checks names and shapes, casts dtypes
//   auto r = nn::load(bert, "model.safetensors", {.strict = false, .rename = hf_to_ember});  // r.missing, r.unexpected
//   nn::save_checkpoint("ckpt.safetensors", model, opt, step);
//   int64_t step = nn::load_checkpoint("ckpt.safetensors", model, opt);
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/nn/checkpoint.h"
#include "ember/nn/module.h"

namespace ember::nn {

// How load / assign_tensors match a file to a model (PyTorch's load_state_dict): strict requires the same names
// (all the differences are listed in the error); not strict loads what matches and reports the rest. Shapes must
// always agree. dtype_cast converts the file's dtype to the model's (bf16 / f16 files into float32 models and
// back); without it a dtype difference is an error. rename maps each name of the file before matching (an empty
// result drops that tensor).
struct LoadOptions {
  bool strict = true;
  std::function<std::string(const std::string&)> rename;
  bool dtype_cast = true;
};
// What a load left out: the model's names the file did not have, the file's (renamed) names the model does not.
struct LoadResult {
  std::vector<std::string> missing;
  std::vector<std::string> unexpected;
  bool complete() const { return missing.empty() && unexpected.empty(); }
};

// Writes named tensors (+ string metadata) to a safetensors file, atomically.
void save_tensors(const std::string& path, const NamedTensors& tensors,
                  const std::map<std::string, std::string>& metadata = {});
// Reads every tensor of a safetensors file (onto the CPU) and its metadata. The file is memory-mapped (copy on write):
// the tensors share its pages, so nothing is copied before they are loaded into a model.
NamedTensors load_tensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);
// Copies `from` into `into` in place, matching by name; every name must be present in both with the same
// shape and dtype, else IOError naming the tensor that differs — except the later names of a tied tensor (one
// tensor under several names), which `from` may lack. `what` names the caller in messages.
void assign_tensors(const NamedTensors& into, const NamedTensors& from, const std::string& what);
// Copies `from` into the module's parameters and buffers by name, as load does (every check before any copy).
LoadResult assign_tensors(Module& module, const NamedTensors& from, const LoadOptions& opts = {});

// The same two calls with the tensors in a map (std::map<std::string, Tensor>, std::unordered_map, ...): entries
// in the map's order. (A braced list {{"name", t}, ...} picks the NamedTensors forms.)
template <class Map>
  requires(!std::is_convertible_v<const Map&, const NamedTensors&>) && requires(const Map& m) {
    { m.begin()->first } -> std::convertible_to<std::string>;
    { m.begin()->second } -> std::convertible_to<Tensor>;
  }
void save_tensors(const std::string& path, const Map& tensors,
                  const std::map<std::string, std::string>& metadata = {}) {
  save_tensors(path, NamedTensors(tensors.begin(), tensors.end()), metadata);
}
template <class Map>
  requires(!std::is_convertible_v<const Map&, const NamedTensors&>) && requires(const Map& m) {
    { m.begin()->first } -> std::convertible_to<std::string>;
    { m.begin()->second } -> std::convertible_to<Tensor>;
  }
LoadResult assign_tensors(Module& module, const Map& from, const LoadOptions& opts = {}) {
  return assign_tensors(module, NamedTensors(from.begin(), from.end()), opts);
}
// The entries of `tensors` whose tensor was not listed before (tied weights under their first name only).
NamedTensors tensors_once(const NamedTensors& tensors);

// save writes each tensor once: tied weights under their first name (as safetensors' save_model).
void save(const Module& module, const std::string& path);
// Every error (a missing or corrupt file, a shape that differs, names that differ under strict) is an IOError naming
// the path and the tensors, and leaves the module as it was.
LoadResult load(Module& module, const std::string& path, const LoadOptions& opts = {});

// The short form of save_checkpoint / load_checkpoint (checkpoint.h) for model + optimiser + step: any optimiser with
// state_dict() and load_state_dict(). The random-generator state is not kept (the full form keeps it); loading is
// all-or-nothing (a failing optimiser part leaves the model as it was).
template <class Optimizer>
void save_checkpoint(const std::string& path, const Module& module, const Optimizer& opt, int64_t step) {
  // The pointers are only read from while saving.
  save_checkpoint(path, Checkpoint{.model = const_cast<Module*>(&module),
                                   .optimizer = const_cast<Optimizer*>(&opt),
                                   .step = step,
                                   .rng = false});
}
template <class Optimizer>
int64_t load_checkpoint(const std::string& path, Module& module, Optimizer& opt) {
  return load_checkpoint(path, Checkpoint{.model = &module, .optimizer = &opt, .rng = false}).step;
}

}  // namespace ember::nn

namespace ember {
// API.md spells these without the nn:: prefix.
using nn::load;
using nn::load_checkpoint;
using nn::save;
using nn::save_checkpoint;
}  // namespace ember
