// defines: CudaBackend's reductions, softmax, cross_entropy from class indices and cumsum, on kernels/reduce.cu,
// kernels/softmax.cu, kernels/cross_entropy.cu and kernels/cumsum.cu
// (contracts in core/include/ember/core/backend.h; each checks nothing raw_ops has checked and runs on the
// current stream of its tensors' device).
#include "cuda_backend.h"
#include "ember/core/factory.h"
#include "ember/core/memory_plan.h"
#include "ember/core/raw_ops.h"
#include "kernel_args.h"
#include "kernels/launch.h"

namespace ember::cuda {
namespace {

using detail::kernel_args;
using detail::KernelArgs;
using detail::OnDevice;

// Scratch memory from the caching allocator on the current stream of `dev` (kept until the Tensor dies).
Tensor scratch(int64_t bytes, Device dev) {
  Tensor t = empty({bytes}, {.dtype = kUInt8, .device = dev});
  memory::tag(t, memory::Category::kWorkspace);  // memory_history.h's counters and timeline
  return t;
}

// Adds dim (size, stride) to a reduction walk (dim_walk.h, as the CPU backend's); throws past kMaxDims.
void walk_add(kernels::Walk& w, int64_t size, int64_t stride) {
  EMBER_CHECK_DEVICE(w.add(size, stride), "reduce: more than ", kernels::kMaxDims,
                     " dims that cannot be merged (make the input contiguous first)");
}

}  // namespace

void CudaBackend::reduce(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims) {
  if (out.numel() == 0) return;
  std::vector<bool> is_red(static_cast<size_t>(x.dim()), false);
  for (int64_t d : dims) is_red[static_cast<size_t>(d)] = true;
  kernels::Walk kept, red;
  for (int64_t d = 0; d < x.dim(); ++d) walk_add(is_red[static_cast<size_t>(d)] ? red : kept, x.size(d), x.stride(d));
  if (red.numel == 0) {  // an empty dim: sum 0, prod 1 (max/min/arg are refused by raw::reduce)
    fill(out, op == ReduceOp::Prod ? 1.0 : 0.0);
    return;
  }
  OnDevice on(out);
  const int64_t ws_bytes = kernels::reduce_workspace_bytes(op, kept, red);
  Tensor ws = ws_bytes ? scratch(ws_bytes, out.device()) : Tensor();
  KernelArgs k = kernel_args("reduce", {&out});
  k.operands[1].data = x.data_ptr();
  k.operands[1].type = x.dtype();
  kernels::launch_reduce(op, k.operands[0], k.operands[1], kept, red, ws_bytes ? ws.data_ptr() : nullptr, on.stream);
}

void CudaBackend::softmax(const Tensor& out, const Tensor& x_in, int64_t dim, bool log) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  const Tensor x = raw::contiguous(x_in);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  kernels::launch_softmax(x.dtype(), out.data_ptr(), x.data_ptr(), outer, x.size(dim), inner, log, on.stream);
}

void CudaBackend::class_cross_entropy(const Tensor& loss, const Tensor& stats, const Tensor& logits,
                                      const Tensor& targets) {
  if (logits.numel() == 0) return;
  OnDevice on(logits);
  kernels::launch_class_cross_entropy(logits.dtype(), loss.data_ptr(), stats.data_ptr(), logits.data_ptr(),
                                      static_cast<const int64_t*>(targets.data_ptr()), logits.size(0), logits.size(1),
                                      on.stream);
}

void CudaBackend::class_cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                                               const Tensor& stats, const Tensor& scale) {
  if (logits.numel() == 0) return;
  OnDevice on(logits);
  kernels::launch_class_cross_entropy_backward(logits.dtype(), dlogits.data_ptr(), logits.data_ptr(),
                                               static_cast<const int64_t*>(targets.data_ptr()), stats.data_ptr(),
                                               scale.data_ptr(), scale.numel() == 1 ? 0 : 1, logits.size(0),
                                               logits.size(1), on.stream);
}

void CudaBackend::cumsum(const Tensor& out, const Tensor& x, int64_t dim, bool reverse) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  kernels::launch_cumsum(x.dtype(), out.data_ptr(), x.data_ptr(), outer, x.size(dim), inner, reverse, on.stream);
}

}  // namespace ember::cuda
