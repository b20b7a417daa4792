// defines: the memory categories' order and names, and Plan::to_string, memory::plan's report (memory_plan.h).
#include <algorithm>
#include <iomanip>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ember/core/error.h"
#include "ember/core/memory_plan.h"
#include "memory_plan_internal.h"

namespace ember::memory {

bool stronger(Category a, Category b) {
  // parameters > gradients > optimizer state > activations > workspace > temporaries
  auto rank = [](Category c) {
    switch (c) {
      case Category::kParameters:
        return 5;
      case Category::kGradients:
        return 4;
      case Category::kOptimizerState:
        return 3;
      case Category::kActivations:
        return 2;
      case Category::kWorkspace:
        return 1;
      case Category::kTemporaries:
        return 0;
    }
    return 0;
  };
  return rank(a) > rank(b);
}

const char* category_name(Category c) {
  switch (c) {
    case Category::kParameters:
      return "parameters";
    case Category::kGradients:
      return "gradients";
    case Category::kOptimizerState:
      return "optimizer_state";
    case Category::kActivations:
      return "activations";
    case Category::kTemporaries:
      return "temporaries";
    case Category::kWorkspace:
      return "workspace";
  }
  return "?";
}

std::string Plan::to_string() const {
  auto fmt = [](size_t b) { return detail::format_bytes(b, 2); };
  auto pct = [this](size_t b) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(1) << (peak_bytes ? 100.0 * static_cast<double>(b) / peak_bytes : 0.0) << "%";
    return os.str();
  };
  std::ostringstream os;
  os << "memory plan for " << device << " (" << allocations << " allocations simulated)\n"
     << "  peak allocated  " << std::setw(12) << fmt(peak_bytes) << "   reached" << peak_where << "\n"
     << "  peak reserved   " << std::setw(12) << fmt(peak_reserved_bytes) << "\n"
     << "  held at the end " << std::setw(12) << fmt(end_bytes) << "\n";
  if (limit_bytes)
    os << "  limit           " << std::setw(12) << fmt(limit_bytes) << "   "
       << (fits ? std::string("fits") : "does NOT fit: first refused " + first_oom) << "\n";
  os << "  at the peak, by category:\n";
  for (int c = 0; c < kNumCategories; ++c) {
    const size_t b = bytes(static_cast<Category>(c));
    os << "    " << std::left << std::setw(16) << category_name(static_cast<Category>(c)) << std::right << std::setw(12)
       << fmt(b) << std::setw(8) << pct(b) << "\n";
  }
  os << "  at the peak, by module (where allocated), largest first:\n";
  std::vector<std::pair<std::string, size_t>> modules(by_module.begin(), by_module.end());
  std::stable_sort(modules.begin(), modules.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (size_t k = 0; k < modules.size(); ++k) {
    if (k == 12) {
      os << "    ... " << modules.size() - 12 << " more\n";
      break;
    }
    os << "    " << std::left << std::setw(16) << modules[k].first << std::right << std::setw(12)
       << fmt(modules[k].second) << std::setw(8) << pct(modules[k].second) << "\n";
  }
  return os.str();
}

}  // namespace ember::memory
