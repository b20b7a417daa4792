// defines: nn::init — PyTorch's torch.nn.init: in-place (re)initialisation of a tensor, usually a parameter.
// Every function works under no-grad (so parameters can be filled), on any device and floating dtype, draws from
// the current generator (manual_seed makes it reproducible), bumps the tensor's version (so autograd sees the
// change) and returns the same handle.
//
//   model.apply([](nn::Module& m) {
//     if (auto* d = dynamic_cast<nn::Dense*>(&m)) {
//       nn::init::kaiming_normal_(d->weight(), {.nonlinearity = "relu"});
//       nn::init::zeros_(d->bias());
//     }
//   });
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "ember/core/tensor.h"

namespace ember::nn::init {

// Of a weight [out, in, k...] (at least 2-D): fan_in = in * prod(k), fan_out = out * prod(k), as PyTorch's
// _calculate_fan_in_and_fan_out. ValueError for fewer than 2 dims.
struct Fans {
  int64_t fan_in = 0, fan_out = 0;
};
Fans calculate_fan_in_and_fan_out(const Tensor& t);

// The recommended gain for a nonlinearity: "linear", "conv1d"/"conv2d"/"conv3d", "sigmoid" -> 1, "tanh" -> 5/3,
// "relu" -> sqrt(2), "leaky_relu" -> sqrt(2 / (1 + slope^2)) (slope = param, default 0.01), "selu" -> 3/4.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);

// --- fills (any dtype)
Tensor constant_(const Tensor& t, double value);
Tensor zeros_(const Tensor& t);
Tensor ones_(const Tensor& t);

// --- random draws (floating dtypes; DTypeError otherwise)
Tensor uniform_(const Tensor& t, double a = 0.0, double b = 1.0);  // U(a, b)
Tensor normal_(const Tensor& t, double mean = 0.0, double std = 1.0);
// Glorot: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)); the normal one has std gain * sqrt(2 / (fan_in +
// fan_out)).
Tensor xavier_uniform_(const Tensor& t, double gain = 1.0);
Tensor xavier_normal_(const Tensor& t, double gain = 1.0);

enum FanMode { FanIn, FanOut };
struct KaimingOptions {
  double a = 0;          // the negative slope of leaky_relu
  FanMode mode = FanIn;  // FanIn keeps the forward pass's variance, FanOut the backward pass's
  std::string nonlinearity = "leaky_relu";
};
// He: std = calculate_gain(nonlinearity, a) / sqrt(fan); the uniform one draws U(-sqrt(3) std, sqrt(3) std).
Tensor kaiming_uniform_(const Tensor& t, const KaimingOptions& opts = {});
Tensor kaiming_normal_(const Tensor& t, const KaimingOptions& opts = {});

// A (semi-)orthogonal matrix of t viewed as [size(0), numel / size(0)] (at least 2-D), scaled by gain: the Q of
// the QR decomposition of a standard normal draw, signs fixed so that R's diagonal is positive (as PyTorch).
Tensor orthogonal_(const Tensor& t, double gain = 1.0);

}  // namespace ember::nn::init
