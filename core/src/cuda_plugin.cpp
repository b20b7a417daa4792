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
#include <dlfcn.h>

#include <mutex>
#include <string>
#include <vector>

#include "ember/config.h"
#include "ember/core/error.h"
#include "ember/internal/cuda_hooks.h"

namespace ember::detail {
namespace {

constexpr const char* kPluginFile = "libember_cuda.so";

struct Loaded {
  CudaHooks* hooks = nullptr;
  std::string why;   // why hooks is null
  std::string path;  // the file that was opened
};

// The folder this library (libember.so) was loaded from, found through the address of a function in it.
std::string own_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_folder), &info) == 0 || !info.dli_fname) return "";
  const std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  return slash == std::string::npos ? "" : self.substr(0, slash);
}

// Opens `path` and asks it for its hooks; on failure appends why to `tried`.
CudaHooks* open_plugin(const std::string& path, std::string* tried, std::string* opened) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    *tried += str("\n  ", path, ": ", dlerror());
    return nullptr;
  }
  auto entry = reinterpret_cast<CudaPluginEntry>(dlsym(handle, kCudaPluginEntryName));
  if (!entry) {
    *tried += str("\n  ", path, ": not an ember CUDA plugin (no ", kCudaPluginEntryName, ")");
    return nullptr;  // never dlclose'd: closing a library that ran initialisers is not worth the risk
  }
  std::string why;
  CudaHooks* hooks = entry(kCudaHooksVersion, &why);
  if (!hooks) {
    *tried += str("\n  ", path, ": ", why);
    return nullptr;
  }
  *opened = path;
  return hooks;
}

Loaded load() {
  Loaded r;
#if !EMBER_WITH_CUDA
  r.why = "ember was built without CUDA support (EMBER_CUDA=OFF or no nvcc at build time)";
  return r;
#else
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("EMBER_CUDA_PLUGIN"); env && *env) {
    if (std::string(env) == "off") {
      r.why = "CUDA is switched off (EMBER_CUDA_PLUGIN=off)";
      return r;
    }
    candidates.push_back(env);
  } else {
    if (std::string dir = own_folder(); !dir.empty()) candidates.push_back(dir + "/" + kPluginFile);
    candidates.push_back(std::string(EMBER_INSTALL_LIBDIR) + "/" + kPluginFile);
    candidates.push_back(kPluginFile);
  }
  std::string tried;
  for (const std::string& path : candidates)
    if ((r.hooks = open_plugin(path, &tried, &r.path))) return r;
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
