// defines: nn::ModuleList and nn::ModuleDict — modules that only hold other modules (kept with their own types,
// as in a Chain), registered as children so that their parameters are the container's. Neither has a forward:
// the model that owns one calls its elements.
//
//   struct Tower : nn::Module {
//     nn::ModuleList blocks{nn::Dense(8, 8, nn::relu), nn::Dense(8, 8, nn::relu)};
//     nn::ModuleDict heads{{"cls", nn::Dense(8, 10)}, {"reg", nn::Dense(8, 1)}};
//     Tower() { register_module("blocks", blocks); register_module("heads", heads); }
//     Tensor forward(const Tensor& x) override {
//       Tensor h = x;
//       for (nn::Module& b : blocks) h = b(h);
//       return heads["cls"](h);
//     }
//   };
#pragma once
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ember/nn/layers.h"
#include "ember/nn/module.h"

namespace ember::nn {

// Modules named "0", "1", ... in insertion order. Copies share the list: push_back through one is seen by all.
class ModuleList : public Module {
  using Items = std::vector<std::shared_ptr<Module>>;

 public:
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Module;
    using difference_type = std::ptrdiff_t;
    using pointer = Module*;
    using reference = Module&;
    iterator() = default;
    explicit iterator(Items::const_iterator it) : it_(it) {}
    Module& operator*() const { return **it_; }
    Module* operator->() const { return it_->get(); }
    iterator& operator++() {
      ++it_;
      return *this;
    }
    iterator operator++(int) {
      iterator t = *this;
      ++it_;
      return t;
    }
    bool operator==(const iterator&) const = default;

   private:
    Items::const_iterator it_;
  };

  ModuleList() = default;
  ModuleList(std::initializer_list<ChainItem> items);
  void push_back(const ChainItem& item);
  void append(const ChainItem& item) { push_back(item); }
  // The i-th module (callable: list[i](x)); IndexError past the end.
  Module& operator[](size_t i) const;
  size_t size() const { return items_->size(); }
  bool empty() const { return items_->empty(); }
  iterator begin() const { return iterator(items_->begin()); }
  iterator end() const { return iterator(items_->end()); }
  // Throws: a ModuleList is not a layer (use a Chain to apply modules in sequence).
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<Items> items_ = std::make_shared<Items>();
};

// Modules under string keys (which become their parameters' name prefixes), in insertion order. Copies share
// the dictionary.
class ModuleDict : public Module {
  using Items = std::vector<std::pair<std::string, std::shared_ptr<Module>>>;

 public:
  class iterator {  // yields (key, module) pairs of references: for (auto [key, m] : dict)
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = std::pair<const std::string&, Module&>;
    using difference_type = std::ptrdiff_t;
    using reference = value_type;
    iterator() = default;
    explicit iterator(Items::const_iterator it) : it_(it) {}
    value_type operator*() const { return {it_->first, *it_->second}; }
    iterator& operator++() {
      ++it_;
      return *this;
    }
    iterator operator++(int) {
      iterator t = *this;
      ++it_;
      return t;
    }
    bool operator==(const iterator&) const = default;

   private:
    Items::const_iterator it_;
  };

  ModuleDict() = default;
  ModuleDict(std::initializer_list<std::pair<std::string, ChainItem>> items);
  // Adds `item` under `key`; ValueError when the key is taken, empty or contains '.'.
  void insert(const std::string& key, const ChainItem& item);
  // The module under `key` (callable: dict["head"](x)); ValueError naming the key when there is none.
  Module& operator[](const std::string& key) const;
  Module& at(const std::string& key) const { return (*this)[key]; }
  bool contains(const std::string& key) const;
  std::vector<std::string> keys() const;  // in insertion order
  size_t size() const { return items_->size(); }
  bool empty() const { return items_->empty(); }
  iterator begin() const { return iterator(items_->begin()); }
  iterator end() const { return iterator(items_->end()); }
  // Throws: a ModuleDict is not a layer.
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<Items> items_ = std::make_shared<Items>();
};

}  // namespace ember::nn
