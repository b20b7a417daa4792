// defines: autocast (mixed precision), as torch.autocast: inside an AutocastGuard the matrix products
// (matmul, linear, conv2d, attention) run in float16 or bfloat16, the ops that need range or precision
// (softmax, losses, norms, exp/log/pow, sums) run in float32, and a few multi-input ops promote to the widest
// floating input. The table of ops is docs/amp.md. Parameters stay float32; their gradients come back float32.
//
//   {
//     ember::amp::AutocastGuard ac(ember::kBFloat16);   // every device; or (Device::cuda(), kFloat16)
//     loss = cross_entropy(model(x), y);                 // matmuls in bfloat16, the loss in float32
//   }
//   loss.backward();                                     // each op's backward in its forward's dtype
//
// The state is per thread and per device type; guards nest and restore what was there. A float32 leaf that
// requires grad (a parameter) is cast once per region and reused (the cast cache), so a parameter used twice is
// cast once; the cache notices in-place updates (version counter) and is cleared when the outermost guard ends.
// The backward pass runs with autocast off (its ops take the dtypes their forward ran in).
#pragma once
#include <vector>

#include "ember/core/device.h"
#include "ember/core/dtype.h"
#include "ember/core/tensor.h"

namespace ember::amp {

class AutocastGuard {
 public:
  // Autocast on CPU and CUDA tensors in `dtype` (kFloat16 or kBFloat16; anything else throws DTypeError).
  explicit AutocastGuard(DType dtype, bool enabled = true);
  // Autocast on the tensors of `device`'s type only (Device::cuda() or Device::cpu(); the index is ignored).
  AutocastGuard(Device device, DType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  struct Saved {
    bool enabled;
    DType dtype;
  };
  Saved prev_[2];
};

// Whether autocast is on for tensors of this device type (default: CPU or CUDA, either), and its dtype.
bool is_autocast_enabled();
bool is_autocast_enabled(DeviceType type);
DType autocast_dtype();  // of CUDA when on there, else of the CPU (kBFloat16 when off, as PyTorch's default)
DType autocast_dtype(DeviceType type);

// Empties this thread's cast cache (the outermost guard does it on exit).
void clear_autocast_cache();

// Turns autocast off on this thread for its lifetime (the backward engine uses it), restoring on exit.
class AutocastSuspend {
 public:
  AutocastSuspend();
  ~AutocastSuspend();
  AutocastSuspend(const AutocastSuspend&) = delete;
  AutocastSuspend& operator=(const AutocastSuspend&) = delete;
};

// This thread's autocast settings, and a guard that puts them back in force (un-suspended) for its lifetime:
// activation checkpointing recomputes its forward, during backward, under the autocast of the original forward.
struct AutocastSnapshot {
  bool enabled[2];  // by DeviceType: CPU, CUDA
  DType dtype[2];
};
AutocastSnapshot autocast_snapshot();
class AutocastRestore {
 public:
  explicit AutocastRestore(const AutocastSnapshot& s);
  ~AutocastRestore();
  AutocastRestore(const AutocastRestore&) = delete;
  AutocastRestore& operator=(const AutocastRestore&) = delete;

 private:
  AutocastSnapshot prev_;
  int prev_suspended_;
};

// What an op's inputs become under autocast. An op file starts with, e.g.,
//   const Tensor a = amp::lower(a_in), b = amp::lower(b_in);
// and each call is a no-op (one thread-local test) when no autocast is on.
namespace detail {
extern thread_local bool any_enabled;  // a cheap test for the common case: no autocast anywhere
Tensor to_lower(const Tensor& t);      // float32 on an autocast device -> its low dtype (cached for parameters)
Tensor to_fp32(const Tensor& t);       // float16 / bfloat16 on an autocast device -> float32
bool casts_to_fp32(const Tensor& t);   // whether to_fp32 would cast t
}  // namespace detail

// The matrix-product ops: an input in the low dtype.
inline Tensor lower(const Tensor& t) { return detail::any_enabled ? detail::to_lower(t) : t; }
// The range/precision-sensitive ops: a 16-bit float input in float32.
inline Tensor fp32(const Tensor& t) { return detail::any_enabled ? detail::to_fp32(t) : t; }
// The multi-input ops that promote: every floating input in the widest floating dtype among them.
std::vector<Tensor> promote(const std::vector<Tensor>& ts);

}  // namespace ember::amp
