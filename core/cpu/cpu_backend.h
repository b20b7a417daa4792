// defines: CpuBackend (the Eigen/OpenMP implementation of Backend), Scratch (temporary buffers drawn from the
// caching allocator so kernels never call malloc in a steady loop), and the CPU's 16-bit float types for
// scalar::convert. Private to core/.
#pragma once
#include <cmath>
#include <limits>
#include <type_traits>

#include "ember/core/backend.h"
#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"
#include "ember/internal/scalar_math.h"
#include "isa.h"

// The CPU's 16-bit float storage types, for scalar::convert (computed in float: round to nearest even).
template <>
struct ember::scalar::ReducedFloat<ember::Half> : std::true_type {
  static float to_float(Half v) { return static_cast<float>(v); }
  static Half from_float(float v) { return Half(v); }
};
template <>
struct ember::scalar::ReducedFloat<ember::BFloat16> : std::true_type {
  static float to_float(BFloat16 v) { return static_cast<float>(v); }
  static BFloat16 from_float(float v) { return BFloat16(v); }
};

namespace ember::cpu {

using scalar::convert;
using scalar::is_reduced_v;

// A temporary contiguous buffer, reused from call to call (Note [Scratch arenas] in linalg.cpp).
class Scratch {
 public:
  explicit Scratch(size_t nbytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_;
  void* arena_;  // the arena it came from, given back to in the destructor
};

// Reduced floats (float16/bfloat16) are computed in float32: these give the float32 working copy.
inline Tensor upcast(const Tensor& t) { return is_reduced_float(t.dtype()) ? raw::cast(t, kFloat32) : t; }
inline Tensor float_buffer_like(const Tensor& t) { return empty(t.shape(), {.dtype = kFloat32, .device = t.device()}); }

}  // namespace ember::cpu

// The CPU backend of one kernel variant (core/cpu/isa.h): this file's sources are compiled once per instruction
// set, each into its own namespace (avx2 in libember, avx512 in the plugin libember_cpu_avx512.so).
namespace ember::cpu::inline EMBER_CPU_ISA_NS {

// Calls f.template operator()<T>() with T = float or double: the kernels that exist for float32 and float64 only
// (the fused optimiser steps, BatchNorm). Callers above check the dtype; anything else is a bug.
template <class F>
void visit_float(const char* op, DType dt, F&& f) {
  if (dt == kFloat32) return f.template operator()<float>();
  if (dt == kFloat64) return f.template operator()<double>();
  throw InternalError(detail::str(op, ": takes float32 or float64, got ", dt));
}

class CpuBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::CPU; }
  Allocator& allocator(int) override { return cpu_allocator(); }
  void synchronize(int) override {}
  void copy(const Tensor& dst, const Tensor& src, bool non_blocking = false) override;  // non_blocking: ignored
  void fill(const Tensor& dst, double v) override;
  void unary(UnaryOp op, const Tensor& out, const Tensor& x) override;
  void clamp(const Tensor& out, const Tensor& x, double lo, double hi) override;
  void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) override;
  void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) override;
  void reduce(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims) override;
  void cumsum(const Tensor& out, const Tensor& x, int64_t dim, bool reverse) override;  // reduce.cpp
  void argsort(const Tensor& out, const Tensor& x, bool descending) override;           // sort.cpp
  void matmul(const Tensor& out, const Tensor& a, const Tensor& b) override;
  void softmax(const Tensor& out, const Tensor& x, int64_t dim, bool log) override;
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
  void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) override;
  void index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) override;
  void check_range(const Tensor& minmax, int64_t lo, int64_t hi, const RangeMessage& message) override;
  void row_norm(const RowNormArgs& a) override;  // layer_norm.cpp
  void row_norm_backward(const RowNormGradArgs& a) override;
  void random(RandomKind kind, const Tensor& out, double lo, double hi, PhiloxState state) override;
  void batch_norm_stats(const Tensor& mean, const Tensor& var, const Tensor& x) override;  // norm.cpp
  void batch_norm_elemt(const BatchNormElemtArgs& a) override;
  void batch_norm_backward_reduce(const Tensor& sum_dy, const Tensor& sum_dy_xmu, const Tensor& dy, const Tensor& x,
                                  const Tensor& mean) override;
  void batch_norm_backward_elemt(const BatchNormGradElemtArgs& a) override;
  void sgd_step(const SgdStepArgs& a) override;  // optim.cpp
  void adam_step(const AdamStepArgs& a) override;
  void amp_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale) override;

 private:
  // The float16 / bfloat16 path of a kernel, in one place: when `out` is 16-bit, `run(tmp)` computes into a float32
  // buffer of out's shape (the kernel again, on upcast inputs) and the result rounds once into out; false (nothing
  // done) for other dtypes.
  //   if (through_float32(out, [&](const Tensor& tmp) { softmax(tmp, upcast(x), dim, log); })) return;
  template <class Run>
  bool through_float32(const Tensor& out, Run&& run) {
    if (!is_reduced_float(out.dtype())) return false;
    Tensor tmp = float_buffer_like(out);
    run(tmp);
    copy(out, tmp);
    return true;
  }
};

// This variant's one instance (backend.cpp).
CpuBackend& variant_backend();

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
