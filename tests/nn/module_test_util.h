// defines: what the module tests share — names() of a named list, and Net, the user module of module.h's header
// comment plus a parameter and a buffer of its own (12*8 + 8 + 8*3 + 3 + 3 = 134 parameters).
#pragma once
#include <string>
#include <vector>

#include "test_util.h"

namespace ember::test {

template <class Pairs>
std::vector<std::string> names(const Pairs& named) {
  std::vector<std::string> out;
  for (const auto& [n, _] : named) out.push_back(n);
  return out;
}

struct Net : nn::Module {
  nn::Dense fc1{12, 8, nn::relu}, fc2{8, 3};
  Tensor scale, count;
  Net() {
    scale = register_parameter("scale", ones({3}));
    count = register_buffer("count", zeros({}, {.dtype = kInt64}));
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) override { return fc2(fc1(x.flatten(1))) * scale; }
};

}  // namespace ember::test
