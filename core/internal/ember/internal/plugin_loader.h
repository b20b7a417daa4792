// defines: find_plugin_entry, how core opens its plugins (the CUDA backend, libember_cuda.so; the AVX-512 CPU
// kernels, libember_cpu_avx512.so): dlopen with RTLD_LOCAL (a plugin's symbols never interpose libember's), never
// closed. Private to ember (core, dist); not installed.
#pragma once
#include <string>
#include <vector>

namespace ember::detail {

// The places to look for the plugin `file`, in order: next to libember itself (the build tree and an install put
// them in one folder), the install's library folder, and the dynamic linker's search path.
// With `env_var` set to a non-empty value in the environment, that value (a path) is the only candidate.
std::vector<std::string> plugin_candidates(const std::string& file, const char* env_var = nullptr);

// Opens the first of `paths` that loads and has the symbol `entry`; returns its address and sets *opened, or
// returns null with, per path, what went wrong appended to *tried.
void* find_plugin_entry(const std::vector<std::string>& paths, const char* entry, std::string* tried,
                        std::string* opened);

}  // namespace ember::detail
