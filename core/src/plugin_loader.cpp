// defines: find_plugin_entry and plugin_candidates (plugin_loader.h).
#include "ember/internal/plugin_loader.h"

#include <dlfcn.h>

#include <cstdlib>

#include "ember/core/error.h"

namespace ember::detail {
namespace {
// The folder this library (libember.so) was loaded from, found through the address of a function in it.
std::string own_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_folder), &info) == 0 || !info.dli_fname) return "";
  const std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  return slash == std::string::npos ? "" : self.substr(0, slash);
}
}  // namespace

std::vector<std::string> plugin_candidates(const std::string& file, const char* env_var) {
  if (const char* p = env_var ? std::getenv(env_var) : nullptr; p && *p) return {p};
  std::vector<std::string> paths;
  if (std::string dir = own_folder(); !dir.empty()) paths.push_back(dir + "/" + file);
  paths.push_back(std::string(EMBER_INSTALL_LIBDIR) + "/" + file);
  paths.push_back(file);
  return paths;
}

void* find_plugin_entry(const std::vector<std::string>& paths, const char* entry, std::string* tried,
                        std::string* opened) {
  for (const std::string& path : paths) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      *tried += str("\n  ", path, ": ", dlerror());
      continue;
    }
    // never dlclose'd: closing a library that ran initialisers is not worth the risk
    if (void* sym = dlsym(handle, entry)) {
      *opened = path;
      return sym;
    }
    *tried += str("\n  ", path, ": not an ember plugin (no ", entry, ")");
  }
  return nullptr;
}

}  // namespace ember::detail
