// defines: TensorDataset, a dataset over two tensors whose dim 0 indexes the samples (PyTorch's
// TensorDataset). get(i) returns views of row i; get_batch gathers rows with one index_select per tensor.
//
//   ember::data::TensorDataset ds(ember::randn({100, 3}), ember::randint(0, 2, {100}));
//   auto [x, y] = ds.get(7);   // x: [3], y: [] (views into the tensors)
#pragma once
#include <cstdint>
#include <vector>

#include "ember/core/tensor.h"
#include "ember/data/dataset.h"

namespace ember::data {

class TensorDataset {
 public:
  // Throws ShapeError unless x and y are defined, at least 1-D, and agree in dim 0.
  TensorDataset(Tensor x, Tensor y);

  int64_t size() const { return x_.size(0); }
  // Row i of x and y as views (no copy); IndexError when i is out of range.
  Example get(int64_t i) const;
  // Rows `indices` of x and y, gathered into new tensors of leading size indices.size().
  Batch get_batch(const std::vector<int64_t>& indices) const;

  const Tensor& x() const { return x_; }
  const Tensor& y() const { return y_; }

 private:
  Tensor x_, y_;
};

static_assert(BatchDataset<TensorDataset>);

}  // namespace ember::data
