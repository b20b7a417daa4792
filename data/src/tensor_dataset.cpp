// defines: TensorDataset's checks and its batch gather.
#include "ember/data/tensor_dataset.h"

#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"

namespace ember::data {

TensorDataset::TensorDataset(Tensor x, Tensor y) : x_(std::move(x)), y_(std::move(y)) {
  EMBER_CHECK_SHAPE(x_.defined() && y_.defined(), "TensorDataset: x and y must be defined tensors");
  EMBER_CHECK_SHAPE(x_.dim() >= 1 && y_.dim() >= 1, "TensorDataset: x and y need a sample dim (dim 0), got x ",
                    x_.shape(), " and y ", y_.shape());
  EMBER_CHECK_SHAPE(x_.size(0) == y_.size(0), "TensorDataset: x and y must have the same size in dim 0, got x ",
                    x_.shape(), " and y ", y_.shape(), " (", x_.size(0), " != ", y_.size(0), ")");
}

Example TensorDataset::get(int64_t i) const {
  EMBER_CHECK_INDEX(i >= 0 && i < size(), "TensorDataset::get: index ", i, " is out of range for a dataset of size ",
                    size());
  return {raw::select(x_, 0, i), raw::select(y_, 0, i)};
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  // index_select checks the bounds; the index lives on the data's device, as index_select requires.
  Tensor idx = tensor(indices, Shape{static_cast<int64_t>(indices.size())}, {.dtype = kInt64, .device = x_.device()});
  Tensor idy = y_.device() == x_.device() ? idx : raw::to_device(idx, y_.device());
  return {raw::index_select(x_, 0, idx), raw::index_select(y_, 0, idy)};
}

}  // namespace ember::data
