// defines: CudaBackend's batch-norm passes and row norms (layer norm), on kernels/norm.cu and kernels/layer_norm.cu
// (contracts in core/include/ember/core/backend.h; the raw op has made every tensor contiguous;
// each runs on the current stream of x's device).
#include "cuda_backend.h"
#include "kernel_args.h"
#include "kernels/launch.h"
#include "ember/core/memory_plan.h"

namespace ember::cuda {
namespace {

using detail::OnDevice;

kernels::NcsShape ncs(const Tensor& x) {
  kernels::NcsShape d;
  d.n = x.size(0);
  d.c = x.size(1);
  d.s = d.n && d.c ? x.numel() / (d.n * d.c) : 0;
  return d;
}
const void* ptr(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// The per-part sums of the batch-norm reductions (kernels/norm.cu), held for the kernels' length; memory::plan
// allocates the same (MetaBackend::batch_norm_stats).
Tensor batch_norm_workspace(const Tensor& x, const kernels::NcsShape& d) {
  const int64_t bytes = batch_norm_workspace_bytes(d.n, d.c, d.s);
  if (bytes == 0) return {};
  Tensor ws = empty({bytes}, {.dtype = kUInt8, .device = x.device()});
  memory::tag(ws, memory::Category::kWorkspace);
  return ws;
}

}  // namespace

void CudaBackend::batch_norm_stats(const Tensor& mean, const Tensor& var, const Tensor& x) {
  if (x.size(1) == 0) return;
  OnDevice on(x);
  const kernels::NcsShape d = ncs(x);
  const Tensor ws = batch_norm_workspace(x, d);
  kernels::launch_batch_norm_stats(x.dtype(), mean.data_ptr(), var.data_ptr(), x.data_ptr(), d,
                                   ws.defined() ? ws.data_ptr() : nullptr, on.stream);
}

void CudaBackend::batch_norm_elemt(const BatchNormElemtArgs& a) {
  if (a.x.numel() == 0) return;
  OnDevice on(a.x);
  kernels::launch_batch_norm_elemt(a.x.dtype(), a.y.data_ptr(), a.x.data_ptr(), a.mean.data_ptr(), a.invstd.data_ptr(),
                                   ptr(a.w), ptr(a.b), a.relu, ncs(a.x), on.stream);
}

void CudaBackend::batch_norm_backward_reduce(const BatchNormGradReduceArgs& a) {
  const Tensor &sum_dy = a.sum_dy, &sum_dy_xmu = a.sum_dy_xmu, &dy = a.dy, &x = a.x, &mean = a.mean;
  if (x.size(1) == 0) return;
  OnDevice on(x);
  const kernels::NcsShape d = ncs(x);
  const Tensor ws = batch_norm_workspace(x, d);
  kernels::launch_batch_norm_backward_reduce(x.dtype(), sum_dy.data_ptr(), sum_dy_xmu.data_ptr(), dy.data_ptr(),
                                             x.data_ptr(), mean.data_ptr(), ptr(a.relu_y), d,
                                             ws.defined() ? ws.data_ptr() : nullptr, on.stream);
}

void CudaBackend::batch_norm_backward_elemt(const BatchNormGradElemtArgs& a) {
  if (a.x.numel() == 0) return;
  OnDevice on(a.x);
  kernels::launch_batch_norm_backward_elemt(a.x.dtype(), a.dx.data_ptr(), a.dy.data_ptr(), a.x.data_ptr(),
                                            a.mean.data_ptr(), a.invstd.data_ptr(), ptr(a.w), ptr(a.sum_dy),
                                            ptr(a.sum_dy_xmu), a.count, ptr(a.relu_y), ncs(a.x), on.stream);
}

void CudaBackend::row_norm(const RowNormArgs& a) {
  if (a.norm.rows == 0) return;
  OnDevice on(a.x);
  kernels::launch_row_norm(a.x.dtype(), a.norm, a.y.data_ptr(), a.mean.data_ptr(), a.rstd.data_ptr(), a.x.data_ptr(),
                           ptr(a.w), ptr(a.b), on.stream);
}

void CudaBackend::row_norm_backward(const RowNormGradArgs& a) {
  OnDevice on(a.x);
  auto out = [](const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; };
  // the weight and bias gradients' per-chunk column sums (kernels/layer_norm.cu; memory::plan allocates the same)
  const int64_t ws_bytes =
      a.dw.defined() || a.db.defined() ? row_norm_grad_workspace_bytes(a.norm.rows, a.norm.cols) : 0;
  Tensor ws;
  if (ws_bytes > 0) {
    ws = empty({ws_bytes}, {.dtype = kUInt8, .device = a.x.device()});
    memory::tag(ws, memory::Category::kWorkspace);
  }
  kernels::launch_row_norm_backward(a.x.dtype(), a.norm, out(a.dx), out(a.dw), out(a.db), a.dy.data_ptr(),
                                    a.x.data_ptr(), a.mean.data_ptr(), a.rstd.data_ptr(), ptr(a.w),
                                    ws_bytes > 0 ? ws.data_ptr() : nullptr, on.stream);
}

}  // namespace ember::cuda
