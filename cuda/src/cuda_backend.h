// defines: CudaBackend, ember::Backend for one CUDA device: its allocator (the caching allocator), copies
// (on the device, host <-> device, device <-> device; rules in docs/cuda.md), fill and the compute ops
// (own kernels in kernels/, cuBLAS matmul, cuDNN conv2d; docs/cuda.md "Compute ops"). Private to cuda/src;
// one instance per device, handed out by detail::backend (runtime.cpp).
#pragma once
#include "ember/core/backend.h"

namespace ember::cuda {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {}  // makes no CUDA call
  DeviceType type() const override { return DeviceType::CUDA; }
  int device() const { return device_; }
  Allocator& allocator(int device_index) override;
  void synchronize(int device_index) override;

  // Work is queued on the current stream of the CUDA device involved (see Note [Default stream]).
  void copy(const Tensor& dst, const Tensor& src, bool non_blocking = false) override;
  void fill(const Tensor& dst, double v) override;

  // Compute ops: argument contracts in ember/core/backend.h.
  void unary(UnaryOp op, const Tensor& out, const Tensor& x) override;
  void clamp(const Tensor& out, const Tensor& x, double lo, double hi) override;
  void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) override;
  void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) override;
  void reduce(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims) override;
  void matmul(const Tensor& out, const Tensor& a, const Tensor& b) override;
  void softmax(const Tensor& out, const Tensor& x, int64_t dim, bool log) override;
  void cumsum(const Tensor& out, const Tensor& x, int64_t dim, bool reverse) override;
  void argsort(const Tensor& out, const Tensor& x, bool descending) override;
  void conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) override;
  void conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx, const Tensor& gw,
                       const Tensor& gb, const Conv2dParams& p) override;
  void pool2d(PoolKind kind, const Tensor& out, const Tensor& x, const Pool2dParams& p) override;
  void pool2d_backward(PoolKind kind, const Tensor& gx, const Tensor& gy, const Tensor& x,
                       const Pool2dParams& p) override;
  void attention(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                 const Tensor& mask, const AttentionParams& p) override;  // attention.cpp
  void attention_backward(const Tensor& gq, const Tensor& gk, const Tensor& gv, const Tensor& gout, const Tensor& q,
                          const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, const Tensor& mask,
                          const AttentionParams& p) override;
  void index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) override;
  void check_range(const Tensor& minmax, int64_t lo, int64_t hi, const RangeMessage& message) override;
  void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) override;
  void row_norm(const RowNormArgs& a) override;  // norm.cpp
  void row_norm_backward(const RowNormGradArgs& a) override;
  void random(RandomKind kind, const Tensor& out, double lo, double hi, PhiloxState state) override;
  void batch_norm_stats(const Tensor& mean, const Tensor& var, const Tensor& x) override;  // norm.cpp
  void batch_norm_elemt(const BatchNormElemtArgs& a) override;
  void batch_norm_backward_reduce(const Tensor& sum_dy, const Tensor& sum_dy_xmu, const Tensor& dy, const Tensor& x,
                                  const Tensor& mean) override;
  void batch_norm_backward_elemt(const BatchNormGradElemtArgs& a) override;
  void sgd_step(const SgdStepArgs& a) override;
  void adam_step(const AdamStepArgs& a) override;
  void amp_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale) override;

 private:
  int device_;
};

namespace detail {
// A copy of the CPU tensor `t` in pinned (page-locked) host memory (Tensor::pin_memory, through the hooks).
Tensor pin(const Tensor& t);
}  // namespace detail

}  // namespace ember::cuda
