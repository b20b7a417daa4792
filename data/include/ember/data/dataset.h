// defines: Example (one sample), Batch (what a DataLoader yields; `auto [x, y] = batch;`), and the Dataset
// concept: any type with size() and get(i) returning an Example is a dataset. A dataset may also offer
// get_batch(indices) -> Batch (the BatchDataset concept); DataLoader then gathers a whole batch in one call
// instead of get(i) per sample plus a stack.
//
//   struct Squares {
//     int64_t size() const { return 10; }
//     ember::data::Example get(int64_t i) const { return {ember::full({1}, i), ember::full({}, i * i)}; }
//   };
//   static_assert(ember::data::Dataset<Squares>);
#pragma once
#include <concepts>
#include <cstdint>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::data {

// Which part of a dataset with a fixed train/test split to read (MNIST, CIFAR10).
enum class Split { Train, Test };

// One sample: the input and its target (y may be left undefined for unlabelled data).
struct Example {
  Tensor x, y;
};

// A batch: the samples' x stacked along a new dim 0, likewise y.
struct Batch {
  Tensor x, y;
};

// Checked on a non-const reference, so a user type whose size()/get() are not const still qualifies.
template <class D>
concept Dataset = requires(D& d, int64_t i) {
  { d.size() } -> std::convertible_to<int64_t>;
  { d.get(i) } -> std::convertible_to<Example>;
};

// A dataset that can gather many samples at once (TensorDataset and MNIST do, with one index_select).
template <class D>
concept BatchDataset = Dataset<D> && requires(D& d, const std::vector<int64_t>& indices) {
  { d.get_batch(indices) } -> std::convertible_to<Batch>;
};

}  // namespace ember::data
