// defines: the built-in layers of layers.h.
#include "ember/nn/layers.h"

#include <cmath>
#include <sstream>
#include <typeinfo>

#include "ember/autograd/grad_mode.h"
#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"
#include "module_state.h"

namespace ember::nn {

std::string activation_name(Activation f) {
  if (f == identity) return "identity";
  if (f == relu) return "relu";
  if (f == sigmoid) return "sigmoid";
  if (f == tanh) return "tanh";
  if (f == gelu) return "gelu";
  if (f == gelu_tanh) return "gelu_tanh";
  return "fn";
}

namespace {
// PyTorch's default for Linear/Conv: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases.
Tensor init_uniform(const Shape& shape, int64_t fan_in) {
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  return uniform(shape, -bound, bound);
}
void check_positive(const char* layer, const char* what, int64_t v) {
  EMBER_CHECK_VALUE(v > 0, layer, ": ", what, " must be positive, got ", v);
}
}  // namespace

// --- Dense
Dense::Dense(int64_t in, int64_t out, Activation activation, DenseOptions opts) : act_(activation) {
  check_positive("Dense", "in", in);
  check_positive("Dense", "out", out);
  EMBER_CHECK_VALUE(activation != nullptr, "Dense: activation is null (use nn::identity)");
  weight_ = register_parameter("weight", init_uniform({out, in}, in));
  if (opts.bias) bias_ = register_parameter("bias", init_uniform({out}, in));
}
Tensor Dense::forward(const Tensor& x) {
  EMBER_CHECK_SHAPE(x.dim() >= 1 && x.size(-1) == weight_.size(1), repr(), ": expected input with last dim ",
                    weight_.size(1), ", got ", x.shape());
  Tensor y = linear(x, weight_, bias_);
  return act_ == identity ? y : act_(y);
}
std::string Dense::repr() const {
  std::ostringstream os;
  os << "Dense(" << weight_.size(1) << " => " << weight_.size(0);
  if (act_ != identity) os << ", " << activation_name(act_);
  if (!bias_.defined()) os << "; bias=false";
  os << ")";
  return os.str();
}

// --- Lambda and Chain
Lambda::Lambda(std::function<Tensor(const Tensor&)> f, std::string name) : f_(std::move(f)), name_(std::move(name)) {
  EMBER_CHECK_VALUE(static_cast<bool>(f_), "Lambda: empty function");
}

ChainItem::ChainItem(Activation f) {
  EMBER_CHECK_VALUE(f != nullptr, "Chain: null activation");
  auto m = std::make_shared<Lambda>(f, activation_name(f));
  m->activation_ = f;
  m_ = m;
}

Chain::Chain(std::initializer_list<ChainItem> items) {
  for (const ChainItem& it : items) push_back(it);
}
void Chain::push_back(const ChainItem& item) {
  add_child(std::to_string(layers_->size()), item.module());
  layers_->push_back(item.module());
}
Module& Chain::operator[](size_t i) const {
  EMBER_CHECK_INDEX(i < layers_->size(), "Chain: index ", i, " is out of range for a chain of ", layers_->size());
  return *(*layers_)[i];
}
namespace {
// Whether members a, b are relu then MaxPool2d itself (not a subclass, whose forward may be anything), with no
// hooks: relu(max_pool(x)) is max_pool(relu(x)) in value and gradient. Where a window's max is positive both pass
// the gradient to the same element (the first of equal maxima); where it is not, relu's gradient there is 0 in both
// orders. The CNN's first relu over its [64, 32, 28, 28] convolution output was ~5% of a training step.
bool relu_then_max_pool(const Module& a, const Module& b) {
  const auto* act = dynamic_cast<const Lambda*>(&a);
  return act && act->activation() == relu && typeid(b) == typeid(MaxPool2d) && !a.has_hooks() && !b.has_hooks();
}
}  // namespace

Tensor Chain::forward(const Tensor& x) {
  const Layers& ms = *layers_;
  Tensor h = x;
  for (size_t i = 0; i < ms.size(); ++i) {  // operator(): the members' hooks run
    if (i + 1 < ms.size() && relu_then_max_pool(*ms[i], *ms[i + 1])) {
      h = (*ms[i])((*ms[i + 1])(h));
      ++i;
    } else {
      h = (*ms[i])(h);
    }
  }
  return h;
}
std::string Chain::repr() const {
  std::ostringstream os;
  os << "Chain(";
  for (const auto& m : *layers_) os << "\n  " << internal::indent(m->repr()) << ",";
  os << (layers_->empty() ? ")" : "\n)");
  return os.str();
}

// --- Conv2d and pools
Conv2d::Conv2d(int64_t in, int64_t out, int64_t k, Conv2dOptions opts) : opts_(opts) {
  check_positive("Conv2d", "in_channels", in);
  check_positive("Conv2d", "out_channels", out);
  check_positive("Conv2d", "kernel", k);
  check_positive("Conv2d", "stride", opts.stride);
  EMBER_CHECK_VALUE(opts.padding >= 0, "Conv2d: padding must be >= 0, got ", opts.padding);
  weight_ = register_parameter("weight", init_uniform({out, in, k, k}, in * k * k));
  if (opts.bias) bias_ = register_parameter("bias", init_uniform({out}, in * k * k));
}
Tensor Conv2d::forward(const Tensor& x) { return conv2d(x, weight_, bias_, {opts_.stride}, {opts_.padding}); }
std::string Conv2d::repr() const {
  std::ostringstream os;
  os << "Conv2d(" << weight_.size(1) << " => " << weight_.size(0) << ", " << weight_.size(2) << "x" << weight_.size(3);
  if (opts_.stride != 1) os << ", stride=" << opts_.stride;
  if (opts_.padding != 0) os << ", padding=" << opts_.padding;
  if (!bias_.defined()) os << ", bias=false";
  os << ")";
  return os.str();
}
MaxPool2d::MaxPool2d(int64_t k, int64_t s) : k_(k), s_(s == 0 ? k : s) {
  check_positive("MaxPool2d", "kernel", k);
  check_positive("MaxPool2d", "stride", s_);
}
Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, {k_}, {s_}); }
std::string MaxPool2d::repr() const {
  return detail::str("MaxPool2d(", k_, s_ != k_ ? detail::str(", stride=", s_) : "", ")");
}
AvgPool2d::AvgPool2d(int64_t k, int64_t s) : k_(k), s_(s == 0 ? k : s) {
  check_positive("AvgPool2d", "kernel", k);
  check_positive("AvgPool2d", "stride", s_);
}
Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, {k_}, {s_}); }
std::string AvgPool2d::repr() const {
  return detail::str("AvgPool2d(", k_, s_ != k_ ? detail::str(", stride=", s_) : "", ")");
}
AdaptiveAvgPool2d::AdaptiveAvgPool2d(int64_t oh, int64_t ow) : oh_(oh), ow_(ow) {
  check_positive("AdaptiveAvgPool2d", "output height", oh);
  check_positive("AdaptiveAvgPool2d", "output width", ow);
}
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return adaptive_avg_pool2d(x, {oh_, ow_}); }
Tensor GELU::forward(const Tensor& x) { return ember::gelu(x, opts_); }
std::string GELU::repr() const {
  return opts_.approximate == GeluApproximate::Tanh ? "GELU(approximate=tanh)" : "GELU()";
}

