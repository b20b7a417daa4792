// defines: the image transforms. Crop and flip move bytes (any dtype, one memcpy per row where possible), so an
// augmentation pipeline over uint8 images converts to float only once, at ToFloat.
#include "ember/data/transforms.h"

#include <cstring>

#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"

namespace ember::data::transforms {
namespace {

// x as a contiguous CPU [C, H, W] tensor (a [H, W] image gets C = 1); `op` names the transform in errors.
Tensor as_chw(const Tensor& x, const char* op) {
  EMBER_CHECK_VALUE(x.defined(), op, ": the sample is undefined");
  EMBER_CHECK_DEVICE(x.device().is_cpu(), op, ": transforms run on CPU tensors (in the DataLoader's workers), got a ",
                     x.device(), " tensor");
  EMBER_CHECK_SHAPE(x.dim() == 2 || x.dim() == 3, op, ": expected an image [C, H, W] or [H, W], got shape ", x.shape());
  Tensor c = raw::contiguous(x);
  return x.dim() == 2 ? raw::unsqueeze(c, 0) : c;
}

}  // namespace

Tensor Compose::operator()(const Tensor& x, SampleRng& rng) const {
  Tensor y = x;
  for (const Transform& t : ts_) y = t(y, rng);
  return y;
}

RandomCrop::RandomCrop(int64_t size, RandomCropOptions options) : size_(size), opts_(options) {
  EMBER_CHECK_VALUE(size > 0, "RandomCrop: size must be > 0, got ", size);
  EMBER_CHECK_VALUE(options.padding >= 0, "RandomCrop: padding must be >= 0, got ", options.padding);
}

Tensor RandomCrop::operator()(const Tensor& x_in, SampleRng& rng) const {
  Tensor x = as_chw(x_in, "RandomCrop");
  const int64_t C = x.size(0), H = x.size(1), W = x.size(2), p = opts_.padding;
  EMBER_CHECK_SHAPE(H + 2 * p >= size_ && W + 2 * p >= size_, "RandomCrop: a ", size_, "x", size_,
                    " crop does not fit an image of ", H, "x", W, " with padding ", p);
  // Top-left corner of the window in padded coordinates.
  const int64_t top = rng.randint(0, H + 2 * p - size_ + 1), left = rng.randint(0, W + 2 * p - size_ + 1);
  Tensor out = full({C, size_, size_}, opts_.fill, {.dtype = x.dtype()});
  const size_t item = itemsize(x.dtype());
  const auto* src = static_cast<const unsigned char*>(x.data_ptr());
  auto* dst = static_cast<unsigned char*>(out.data_ptr());
  // The window's columns that fall inside the image: [c0, c1) in output coordinates.
  const int64_t c0 = std::max<int64_t>(0, p - left), c1 = std::min<int64_t>(size_, W + p - left);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t r = 0; r < size_; ++r) {
      const int64_t sr = top + r - p;
      if (sr < 0 || sr >= H || c1 <= c0) continue;
      std::memcpy(dst + ((c * size_ + r) * size_ + c0) * item, src + ((c * H + sr) * W + (left + c0 - p)) * item,
                  static_cast<size_t>(c1 - c0) * item);
    }
  return x_in.dim() == 2 ? raw::squeeze(out, 0) : out;
}

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  EMBER_CHECK_VALUE(p >= 0 && p <= 1, "RandomHorizontalFlip: p must be in [0, 1], got ", p);
}

Tensor RandomHorizontalFlip::operator()(const Tensor& x_in, SampleRng& rng) const {
  Tensor x = as_chw(x_in, "RandomHorizontalFlip");
  if (!rng.bernoulli(p_)) return x_in;
  const int64_t rows = x.size(0) * x.size(1), W = x.size(2);
  const size_t item = itemsize(x.dtype());
  Tensor out = empty(x.shape(), {.dtype = x.dtype()});
  const auto* src = static_cast<const unsigned char*>(x.data_ptr());
  auto* dst = static_cast<unsigned char*>(out.data_ptr());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t w = 0; w < W; ++w) std::memcpy(dst + (r * W + w) * item, src + (r * W + (W - 1 - w)) * item, item);
  return x_in.dim() == 2 ? raw::squeeze(out, 0) : out;
}

Tensor ToFloat::operator()(const Tensor& x, SampleRng&) const {
  EMBER_CHECK_VALUE(x.defined(), "ToFloat: the sample is undefined");
  Tensor f = raw::cast(x, kFloat32);
  return x.dtype() == kUInt8 ? raw::binary(BinaryOp::Mul, f, Scalar(1.0 / 255.0)) : f;
}

Normalize::Normalize(std::vector<double> mean, std::vector<double> std) {
  EMBER_CHECK_VALUE(!mean.empty() && mean.size() == std.size(), "Normalize: mean and std need one value per ",
                    "channel each, got ", mean.size(), " and ", std.size());
  // (x - m) / s = x * (1 / s) + (-m / s): one multiply-add per element, coefficients computed once here.
  for (size_t c = 0; c < mean.size(); ++c) {
    EMBER_CHECK_VALUE(std[c] > 0, "Normalize: std must be > 0, got ", std[c]);
    scale_.push_back(1.0 / std[c]);
    shift_.push_back(-mean[c] / std[c]);
  }
}

Tensor Normalize::operator()(const Tensor& x_in, SampleRng&) const {
  EMBER_CHECK_VALUE(x_in.defined(), "Normalize: the sample is undefined");
  EMBER_CHECK_DTYPE(x_in.dtype() == kFloat32 || x_in.dtype() == kFloat64,
                    "Normalize: expects a float32 or float64 tensor (put ToFloat before it), got ", x_in.dtype());
  EMBER_CHECK_DEVICE(x_in.device().is_cpu(), "Normalize: transforms run on CPU tensors, got a ", x_in.device(),
                     " tensor");
  EMBER_CHECK_SHAPE(x_in.dim() >= 1 && x_in.size(0) == static_cast<int64_t>(scale_.size()),
                    "Normalize: ", scale_.size(), " channels of mean/std for a sample of shape ", x_in.shape(),
                    " (dim 0 is the channel)");
  const Tensor x = raw::contiguous(x_in);
  Tensor out = empty(x.shape(), {.dtype = x.dtype()});
  const int64_t per = x.numel() / x.size(0);
  auto apply = [&]<class T>() {
    const T* src = static_cast<const T*>(x.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
    for (size_t c = 0; c < scale_.size(); ++c) {
      const T a = static_cast<T>(scale_[c]), b = static_cast<T>(shift_[c]);
      for (int64_t j = 0; j < per; ++j) dst[c * per + j] = src[c * per + j] * a + b;
    }
  };
  if (x.dtype() == kFloat32) apply.template operator()<float>();
  else apply.template operator()<double>();
  return out;
}

}  // namespace ember::data::transforms
