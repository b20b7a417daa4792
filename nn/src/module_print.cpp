// defines: how modules print — the default repr() (a user module's registered tree), to_string() (with the
// parameter count) and operator<<.
#include <cxxabi.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <sstream>
#include <typeinfo>

#include "ember/nn/module.h"
#include "module_state.h"

namespace ember::nn {

namespace internal {
std::string type_name(const Module& m) {
  const char* mangled = typeid(m).name();
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  std::string full = status == 0 && demangled ? demangled.get() : mangled;
  // Drop every namespace qualifier ("ember::nn::", "(anonymous namespace)::", "app::models::"), also inside
  // template arguments: the short name is what the user wrote.
  const std::string anon = "(anonymous namespace)::";
  for (size_t p; (p = full.find(anon)) != std::string::npos;) full.erase(p, anon.size());
  std::string out;
  for (size_t i = 0; i < full.size(); ++i) {
    if (full.compare(i, 2, "::") == 0) {
      while (!out.empty() && (std::isalnum(static_cast<unsigned char>(out.back())) || out.back() == '_'))
        out.pop_back();
      ++i;
    } else {
      out += full[i];
    }
  }
  return out;
}

std::string indent(std::string s) {
  for (size_t p = s.find('\n'); p != std::string::npos; p = s.find('\n', p + 3)) s.replace(p, 1, "\n  ");
  return s;
}
}  // namespace internal

std::string internal::group_digits(int64_t n, char sep) {
  std::string d = std::to_string(n), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && d[i - 1] != '-' && (d.size() - i) % 3 == 0) out += sep;
    out += d[i];
  }
  return out;
}

// Only what is registered appears: that is what parameters(), to() and save() see too.
std::string Module::repr() const {
  const State& st = *state_;
  std::ostringstream os;
  os << internal::type_name(*this) << "(";
  for (const auto& [n, p] : st.params)
    os << "\n  (" << n << "): Parameter(" << p.dtype() << p.shape() << (p.requires_grad() ? "" : ", frozen") << ")";
  for (const auto& [n, b] : st.buffers) os << "\n  (" << n << "): Buffer(" << b.dtype() << b.shape() << ")";
  for (const auto& [n, c] : st.children) os << "\n  (" << n << "): " << internal::indent(c->repr());
  const bool empty = st.params.empty() && st.buffers.empty() && st.children.empty();
  os << (empty ? ")" : "\n)");
  return os.str();
}

std::string Module::to_string() const {
  std::string s = repr();
  const int64_t all = num_parameters();
  if (all == 0) return s;
  s += "  # " + internal::group_digits(all) + (all == 1 ? " parameter" : " parameters");
  const int64_t trainable = num_parameters(true);
  if (trainable != all) s += ", " + internal::group_digits(trainable) + " trainable";
  return s;
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.to_string(); }

}  // namespace ember::nn
