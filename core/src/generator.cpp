// The global generator, Generator's locked state, and the thread-local scope stack.
#include "ember/core/generator.h"

#include <utility>
#include <vector>

namespace ember {

Generator& Generator::operator=(const Generator& other) {
  if (this != &other) set_state(other.state());
  return *this;
}
void Generator::manual_seed(uint64_t seed) { set_state({.seed = seed, .offset = 0}); }
uint64_t Generator::initial_seed() const { return state().seed; }
PhiloxState Generator::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}
void Generator::set_state(const PhiloxState& s) {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = s;
}
PhiloxState Generator::next(uint64_t blocks) {
  std::lock_guard<std::mutex> lock(mu_);
  PhiloxState s = state_;
  state_.offset += blocks;
  return s;
}

Generator& default_generator() {
  static Generator g;  // seeded with Generator's default seed until manual_seed
  return g;
}

namespace {
// This thread's live scopes, innermost last. A scope removes its own entry wherever it is, so a scope ended out of
// order (held in an optional, say) never reinstates a generator whose scope is gone.
thread_local std::vector<std::pair<const GeneratorScope*, Generator*>> t_scopes;
}  // namespace

GeneratorScope::GeneratorScope(Generator* g) { t_scopes.emplace_back(this, g); }
GeneratorScope::~GeneratorScope() {
  for (auto it = t_scopes.end(); it != t_scopes.begin();) {
    if ((--it)->first == this) {
      t_scopes.erase(it);
      break;
    }
  }
}

Generator& current_generator() {
  Generator* g = t_scopes.empty() ? nullptr : t_scopes.back().second;
  return g ? *g : default_generator();
}

}  // namespace ember
