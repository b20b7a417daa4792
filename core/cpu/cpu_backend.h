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
  // The kernels (contracts in ember/core/backend.h), each defined in the .cpp of this directory named after its
  // kind (CpuBackend::attention in attention.cpp). non_blocking copies are blocking here.
  EMBER_BACKEND_KERNELS(EMBER_BACKEND_OVERRIDE)
  using Backend::copy;

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
