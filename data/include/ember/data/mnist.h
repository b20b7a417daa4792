// defines: Split and MNIST, the MNIST (and Fashion-MNIST: same file names and format) dataset read from
// the four IDX files in a folder, gzipped or plain. Images are kFloat32 [N, 1, 28, 28] scaled to [0, 1],
// labels kInt64 [N]; both are loaded whole at construction.
//
//   ember::data::MNIST test("/usr/share/datasets/fashion-mnist", ember::data::Split::Test);
//   auto [x, y] = test.get(0);                 // x: [1, 28, 28], y: []
//   ember::data::DataLoader loader(test, {.batch_size = 128});
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ember/core/tensor.h"
#include "ember/data/dataset.h"
#include "ember/data/tensor_dataset.h"

namespace ember::data {

class MNIST {
 public:
  // Reads root/{train,t10k}-{images-idx3,labels-idx1}-ubyte, trying the ".gz" name first, then the plain one.
  // Throws IOError naming root and the names tried when a file is missing, and when the files are not
  // MNIST-shaped (uint8 images [N, H, W], uint8 labels [N]) or their counts differ.
  explicit MNIST(const std::string& root, Split split = Split::Train);

  int64_t size() const { return rows_.size(); }
  Example get(int64_t i) const { return rows_.get(i); }  // x: [1, 28, 28] float32, y: [] int64
  Batch get_batch(const std::vector<int64_t>& indices) const { return rows_.get_batch(indices); }

  const Tensor& images() const { return rows_.x(); }  // kFloat32 [N, 1, 28, 28] in [0, 1]
  const Tensor& labels() const { return rows_.y(); }  // kInt64 [N]
  Split split() const { return split_; }

 private:
  Split split_;
  TensorDataset rows_;
};

static_assert(BatchDataset<MNIST>);

}  // namespace ember::data
