// defines: CpuBackend (the Eigen/OpenMP implementation of Backend), Scratch (temporary buffers drawn from the
// caching allocator so kernels never call malloc in a steady loop), and conversion helpers. Private to core/.
#pragma once
#include <cmath>
#include <limits>
#include <type_traits>

#include "ember/core/backend.h"
#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"

namespace ember::cpu {

template <class T>
inline constexpr bool is_reduced_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Value conversion between any two element types. Floating -> integer saturates and maps NaN to 0, so that
// no cast is undefined behaviour (C++ leaves out-of-range float->int casts undefined).
template <class D, class S>
inline D convert(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (is_reduced_v<S>) {
    return convert<D>(static_cast<float>(v));
  } else if constexpr (is_reduced_v<D>) {
    return D(static_cast<float>(v));
  } else if constexpr (std::is_same_v<D, bool>) {
    return v != S(0);
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    if (std::isnan(v)) return D(0);
    if (v <= static_cast<S>(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
    if (v >= static_cast<S>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return static_cast<D>(v);
  } else {
    return static_cast<D>(v);
  }
}

// Integer arithmetic that wraps around on overflow (as PyTorch's does) instead of being undefined behaviour:
// signed values are computed in their unsigned type, whose overflow is defined, and converted back.
template <class T>
struct Wrap {
  using U = std::conditional_t<std::is_integral_v<T> && std::is_signed_v<T>, std::make_unsigned_t<T>, T>;
  static T add(T a, T b) { return static_cast<T>(static_cast<U>(a) + static_cast<U>(b)); }
  static T sub(T a, T b) { return static_cast<T>(static_cast<U>(a) - static_cast<U>(b)); }
  static T mul(T a, T b) { return static_cast<T>(static_cast<U>(a) * static_cast<U>(b)); }
  static T neg(T a) { return static_cast<T>(U(0) - static_cast<U>(a)); }
};

// A temporary contiguous buffer, reused from call to call (Note [Scratch arenas] in matmul.cpp).
class Scratch {
 public:
  explicit Scratch(size_t nbytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_;
  void* arena_;  // the arena it came from, given back to in the destructor
};

// Reduced floats (float16/bfloat16) are computed in float32: these give the float32 working copy.
inline Tensor upcast(const Tensor& t) { return is_reduced_float(t.dtype()) ? raw::cast(t, kFloat32) : t; }
inline Tensor float_buffer_like(const Tensor& t) { return empty(t.shape(), {.dtype = kFloat32, .device = t.device()}); }

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
  void matmul(const Tensor& out, const Tensor& a, const Tensor& b) override;
  void softmax(const Tensor& out, const Tensor& x, int64_t dim, bool log) override;
  void conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) override;
  void conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx, const Tensor& gw,
                       const Tensor& gb, const Conv2dParams& p) override;
  void pool2d(PoolKind kind, const Tensor& out, const Tensor& x, const Pool2dParams& p) override;
  void pool2d_backward(PoolKind kind, const Tensor& gx, const Tensor& gy, const Tensor& x, const Pool2dParams& p) override;
  void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) override;
  void index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) override;
  void random(RandomKind kind, const Tensor& out, double lo, double hi, PhiloxState state) override;
  void sgd_step(const SgdStepArgs& a) override;  // optim_kernels.cpp
  void adam_step(const AdamStepArgs& a) override;
};

CpuBackend& cpu_backend();

}  // namespace ember::cpu
