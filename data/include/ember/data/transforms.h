// defines: per-sample transforms (data::transforms) and Transformed, a dataset that applies them in get(i) — so on
// the DataLoader's workers — each sample drawing from its own stream (sample_rng.h): the same augmented batches for
// any num_workers, a new augmentation each epoch.
//
//   namespace T = ember::data::transforms;
//   auto train = data::Transformed(data::CIFAR10(root, data::Split::Train),
//                                  T::Compose{T::RandomCrop(32, {.padding = 4}), T::RandomHorizontalFlip(),
//                                             T::ToFloat(), T::Normalize({0.491, 0.482, 0.447}, {0.247, 0.243,
//                                             0.262})});
//   data::DataLoader loader(train, {.batch_size = 128, .shuffle = true, .num_workers = 2, .seed = 7});
//
// The image transforms take a CPU tensor [C, H, W] (any dtype; [H, W] counts as one channel) and return a new one.
#pragma once
#include <functional>
#include <utility>
#include <vector>

#include "ember/core/tensor.h"
#include "ember/data/dataset.h"
#include "ember/data/sample_rng.h"

namespace ember::data {
namespace transforms {

// Any callable Tensor(const Tensor&, SampleRng&) is a transform.
using Transform = std::function<Tensor(const Tensor&, SampleRng&)>;

// Applies its transforms in order, all drawing from the one sample stream.
class Compose {
 public:
  Compose(std::initializer_list<Transform> ts) : ts_(ts) {}
  explicit Compose(std::vector<Transform> ts) : ts_(std::move(ts)) {}
  Tensor operator()(const Tensor& x, SampleRng& rng) const;

 private:
  std::vector<Transform> ts_;
};

struct RandomCropOptions {
  int64_t padding = 0;  // pixels of `fill` added on every side before cropping
  double fill = 0;
};
// A size × size window at a uniformly random position of the (padded) image.
class RandomCrop {
 public:
  explicit RandomCrop(int64_t size, RandomCropOptions options = {});
  Tensor operator()(const Tensor& x, SampleRng& rng) const;

 private:
  int64_t size_;
  RandomCropOptions opts_;
};

// Mirrors the image left–right with probability p.
class RandomHorizontalFlip {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor operator()(const Tensor& x, SampleRng& rng) const;

 private:
  double p_;
};

// To float32; uint8 is scaled to [0, 1] (as torchvision's ToTensor), other dtypes keep their values.
struct ToFloat {
  Tensor operator()(const Tensor& x, SampleRng& rng) const;
};

// (x - mean[c]) / std[c] per channel of a float32/float64 [C, ...] tensor.
class Normalize {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std);
  Tensor operator()(const Tensor& x, SampleRng& rng) const;

 private:
  std::vector<double> scale_, shift_;  // 1 / std, -mean / std
};

}  // namespace transforms

// Dataset D with a transform applied to each sample's x (and optionally y) in get(i).
template <Dataset D>
class Transformed {
 public:
  Transformed(D dataset, transforms::Transform x_transform, transforms::Transform y_transform = {})
      : ds_(std::move(dataset)), tx_(std::move(x_transform)), ty_(std::move(y_transform)) {}
  int64_t size() const { return static_cast<int64_t>(ds_.size()); }
  Example get(int64_t i) const {
    Example e = static_cast<Example>(ds_.get(i));
    SampleRng rng = sample_rng(i);
    if (tx_) e.x = tx_(e.x, rng);
    if (ty_) e.y = ty_(e.y, rng);
    return e;
  }
  const D& base() const { return ds_; }

 private:
  mutable D ds_;  // mutable: the Dataset concept allows a non-const get()
  transforms::Transform tx_, ty_;
};

}  // namespace ember::data
