// defines: nn::init. Each random initialiser draws a fresh tensor of t's shape, dtype and device from the current
// generator and copies it into t under no-grad (copy_ bumps t's version, so a graph that saved t notices).
#include "ember/nn/init.h"

#include <cmath>
#include <vector>

#include "ember/autograd/grad_mode.h"
#include "ember/core/factory.h"

namespace ember::nn::init {

namespace {
void check_defined(const Tensor& t, const char* fn) {
  EMBER_CHECK_VALUE(t.defined(), "nn::init::", fn, ": the tensor is undefined (an empty handle)");
}
void check_floating(const Tensor& t, const char* fn) {
  check_defined(t, fn);
  EMBER_CHECK_DTYPE(is_floating(t.dtype()), "nn::init::", fn, ": expected a floating tensor, got ", t.dtype(),
                    t.shape());
}
TensorOptions like(const Tensor& t) { return {.dtype = t.dtype(), .device = t.device()}; }
Tensor overwrite(const Tensor& t, const Tensor& src) {
  NoGradGuard g;
  Tensor h = t;
  h.copy_(src);
  return t;
}
Fans fans(const Tensor& t, const char* fn) {
  check_defined(t, fn);
  EMBER_CHECK_VALUE(t.dim() >= 2, "nn::init::", fn, ": fan in and fan out need a tensor of at least 2 dims ([out, in, ",
                    "...]), got ", t.dtype(), t.shape());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}
}  // namespace

Fans calculate_fan_in_and_fan_out(const Tensor& t) { return fans(t, "calculate_fan_in_and_fan_out"); }

double calculate_gain(const std::string& nl, std::optional<double> param) {
  if (nl == "linear" || nl == "conv1d" || nl == "conv2d" || nl == "conv3d" || nl == "conv_transpose1d" ||
      nl == "conv_transpose2d" || nl == "conv_transpose3d" || nl == "sigmoid")
    return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "selu") return 0.75;
  if (nl == "leaky_relu") {
    const double slope = param.value_or(0.01);
    EMBER_CHECK_VALUE(std::isfinite(slope), "nn::init::calculate_gain: negative slope ", slope, " is not finite");
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  throw ValueError(detail::str("nn::init::calculate_gain: unsupported nonlinearity \"", nl,
                               "\" (expected linear, conv1d, conv2d, conv3d, conv_transpose1d/2d/3d, sigmoid, tanh, "
                               "relu, leaky_relu or selu)"));
}

Tensor constant_(const Tensor& t, double value) {
  check_defined(t, "constant_");
  NoGradGuard g;
  Tensor h = t;
  h.fill_(value);
  return t;
}
Tensor zeros_(const Tensor& t) {
  check_defined(t, "zeros_");
  return constant_(t, 0.0);
}
Tensor ones_(const Tensor& t) {
  check_defined(t, "ones_");
  return constant_(t, 1.0);
}

Tensor uniform_(const Tensor& t, double a, double b) {
  check_floating(t, "uniform_");
  EMBER_CHECK_VALUE(a <= b, "nn::init::uniform_: expected a <= b, got [", a, ", ", b, ")");
  return overwrite(t, uniform(t.shape(), a, b, like(t)));
}
Tensor normal_(const Tensor& t, double mean, double std) {
  check_floating(t, "normal_");
  EMBER_CHECK_VALUE(std >= 0, "nn::init::normal_: std must be >= 0, got ", std);
  return overwrite(t, normal(t.shape(), mean, std, like(t)));
}

Tensor xavier_uniform_(const Tensor& t, double gain) {
  check_floating(t, "xavier_uniform_");
  const auto [in, out] = fans(t, "xavier_uniform_");
  if (t.numel() == 0) return t;
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(in + out));
  return overwrite(t, uniform(t.shape(), -bound, bound, like(t)));
}
Tensor xavier_normal_(const Tensor& t, double gain) {
  check_floating(t, "xavier_normal_");
  const auto [in, out] = fans(t, "xavier_normal_");
  if (t.numel() == 0) return t;
  return overwrite(t, normal(t.shape(), 0.0, gain * std::sqrt(2.0 / static_cast<double>(in + out)), like(t)));
}

namespace {
double kaiming_std(const Tensor& t, const KaimingOptions& o, const char* fn) {
  check_floating(t, fn);
  EMBER_CHECK_VALUE(o.mode == FanIn || o.mode == FanOut, "nn::init::", fn, ": mode must be FanIn or FanOut");
  const Fans f = fans(t, fn);
  const double gain = calculate_gain(o.nonlinearity, o.a);
  const int64_t fan = o.mode == FanIn ? f.fan_in : f.fan_out;
  return fan > 0 ? gain / std::sqrt(static_cast<double>(fan)) : 0.0;
}
}  // namespace

Tensor kaiming_uniform_(const Tensor& t, const KaimingOptions& opts) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, opts, "kaiming_uniform_");
  if (t.numel() == 0) return t;
  return overwrite(t, uniform(t.shape(), -bound, bound, like(t)));
}
Tensor kaiming_normal_(const Tensor& t, const KaimingOptions& opts) {
  const double std = kaiming_std(t, opts, "kaiming_normal_");
  if (t.numel() == 0) return t;
  return overwrite(t, normal(t.shape(), 0.0, std, like(t)));
}

Tensor orthogonal_(const Tensor& t, double gain) {
  check_floating(t, "orthogonal_");
  EMBER_CHECK_VALUE(t.dim() >= 2, "nn::init::orthogonal_: expected a tensor of at least 2 dims, got ", t.dtype(),
                    t.shape());
  if (t.numel() == 0) return t;
  const int64_t rows = t.size(0), cols = t.numel() / rows;
  const std::vector<double> draw = normal({rows, cols}, 0.0, 1.0, {.dtype = kFloat64}).to_vector<double>();
  // QR of the tall matrix A (m x n, m >= n: the draw or its transpose) by modified Gram-Schmidt, each column
  // orthogonalised twice against the previous ones (once loses orthogonality in floating point). Its R has a
  // positive diagonal, which is what PyTorch's sign fix of a Householder QR gives.
  const bool tall = rows >= cols;
  const size_t r = static_cast<size_t>(rows), c = static_cast<size_t>(cols);
  const size_t m = tall ? r : c, n = tall ? c : r;
  std::vector<std::vector<double>> q(n, std::vector<double>(m));
  for (size_t j = 0; j < n; ++j) {
    std::vector<double>& v = q[j];
    for (size_t i = 0; i < m; ++i) v[i] = tall ? draw[i * c + j] : draw[j * c + i];
    for (int pass = 0; pass < 2; ++pass)
      for (size_t k = 0; k < j; ++k) {
        double dot = 0;
        for (size_t i = 0; i < m; ++i) dot += q[k][i] * v[i];
        for (size_t i = 0; i < m; ++i) v[i] -= dot * q[k][i];
      }
    double norm = 0;
    for (double x : v) norm += x * x;
    norm = std::sqrt(norm);
    EMBER_CHECK(norm > 0, Error, "nn::init::orthogonal_: the random draw was rank deficient; call it again");
    for (double& x : v) x /= norm;
  }
  std::vector<double> out(r * c);
  for (size_t j = 0; j < n; ++j)
    for (size_t i = 0; i < m; ++i) (tall ? out[i * c + j] : out[j * c + i]) = gain * q[j][i];
  return overwrite(t, tensor(out, {rows, cols}).reshape(t.shape()).to(t.dtype()).to(t.device()));
}

}  // namespace ember::nn::init
