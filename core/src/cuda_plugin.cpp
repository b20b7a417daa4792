// defines: cuda_hooks() — finds, opens (dlopen) and checks the CUDA plugin, libember_cuda.so, once per process,
// on the first use of anything CUDA (ember/internal/cuda_hooks.h says why it is a plugin).
//
// Where it looks, first hit wins:
//   1. $EMBER_CUDA_PLUGIN: a path to the plugin, or "off" (CUDA disabled: cuda::is_available() is false);
//   2. next to libember.so itself (the build tree and an install put both in one folder);
//   3. the install's library folder, as configured at build time;
//   4. the dynamic linker's search path (LD_LIBRARY_PATH, ...).
// A failure to open it (not found, a CUDA library it needs is missing, another version) is not an error: CUDA
// is then unavailable, with the reason in cuda::unavailable_reason().
#include <mutex>
#include <string>
#include <vector>

#include "ember/config.h"
#include "ember/core/error.h"
#include "ember/internal/cuda_hooks.h"
#include "ember/internal/plugin_loader.h"

namespace ember::detail {
namespace {

constexpr const char* kPluginFile = "libember_cuda.so";

struct Loaded {
  CudaHooks* hooks = nullptr;
  std::string why;   // why hooks is null
  std::string path;  // the file that was opened
};

Loaded load() {
  Loaded r;
#if !EMBER_WITH_CUDA
  r.why = "ember was built without CUDA support (EMBER_CUDA=OFF or no nvcc at build time)";
  return r;
#else
  if (const char* env = std::getenv("EMBER_CUDA_PLUGIN"); env && std::string(env) == "off") {
    r.why = "CUDA is switched off (EMBER_CUDA_PLUGIN=off)";
    return r;
  }
  const std::vector<std::string> candidates = plugin_candidates(kPluginFile, "EMBER_CUDA_PLUGIN");
  std::string tried;
  if (auto entry =
          reinterpret_cast<CudaPluginEntry>(find_plugin_entry(candidates, kCudaPluginEntryName, &tried, &r.path))) {
    std::string why;
    if ((r.hooks = entry(kCudaHooksVersion, &why))) return r;
    tried += str("\n  ", r.path, ": ", why);
    r.path.clear();
  }
  r.why = str("the CUDA backend (", kPluginFile, ") could not be loaded:", tried);
  return r;
#endif
}

const Loaded& loaded() {
  static const Loaded l = load();  // thread-safe, once
  return l;
}

}  // namespace

CudaHooks* cuda_hooks(std::string* why) {
  const Loaded& l = loaded();
  if (!l.hooks && why) *why = l.why;
  return l.hooks;
}

std::string cuda_plugin_path() { return loaded().path; }

}  // namespace ember::detail
