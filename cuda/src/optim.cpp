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
void check_step(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor& p = **ts.begin();
  EMBER_INTERNAL_ASSERT(p.dtype() == kFloat32 || p.dtype() == kFloat64, op,
                        ": the fused update takes float32 or float64, got ", p.dtype());
  for (const Tensor* t : ts)
    EMBER_INTERNAL_ASSERT(!t->defined() || (t->is_contiguous() && t->device() == p.device() && t->dtype() == p.dtype()),
                          op, " takes contiguous tensors of one dtype on one device");
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

}  // namespace ember::cuda
