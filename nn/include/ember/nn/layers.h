// defines: the built-in layers — Dense, Chain, Conv2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten, Dropout,
// BatchNorm1d/2d, LayerNorm, RMSNorm, Embedding and Lambda. Default initialisation follows PyTorch
// (Kaiming-uniform weights with a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for
// biases).
//
//   nn::Chain model{nn::Flatten(), nn::Dense(784, 128, nn::relu), nn::Dense(128, 10)};
//   Tensor logits = model(x);
#pragma once
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <vector>

#include "ember/nn/activations.h"
#include "ember/nn/module.h"

namespace ember::nn {

struct DenseOptions {
  bool bias = true;
};
// Flux's Dense: y = activation(x W^T + b), weight [out, in].
class Dense : public Module {
 public:
  Dense(int64_t in, int64_t out, Activation activation = identity, DenseOptions opts = {});
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;
  Tensor weight() const { return weight_; }
  Tensor bias() const { return bias_; }

 private:
  Tensor weight_, bias_;
  Activation act_;
};

class ChainItem;

// Wraps any callable Tensor -> Tensor as a module (an activation in a Chain, a reshape, ...).
class Lambda : public Module {
 public:
  explicit Lambda(std::function<Tensor(const Tensor&)> f, std::string name = "Lambda");
  Tensor forward(const Tensor& x) override { return f_(x); }
  std::string repr() const override { return name_; }
  // The activation (relu, gelu, ...) when this is a Chain's activation member; null for any other Lambda.
  Activation activation() const { return activation_; }

 private:
  friend class ChainItem;
  std::function<Tensor(const Tensor&)> f_;
  std::string name_;
  Activation activation_ = nullptr;
};

// An element of a Chain: any module (kept with its own type) or an activation function.
class ChainItem {
 public:
  template <class M, class = std::enable_if_t<std::is_base_of_v<Module, M>>>
  ChainItem(const M& m) : m_(Module::share_handle(m)) {}  // NOLINT: implicit on purpose
  ChainItem(Activation f);                                // NOLINT
  std::shared_ptr<Module> module() const { return m_; }

 private:
  std::shared_ptr<Module> m_;
};

// Flux's Chain / torch Sequential: applies its members left to right. Members are named "0", "1", ...
// relu followed by MaxPool2d runs as the pool first and relu on its result: a max commutes with any
// non-decreasing function, so the values and gradients are the same (docs/nn.md has the two signed-zero edges), and
// relu touches a quarter of the data (2 x 2 windows, stride 2). Not when either member has hooks (they would see
// the tensors of the other order).
class Chain : public Module {
 public:
  Chain() = default;
  Chain(std::initializer_list<ChainItem> items);
  void push_back(const ChainItem& item);
  Module& operator[](size_t i) const;
  size_t size() const { return layers_->size(); }
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  // Shared, like the Module state, so that push_back through one handle is seen by its copies.
  using Layers = std::vector<std::shared_ptr<Module>>;
  std::shared_ptr<Layers> layers_ = std::make_shared<Layers>();
};

struct Conv2dOptions {
  int64_t stride = 1, padding = 0;
  bool bias = true;
};
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, Conv2dOptions opts = {});
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;
  Tensor weight() const { return weight_; }
  Tensor bias() const { return bias_; }

 private:
  Tensor weight_, bias_;
  Conv2dOptions opts_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0);  // stride 0: = kernel
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  int64_t k_, s_;
};
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel, int64_t stride = 0);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  int64_t k_, s_;
};

// GELU as a module (torch.nn.GELU): exact by default, the tanh approximation with {.approximate = Tanh}.
class GELU : public Module {
 public:
  explicit GELU(GeluOptions opts = {}) : opts_(opts) {}
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  GeluOptions opts_;
};

// Averages x [N, C, H, W] (or [C, H, W]) over PyTorch's adaptive bins to [N, C, oh, ow]
// (adaptive_avg_pool2d; AdaptiveAvgPool2d(1) is global average pooling).
class AdaptiveAvgPool2d : public Module {
 public:
  AdaptiveAvgPool2d(int64_t oh, int64_t ow);
  explicit AdaptiveAvgPool2d(int64_t size) : AdaptiveAvgPool2d(size, size) {}
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  int64_t oh_, ow_;
};

// Flattens every dim from start_dim on (default 1: keeps the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1) : start_(start_dim) {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_); }
  std::string repr() const override { return "Flatten()"; }

 private:
  int64_t start_;
};

// Zeroes each element with probability p while training (scaling the rest by 1/(1-p)); identity in eval.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  double p_;
};

struct BatchNormOptions {
  double eps = 1e-5, momentum = 0.1;
  bool affine = true;
  // relu of the output in the same pass (batch_norm_relu): for a BatchNorm whose output only a ReLU reads, as in
  // ResNet's blocks; the normalised tensor is never written. The parameters and state dict are the same.
  bool relu = false;
};
// Normalises over the batch (and spatial dims for 2-D) with batch statistics while training, updating
// running_mean / running_var (unbiased) buffers; uses the running statistics in eval.
class BatchNorm : public Module {
 public:
  BatchNorm(int64_t features, int spatial_dims, BatchNormOptions opts = {});
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  int64_t n_;
  int spatial_;
  BatchNormOptions opts_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_;
};
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t features, BatchNormOptions opts = {}) : BatchNorm(features, 0, opts) {}
};
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t channels, BatchNormOptions opts = {}) : BatchNorm(channels, 2, opts) {}
};

struct LayerNormOptions {
  double eps = 1e-5;
  bool affine = true;
};
// Normalises over the last dim (of size n) of each sample.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t n, LayerNormOptions opts = {});
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  int64_t n_;
  LayerNormOptions opts_;
  Tensor weight_, bias_;
};

struct RMSNormOptions {
  std::optional<double> eps;  // default: the machine epsilon of the input's dtype, as PyTorch's
  bool elementwise_affine = true;
};
// Root-mean-square normalisation over the last dim (of size n), with a learnable `weight` (initialised to 1), as
// torch.nn.RMSNorm.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t n, RMSNormOptions opts = {});
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  int64_t n_;
  RMSNormOptions opts_;
  Tensor weight_;
};

struct EmbeddingOptions {
  // A row that pads sequences (PyTorch's padding_idx, negative counts from the end): it starts at zero and gets no
  // gradient, so it stays what it is set to.
  std::optional<int64_t> padding_idx;
};

// A lookup table: kInt64 indices of any shape -> their rows of weight [n, d] (initialised N(0, 1)).
class Embedding : public Module {
 public:
  Embedding(int64_t n, int64_t d, EmbeddingOptions opts = {});
  Tensor forward(const Tensor& indices) override;
  std::string repr() const override;
  Tensor weight() const { return weight_; }
  std::optional<int64_t> padding_idx() const { return padding_idx_; }  // in [0, n)

 private:
  Tensor weight_;
  std::optional<int64_t> padding_idx_;
};

}  // namespace ember::nn
