// defines: CudaBackend's fused optimiser steps, sgd_step and adam_step, and GradScaler's amp_unscale, on
// kernels/optim.cu's multi-tensor launches (contracts in core/include/ember/core/backend.h; each checks nothing
// raw_ops has checked and runs on the current stream of its tensors' device).
#include <algorithm>
#include <functional>
#include <initializer_list>
#include <tuple>

#include "cuda_backend.h"
#include "kernel_args.h"
#include "kernels/launch.h"

namespace ember::cuda {
namespace {

using detail::OnDevice;
using kernels::TensorBatch;

// Fills TensorBatch tables (launch.h) tensor by tensor, chunk by chunk, and hands each full one to `launch`; a
// tensor whose chunks do not fit in one launch continues in the next. finish() launches the last.
class BatchBuilder {
 public:
  explicit BatchBuilder(std::function<void(const TensorBatch&, int blocks)> launch) : launch_(std::move(launch)) {}

  // The tensor's pointers, one per list (param, grad, ...), and its element count.
  void add(std::initializer_list<void*> ptrs, int64_t numel) {
    const int64_t chunks = (numel + kernels::kBatchChunk - 1) / kernels::kBatchChunk;
    for (int64_t c = 0; c < chunks; ++c) {
      if (blocks_ == kernels::kBatchBlocks || (c == 0 && tensors_ == kernels::kBatchTensors)) finish();
      if (c == 0 || blocks_ == 0) {  // the tensor enters this launch's table
        int list = 0;
        for (void* p : ptrs) batch_.ptr[list++][tensors_] = p;
        batch_.numel[tensors_] = numel;
        ++tensors_;
      }
      batch_.block_tensor[blocks_] = static_cast<unsigned char>(tensors_ - 1);
      batch_.block_chunk[blocks_] = static_cast<int32_t>(c);
      ++blocks_;
    }
  }
  void finish() {
    if (blocks_ > 0) launch_(batch_, blocks_);
    batch_ = {};
    tensors_ = blocks_ = 0;
  }

 private:
  std::function<void(const TensorBatch&, int)> launch_;
  TensorBatch batch_{};
  int tensors_ = 0, blocks_ = 0;
};

// The state (momentum, moments) is of state_dtype(param): float32 for float16 / bfloat16 parameters.
void check_step(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor& p = **ts.begin();
  const DType sdt = is_reduced_float(p.dtype()) ? kFloat32 : p.dtype();
  EMBER_INTERNAL_ASSERT(is_floating(p.dtype()), op, ": the fused update takes floating parameters, got ", p.dtype());
  size_t i = 0;
  for (const Tensor* t : ts) {
    const DType want = i++ < 2 ? p.dtype() : sdt;  // param and grad, then the state
    EMBER_INTERNAL_ASSERT(!t->defined() || (t->is_contiguous() && t->device() == p.device() && t->dtype() == want), op,
                          " takes contiguous tensors on one device (the state float32 for 16-bit parameters)");
  }
}

void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

auto key(const SgdStepArgs& a) {
  const SgdParams& h = a.hyper;
  return std::make_tuple(a.param.device(), a.param.dtype(), a.momentum_buf.defined(), h.lr, h.momentum, h.dampening,
                         h.weight_decay, h.nesterov, h.first_step);
}
auto key(const AdamStepArgs& a) {
  const AdamParams& h = a.hyper;
  return std::make_tuple(a.param.device(), a.param.dtype(), h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.decoupled,
                         h.bias_correction1, h.bias_correction2);
}

// The steps split into sets that one kernel serves (one device, dtype and hyperparameter set: usually one set per
// dtype and param group), each in the given order; calls run(set) for each.
template <class Args, class Run>
void per_launch_set(const std::vector<Args>& steps, Run run) {
  std::vector<std::vector<const Args*>> sets;
  for (const Args& a : steps) {
    if (a.param.numel() == 0) continue;
    auto same = [&](const std::vector<const Args*>& s) { return key(*s.front()) == key(a); };
    auto it = std::find_if(sets.begin(), sets.end(), same);
    if (it == sets.end()) sets.push_back({&a});
    else it->push_back(&a);
  }
  for (const auto& set : sets) {
    OnDevice on(set.front()->param);
    run(set, on.stream);
  }
}

}  // namespace

void CudaBackend::sgd_step(const std::vector<SgdStepArgs>& steps) {
  for (const SgdStepArgs& a : steps) check_step("sgd_step", {&a.param, &a.grad, &a.momentum_buf});
  per_launch_set(steps, [](const std::vector<const SgdStepArgs*>& set, CUstream_st* stream) {
    const SgdStepArgs& first = *set.front();
    BatchBuilder batches([&](const TensorBatch& b, int blocks) {
      kernels::launch_sgd(first.param.dtype(), b, blocks, first.hyper, stream);
    });
    for (const SgdStepArgs* a : set)
      batches.add({a->param.data_ptr(), a->grad.data_ptr(), ptr_or_null(a->momentum_buf)}, a->param.numel());
    batches.finish();
  });
}

void CudaBackend::adam_step(const std::vector<AdamStepArgs>& steps) {
  for (const AdamStepArgs& a : steps) check_step("adam_step", {&a.param, &a.grad, &a.exp_avg, &a.exp_avg_sq});
  per_launch_set(steps, [](const std::vector<const AdamStepArgs*>& set, CUstream_st* stream) {
    const AdamStepArgs& first = *set.front();
    BatchBuilder batches([&](const TensorBatch& b, int blocks) {
      kernels::launch_adam(first.param.dtype(), b, blocks, first.hyper, stream);
    });
    for (const AdamStepArgs* a : set)
      batches.add({a->param.data_ptr(), a->grad.data_ptr(), a->exp_avg.data_ptr(), a->exp_avg_sq.data_ptr()},
                  a->param.numel());
    batches.finish();
  });
}

// The gradients grouped by dtype, each group in multi-tensor launches.
void CudaBackend::amp_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale) {
  EMBER_INTERNAL_ASSERT(found_inf.dtype() == kFloat32 && found_inf.numel() == 1,
                        "amp_unscale: found_inf must be a float32 scalar");
  OnDevice on(found_inf);
  float* flag = static_cast<float*>(found_inf.data_ptr());
  for (DType dt : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    BatchBuilder batches([&](const TensorBatch& b, int blocks) {
      kernels::launch_amp_unscale(dt, b, blocks, flag, inv_scale, on.stream);
    });
    for (const Tensor& g : grads) {
      if (g.dtype() != dt) continue;
      EMBER_INTERNAL_ASSERT(g.is_contiguous() && g.device() == found_inf.device(),
                            "amp_unscale: gradients must be contiguous and on found_inf's device");
      batches.add({g.data_ptr()}, g.numel());
    }
    batches.finish();
  }
}

}  // namespace ember::cuda
