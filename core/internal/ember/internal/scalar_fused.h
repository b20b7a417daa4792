// defines: the per-element rules of the fused kernels, in one place for both devices as scalar_math.h's are: batch
// norm's per-channel coefficients and the optimisers' one-element updates (SGD, Adam / AdamW). Read by core/cpu
// (norm.cpp, optim.cpp) and cuda/src/kernels (norm.cu, optim.cu).
#pragma once
#include "ember/internal/scalar_math.h"

namespace ember::scalar {

// --- batch norm (backend.h, batch_norm_*): the per-channel coefficients, in double, of its two elementwise
// passes: y = scale * x + shift, and dx = k1 * dy + k2 * x + k3 (PyTorch's formulas; k2 = k3 = 0 with fixed
// running statistics).
struct BnAffine {
  double scale, shift;
};
EMBER_HD BnAffine bn_affine(double mean, double invstd, double w, double b) {
  const double scale = invstd * w;
  return {scale, b - mean * scale};
}
struct BnBackward {
  double k1, k2, k3;
};
// dx = w * invstd * (dy - sum_dy / count - (x - mean) * invstd^2 * sum_dy_xmu / count)
EMBER_HD BnBackward bn_backward(double mean, double invstd, double w, double sum_dy, double sum_dy_xmu, double count,
                                bool batch_stats) {
  const double k1 = w * invstd;
  if (!batch_stats) return {k1, 0.0, 0.0};
  const double proj = invstd * invstd * sum_dy_xmu / count;
  return {k1, -k1 * proj, k1 * (mean * proj - sum_dy / count)};
}

// --- optimiser updates of one element, PyTorch's rules (torch.optim.SGD / Adam / AdamW, single-tensor path),
// in the parameter's type T with coefficients computed once per parameter on the host.

// SGD (b = momentum buffer, mu = momentum, tau = dampening, wd = weight decay):
//   g = g + wd * p
//   b = first step ? g : mu * b + (1 - tau) * g      (only with momentum)
//   g = nesterov ? g + mu * b : b                     (only with momentum)
//   p = p - lr * g
template <class T>
struct SgdCoeffs {
  T lr, wd, mu, one_minus_tau;
  bool first, nesterov;
};
template <class T, class Params>
SgdCoeffs<T> sgd_coeffs(const Params& h) {
  return {static_cast<T>(h.lr),
          static_cast<T>(h.weight_decay),
          static_cast<T>(h.momentum),
          static_cast<T>(1 - h.dampening),
          h.first_step,
          h.nesterov};
}
// buf: the element's momentum buffer (unused without momentum).
template <class T, bool WeightDecay, bool Momentum>
EMBER_HD void sgd_update(T& p, T g, T* buf, const SgdCoeffs<T>& c) {
  if constexpr (WeightDecay) g += c.wd * p;
  if constexpr (Momentum) {
    const T b = c.first ? g : c.mu * *buf + c.one_minus_tau * g;
    *buf = b;
    g = c.nesterov ? g + c.mu * b : b;
  }
  p -= c.lr * g;
}

// Adam / AdamW (t = the parameter's step, counted from 1; bc1 = 1 - beta1^t, bc2 = 1 - beta2^t):
//   AdamW: p = p * (1 - lr * wd)          Adam: g = g + wd * p   (L2)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   p = p - (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
// which is lr * m_hat / (sqrt(v_hat) + eps) written as PyTorch does, so eps enters at the same place.
template <class T>
struct AdamCoeffs {
  T beta1, beta2, one_minus_beta1, one_minus_beta2, eps, step_size, bc2_sqrt, wd, decay_factor;
  bool l2, decay;  // Adam's L2 term / AdamW's decoupled decay (each only with weight decay)
};
template <class T, class Params>
AdamCoeffs<T> adam_coeffs(const Params& h) {
  return {static_cast<T>(h.beta1),
          static_cast<T>(h.beta2),
          static_cast<T>(1 - h.beta1),
          static_cast<T>(1 - h.beta2),
          static_cast<T>(h.eps),
          static_cast<T>(h.lr / h.bias_correction1),
          static_cast<T>(std::sqrt(h.bias_correction2)),
          static_cast<T>(h.weight_decay),
          static_cast<T>(1 - h.lr * h.weight_decay),
          !h.decoupled && h.weight_decay != 0,
          h.decoupled && h.weight_decay != 0};
}
template <class T, bool L2, bool Decay>
EMBER_HD void adam_update(T& p, T g, T& m, T& v, const AdamCoeffs<T>& c) {
  T pi = p;
  if constexpr (L2) g += c.wd * pi;
  if constexpr (Decay) pi *= c.decay_factor;
  const T mi = c.beta1 * m + c.one_minus_beta1 * g;
  const T vi = c.beta2 * v + c.one_minus_beta2 * g * g;
  m = mi;
  v = vi;
  p = pi - c.step_size * mi / (m_sqrt(vi) / c.bc2_sqrt + c.eps);
}

}  // namespace ember::scalar
