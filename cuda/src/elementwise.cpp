// defines: CudaBackend's elementwise ops — unary, clamp, binary, where — on the kernels of kernels/elementwise.cu
// (contracts in core/include/ember/core/backend.h; each checks nothing raw_ops has checked and runs on the
// current stream of its tensors' device).
#include "cuda_backend.h"
#include "kernel_args.h"
#include "kernels/launch.h"

namespace ember::cuda {
namespace {

using detail::kernel_args;
using detail::KernelArgs;
using detail::OnDevice;

}  // namespace

void CudaBackend::unary(UnaryOp op, const Tensor& out, const Tensor& x) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  KernelArgs k = kernel_args(name(op), {&out, &x});
  kernels::launch_unary(op, k.operands[0], k.operands[1], k.layout, on.stream);
}

void CudaBackend::clamp(const Tensor& out, const Tensor& x, double lo, double hi) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  KernelArgs k = kernel_args("clamp", {&out, &x});
  kernels::launch_clamp(k.operands[0], k.operands[1], lo, hi, k.layout, on.stream);
}

void CudaBackend::binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  KernelArgs k = kernel_args(name(op), {&out, &a, &b});
  kernels::launch_binary(op, k.operands[0], k.operands[1], k.operands[2], k.layout, on.stream);
}

void CudaBackend::where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  KernelArgs k = kernel_args("where", {&out, &cond, &a, &b});
  kernels::launch_where(k.operands[0], k.operands[1], k.operands[2], k.operands[3], k.layout, on.stream);
}

}  // namespace ember::cuda
