// The global generator, Generator's locked state, and the thread-local scope stack.
#include "ember/core/generator.h"

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
thread_local Generator* t_scoped = nullptr;
}  // namespace

GeneratorScope::GeneratorScope(Generator* g) : prev_(t_scoped) { t_scoped = g; }
GeneratorScope::~GeneratorScope() { t_scoped = prev_; }

Generator& current_generator() { return t_scoped ? *t_scoped : default_generator(); }

}  // namespace ember
