// defines: use_deterministic_algorithms (determinism.h).
#include "ember/core/determinism.h"

#include <atomic>

namespace ember {
namespace {
std::atomic<bool> g_deterministic{false};
}  // namespace

void use_deterministic_algorithms(bool enabled) { g_deterministic.store(enabled); }
bool are_deterministic_algorithms_enabled() { return g_deterministic.load(); }

}  // namespace ember
