// defines: what the GPU op and model benchmarks (bench_gpu_ops.cpp, bench_gpu_models.cpp) share: --only's prefix
// match and text made safe for a JSON string.
#pragma once
#include <algorithm>
#include <string>

namespace bench {

// Whether `name` starts with one of the comma-separated prefixes of `only` (every name when `only` is empty).
inline bool selected(const std::string& only, const std::string& name) {
  if (only.empty()) return true;
  for (size_t start = 0; start <= only.size();) {
    const size_t end = std::min(only.find(',', start), only.size());
    const std::string prefix = only.substr(start, end - start);
    if (!prefix.empty() && name.rfind(prefix, 0) == 0) return true;
    start = end + 1;
  }
  return false;
}

// An error message as a JSON string's contents: quotes, backslashes and newlines replaced.
inline std::string json_text(std::string s) {
  std::replace(s.begin(), s.end(), '"', '\'');
  std::replace(s.begin(), s.end(), '\\', '/');
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace bench
