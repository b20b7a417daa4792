// defines: CudaBackend's fused optimiser steps, sgd_step and adam_step, on kernels/optim.cu
// (contracts in core/include/ember/core/backend.h; each checks nothing raw_ops has checked and runs on the
// current stream of its tensors' device).
#include "cuda_backend.h"
#include "kernel_args.h"
#include "kernels/launch.h"

namespace ember::cuda {
namespace {

using detail::OnDevice;

}  // namespace

namespace {
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
}  // namespace

void CudaBackend::sgd_step(const SgdStepArgs& a) {
  check_step("sgd_step", {&a.param, &a.grad, &a.momentum_buf});
  OnDevice on(a.param);
  kernels::launch_sgd(a.param.dtype(), a.param.data_ptr(), a.grad.data_ptr(),
                      a.momentum_buf.defined() ? a.momentum_buf.data_ptr() : nullptr, a.param.numel(), a.hyper,
                      on.stream);
}

void CudaBackend::adam_step(const AdamStepArgs& a) {
  check_step("adam_step", {&a.param, &a.grad, &a.exp_avg, &a.exp_avg_sq});
  OnDevice on(a.param);
  kernels::launch_adam(a.param.dtype(), a.param.data_ptr(), a.grad.data_ptr(), a.exp_avg.data_ptr(),
                       a.exp_avg_sq.data_ptr(), a.param.numel(), a.hyper, on.stream);
}

// The gradients grouped by dtype; each group goes out in launches of at most kUnscaleTensors tensors and
// kUnscaleBlocks blocks (a tensor whose chunks do not fit in one launch continues in the next).
void CudaBackend::amp_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale) {
  EMBER_INTERNAL_ASSERT(found_inf.dtype() == kFloat32 && found_inf.numel() == 1,
                        "amp_unscale: found_inf must be a "
                        "float32 scalar");
  OnDevice on(found_inf);
  float* flag = static_cast<float*>(found_inf.data_ptr());
  for (DType dt : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    kernels::UnscaleBatch batch{};
    int tensors = 0, blocks = 0;
    auto flush = [&] {
      kernels::launch_amp_unscale(dt, batch, blocks, flag, inv_scale, on.stream);
      batch = {};
      tensors = blocks = 0;
    };
    for (const Tensor& g : grads) {
      if (g.dtype() != dt || g.numel() == 0) continue;
      EMBER_INTERNAL_ASSERT(g.is_contiguous() && g.device() == found_inf.device(),
                            "amp_unscale: gradients must be "
                            "contiguous and on found_inf's device");
      const int64_t chunks = (g.numel() + kernels::kUnscaleChunk - 1) / kernels::kUnscaleChunk;
      for (int64_t c = 0; c < chunks; ++c) {
        if (blocks == kernels::kUnscaleBlocks || (c == 0 && tensors == kernels::kUnscaleTensors)) flush();
        if (c == 0 || blocks == 0) {  // the tensor enters this launch's table
          batch.ptr[tensors] = g.data_ptr();
          batch.numel[tensors] = g.numel();
          ++tensors;
        }
        batch.block_tensor[blocks] = static_cast<unsigned char>(tensors - 1);
        batch.block_chunk[blocks] = static_cast<int32_t>(c);
        ++blocks;
      }
    }
    flush();
  }
}

}  // namespace ember::cuda
