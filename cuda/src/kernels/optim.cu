// defines: the fused optimiser kernels and launch_sgd / launch_adam (launch.h): one thread per element reads
// p, g and the state once and writes p and the state (llm.c's adamw kernel). The update rules and the
// order of operations are core/cpu/optim_kernels.cpp's (PyTorch's single-tensor SGD / Adam / AdamW),
// computed in the parameter's type (float32 or float64).
#include <cmath>
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

__device__ inline float m_sqrt(float v) { return sqrtf(v); }
__device__ inline double m_sqrt(double v) { return sqrt(v); }

// SGD per element: g += wd * p; b = first ? g : mu * b + (1 - tau) * g; g = nesterov ? g + mu * b : b;
// p -= lr * g (the momentum lines only with a buffer).
template <class T>
__global__ void sgd_kernel(T* p, const T* gp, T* buf, int64_t n, T lr, T wd, T mu, T one_minus_tau, bool use_wd,
                           bool first, bool nesterov) {
  EMBER_KERNEL_LOOP(i, n) {
    T g = gp[i];
    if (use_wd) g += wd * p[i];
    if (buf) {
      const T b = first ? g : mu * buf[i] + one_minus_tau * g;
      buf[i] = b;
      g = nesterov ? g + mu * b : b;
    }
    p[i] -= lr * g;
  }
}

// Adam / AdamW per element: AdamW p *= 1 - lr * wd, Adam g += wd * p; m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps).
template <class T>
__global__ void adam_kernel(T* p, const T* gp, T* m, T* v, int64_t n, T beta1, T beta2, T one_minus_beta1,
                            T one_minus_beta2, T eps, T step_size, T bc2_sqrt, bool l2, bool decay, T wd,
                            T decay_factor) {
  EMBER_KERNEL_LOOP(i, n) {
    T pi = p[i], g = gp[i];
    if (l2) g += wd * pi;
    if (decay) pi *= decay_factor;
    const T mi = beta1 * m[i] + one_minus_beta1 * g;
    const T vi = beta2 * v[i] + one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - step_size * mi / (m_sqrt(vi) / bc2_sqrt + eps);
  }
}

template <class T>
void sgd_typed(void* param, const void* grad, void* buf, int64_t n, const SgdArgs& a, CUstream_st* stream) {
  sgd_kernel<T><<<grid_size(n), kBlockSize, 0, stream>>>(
      static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(buf), n, static_cast<T>(a.lr),
      static_cast<T>(a.weight_decay), static_cast<T>(a.momentum), static_cast<T>(1 - a.dampening),
      a.weight_decay != 0, a.first_step, a.nesterov);
}

template <class T>
void adam_typed(void* param, const void* grad, void* m, void* v, int64_t n, const AdamArgs& a, CUstream_st* stream) {
  adam_kernel<T><<<grid_size(n), kBlockSize, 0, stream>>>(
      static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(m), static_cast<T*>(v), n,
      static_cast<T>(a.beta1), static_cast<T>(a.beta2), static_cast<T>(1 - a.beta1), static_cast<T>(1 - a.beta2),
      static_cast<T>(a.eps), static_cast<T>(a.lr / a.bias_correction1), static_cast<T>(std::sqrt(a.bias_correction2)),
      !a.decoupled && a.weight_decay != 0, a.decoupled && a.weight_decay != 0, static_cast<T>(a.weight_decay),
      static_cast<T>(1 - a.lr * a.weight_decay));
}

}  // namespace

void launch_sgd(ScalarType type, void* param, const void* grad, void* momentum_buf, int64_t n, const SgdArgs& a,
                CUstream_st* stream) {
  if (n == 0) return;
  if (type == ScalarType::Float64) sgd_typed<double>(param, grad, momentum_buf, n, a, stream);
  else sgd_typed<float>(param, grad, momentum_buf, n, a, stream);
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_adam(ScalarType type, void* param, const void* grad, void* exp_avg, void* exp_avg_sq, int64_t n,
                 const AdamArgs& a, CUstream_st* stream) {
  if (n == 0) return;
  if (type == ScalarType::Float64) adam_typed<double>(param, grad, exp_avg, exp_avg_sq, n, a, stream);
  else adam_typed<float>(param, grad, exp_avg, exp_avg_sq, n, a, stream);
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