std::string AdaptiveAvgPool2d::repr() const {
  return oh_ == ow_ ? detail::str("AdaptiveAvgPool2d(", oh_, ")")
                    : detail::str("AdaptiveAvgPool2d((", oh_, ", ", ow_, "))");
}

// --- Dropout
Dropout::Dropout(double p) : p_(p) { EMBER_CHECK_VALUE(p >= 0 && p <= 1, "Dropout: p must be in [0, 1], got ", p); }
Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0) return x;
  if (p_ == 1) return x * 0.0;
  Tensor keep = ge(rand(x.shape(), {.dtype = x.dtype(), .device = x.device()}), p_).to(x.dtype());
  return x * (keep * (1.0 / (1.0 - p_)));
}
std::string Dropout::repr() const { return detail::str("Dropout(", p_, ")"); }

// --- BatchNorm
BatchNorm::BatchNorm(int64_t n, int spatial, BatchNormOptions opts) : n_(n), spatial_(spatial), opts_(opts) {
  check_positive(spatial ? "BatchNorm2d" : "BatchNorm1d", "features", n);
  EMBER_CHECK_VALUE(opts.eps > 0 && opts.momentum >= 0 && opts.momentum <= 1,
                    "BatchNorm: need eps > 0 and momentum in [0, 1]");
  if (opts.affine) {
    weight_ = register_parameter("weight", ones({n}));
    bias_ = register_parameter("bias", zeros({n}));
  }
  running_mean_ = register_buffer("running_mean", zeros({n}));
  running_var_ = register_buffer("running_var", ones({n}));
  num_batches_ = register_buffer("num_batches_tracked", zeros({}, {.dtype = kInt64}));
}
Tensor BatchNorm::forward(const Tensor& x) {
  const char* name = spatial_ ? "BatchNorm2d" : "BatchNorm1d";
  const bool ok = spatial_ ? x.dim() == 4 : (x.dim() == 2 || x.dim() == 3);
  EMBER_CHECK_SHAPE(ok && x.size(1) == n_, name, "(", n_, "): expected input ",
                    spatial_ ? "[N, C, H, W]" : "[N, C] or [N, C, L]", " with C = ", n_, ", got ", x.shape());
  if (is_training())
    EMBER_CHECK_VALUE(x.numel() / n_ > 1, name, ": training needs more than one value per channel, got input ",
                      x.shape());
  // one fused op: statistics in one pass, normalisation in another, and a two-pass backward; the running
  // statistics move (in place, outside the graph) when training
  const Tensor w = opts_.affine ? weight_ : Tensor(), b = opts_.affine ? bias_ : Tensor();
  Tensor y = opts_.relu
                 ? batch_norm_relu(x, running_mean_, running_var_, w, b, is_training(), opts_.momentum, opts_.eps)
                 : batch_norm(x, running_mean_, running_var_, w, b, is_training(), opts_.momentum, opts_.eps);
  if (is_training()) {
    NoGradGuard g;
    num_batches_.add_(1);
  }
  return y;
}
std::string BatchNorm::repr() const {
  return detail::str(spatial_ ? "BatchNorm2d(" : "BatchNorm1d(", n_, opts_.relu ? ", relu = true" : "", ")");
}

