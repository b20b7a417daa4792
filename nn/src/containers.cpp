// defines: nn::ModuleList and nn::ModuleDict.
#include "ember/nn/containers.h"

#include <sstream>

namespace ember::nn {

// --- ModuleList
ModuleList::ModuleList(std::initializer_list<ChainItem> items) {
  for (const ChainItem& it : items) push_back(it);
}
void ModuleList::push_back(const ChainItem& item) {
  add_child(std::to_string(items_->size()), item.module());
  items_->push_back(item.module());
}
Module& ModuleList::operator[](size_t i) const {
  EMBER_CHECK_INDEX(i < items_->size(), "ModuleList: index ", i, " is out of range for a list of ", items_->size(),
                    " modules");
  return *(*items_)[i];
}
Tensor ModuleList::forward(const Tensor&) {
  throw Error(
      "nn::ModuleList has no forward(): it only holds modules; call them from your model's forward (for "
      "(nn::Module& m : list) x = m(x);), or use an nn::Chain");
}

// --- ModuleDict
ModuleDict::ModuleDict(std::initializer_list<std::pair<std::string, ChainItem>> items) {
  for (const auto& [key, item] : items) insert(key, item);
}
void ModuleDict::insert(const std::string& key, const ChainItem& item) {
  EMBER_CHECK_VALUE(!key.empty() && key.find('.') == std::string::npos, "ModuleDict: key \"", key,
                    "\" must be non-empty and contain no '.'");
  EMBER_CHECK_VALUE(!contains(key), "ModuleDict: key \"", key, "\" already exists");
  add_child(key, item.module());
  items_->emplace_back(key, item.module());
}
bool ModuleDict::contains(const std::string& key) const {
  for (const auto& [k, _] : *items_)
    if (k == key) return true;
  return false;
}
Module& ModuleDict::operator[](const std::string& key) const {
  for (const auto& [k, m] : *items_)
    if (k == key) return *m;
  std::ostringstream known;
  for (size_t i = 0; i < items_->size(); ++i) known << (i ? ", " : "") << '"' << (*items_)[i].first << '"';
  throw ValueError(detail::str("ModuleDict: no module under key \"", key,
                               "\" (keys: ", items_->empty() ? "none" : known.str(), ")"));
}
std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, _] : *items_) out.push_back(k);
  return out;
}
Tensor ModuleDict::forward(const Tensor&) {
  throw Error(
      "nn::ModuleDict has no forward(): it only holds modules; call them from your model's forward "
      "(dict[\"key\"](x))");
}

}  // namespace ember::nn
