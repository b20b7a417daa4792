// defines: CIFAR10, the CIFAR-10 dataset from its binary version (https://www.cs.toronto.edu/~kriz/cifar.html,
// "CIFAR-10 binary version": data_batch_1.bin … data_batch_5.bin, test_batch.bin; each record is a label byte and
// a 3×32×32 uint8 image, channel-major). Loaded whole at construction (150 MB for the training split).
//
//   data::CIFAR10 train("/data/cifar-10-batches-bin", data::Split::Train);   // or its parent folder
//   auto [x, y] = train.get(0);           // x: uint8 [3, 32, 32], y: int64 []
//
// Images stay uint8 (a quarter of float32's memory); transforms::ToFloat scales them to [0, 1] (transforms.h).
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "ember/core/tensor.h"
#include "ember/data/dataset.h"
#include "ember/data/tensor_dataset.h"

namespace ember::data {

class CIFAR10 {
 public:
  // Reads root/<file> or root/cifar-10-batches-bin/<file>. Throws IOError naming the path and the files looked
  // for when one is missing, and naming the file when it is truncated or holds a label outside 0..9.
  explicit CIFAR10(const std::string& root, Split split = Split::Train);

  int64_t size() const { return rows_.size(); }
  Example get(int64_t i) const { return rows_.get(i); }
  Batch get_batch(const std::vector<int64_t>& indices) const { return rows_.get_batch(indices); }
  const Tensor& images() const { return rows_.x(); }  // uint8 [N, 3, 32, 32]
  const Tensor& labels() const { return rows_.y(); }  // int64 [N]
  Split split() const { return split_; }

  static const std::array<const char*, 10>& classes();  // "airplane", "automobile", ...
  static constexpr size_t kRecordBytes = 1 + 3 * 32 * 32;
  // Parses the bytes of one batch file (any whole number of records; `what` names it in errors).
  static Batch parse_batch(const void* data, size_t size, const std::string& what);

 private:
  Split split_;
  TensorDataset rows_;
};

static_assert(BatchDataset<CIFAR10>);

}  // namespace ember::data