// --- LayerNorm
LayerNorm::LayerNorm(int64_t n, LayerNormOptions opts) : n_(n), opts_(opts) {
  check_positive("LayerNorm", "n", n);
  if (opts.affine) {
    weight_ = register_parameter("weight", ones({n}));
    bias_ = register_parameter("bias", zeros({n}));
  }
}
Tensor LayerNorm::forward(const Tensor& x) {
  EMBER_CHECK_SHAPE(x.dim() >= 1 && x.size(-1) == n_, "LayerNorm(", n_, "): expected last dim ", n_, ", got ",
                    x.shape());
  return opts_.affine ? layer_norm(x, {n_}, weight_, bias_, opts_.eps) : layer_norm(x, {n_}, {}, {}, opts_.eps);
}
std::string LayerNorm::repr() const {
  return detail::str("LayerNorm(", n_, opts_.eps != LayerNormOptions{}.eps ? detail::str(", eps = ", opts_.eps) : "",
                     ")");
}

// --- RMSNorm
RMSNorm::RMSNorm(int64_t n, RMSNormOptions opts) : n_(n), opts_(opts) {
  check_positive("RMSNorm", "n", n);
  if (opts.elementwise_affine) weight_ = register_parameter("weight", ones({n}));
}
Tensor RMSNorm::forward(const Tensor& x) {
  EMBER_CHECK_SHAPE(x.defined() && x.dim() >= 1 && x.size(-1) == n_, "RMSNorm(", n_, "): expected last dim ", n_,
                    ", got ", x.defined() ? x.shape() : Shape{});
  return rms_norm(x, {n_}, weight_, opts_.eps);
}
std::string RMSNorm::repr() const { return detail::str("RMSNorm(", n_, ")"); }

// --- Embedding
Embedding::Embedding(int64_t n, int64_t d, EmbeddingOptions opts) {
  check_positive("Embedding", "n", n);
  check_positive("Embedding", "d", d);
  if (opts.padding_idx) {
    const int64_t p = *opts.padding_idx;
    EMBER_CHECK_VALUE(p >= -n && p < n, "Embedding(", n, ", ", d, "): padding_idx ", p,
                      " must be within num_embeddings (", -n, " <= padding_idx < ", n, ")");
    padding_idx_ = p < 0 ? p + n : p;
  }
  Tensor w = randn({n, d});
  if (padding_idx_) w.select(0, *padding_idx_).zero_();
  weight_ = register_parameter("weight", w);
}
Tensor Embedding::forward(const Tensor& idx) {
  EMBER_CHECK(idx.defined(), Error, repr(), ": the indices are an undefined tensor");
  EMBER_CHECK_DTYPE(idx.dtype() == kInt64 || idx.dtype() == kInt32, repr(), ": indices must be int64 or int32, got ",
                    idx.dtype());
  const Tensor flat = idx.reshape({-1});
  const int64_t n = weight_.size(0);
  // Checked here so the message names the layer (on a GPU without a host wait, as index_select's own check).
  raw::check_index_range(flat, 0, n, [n, who = repr()](int64_t lo, int64_t hi) {
    return detail::str(who, ": index ", lo < 0 ? lo : hi, " is out of range for num_embeddings = ", n);
  });
  Tensor y = index_select(weight_, 0, flat);
  // The padding row's uses pass no gradient (its value is read as it is).
  if (padding_idx_) y = where(eq(flat, static_cast<double>(*padding_idx_)).unsqueeze(1), y.detach(), y);
  Shape out = idx.shape();
  out.push_back(weight_.size(1));
  return y.reshape(out);
}
std::string Embedding::repr() const {
  return detail::str("Embedding(", weight_.size(0), " => ", weight_.size(1),
                     padding_idx_ ? detail::str(", padding_idx = ", *padding_idx_) : std::string(), ")");
}

}  // namespace ember::nn
