// defines: activations usable as functions (nn::relu(x)) and as Chain members or Dense activations
// (Chain{Dense(784, 128, nn::relu), nn::relu}); Activation is a plain function pointer.
#pragma once
#include <string>

#include "ember/autograd/ops.h"

namespace ember::nn {

using Activation = Tensor (*)(const Tensor&);

inline Tensor identity(const Tensor& x) { return x; }
inline Tensor relu(const Tensor& x) { return ember::relu(x); }
inline Tensor sigmoid(const Tensor& x) { return ember::sigmoid(x); }
inline Tensor tanh(const Tensor& x) { return ember::tanh(x); }
inline Tensor gelu(const Tensor& x) { return ember::gelu(x); }
inline Tensor gelu_tanh(const Tensor& x) { return ember::gelu(x, {.approximate = GeluApproximate::Tanh}); }

// "relu", "sigmoid", ... for the built-in activations, "fn" for others (used when printing layers).
std::string activation_name(Activation f);

}  // namespace ember::nn
