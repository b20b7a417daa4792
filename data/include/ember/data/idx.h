// defines: read_idx, the reader for MNIST-format IDX files (plain or .gz), giving a kUInt8, kInt32 or
// kFloat32 tensor of the file's shape. Missing, truncated or malformed files throw IOError naming the file.
#pragma once
#include <string>

#include "ember/core/tensor.h"

namespace ember::data {

Tensor read_idx(const std::string& path);

}  // namespace ember::data
