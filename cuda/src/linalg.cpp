// defines: CudaBackend::matmul: cuBLAS for floating types (cublas.cpp), kernels/matmul_int.cu for integers
// (contracts in core/include/ember/core/backend.h; each checks nothing raw_ops has checked and runs on the
// current stream of its tensors' device).
#include "compute_internal.h"
#include "cuda_backend.h"
#include "ember/core/raw_ops.h"
#include "kernel_args.h"
#include "kernels/launch.h"

namespace ember::cuda {
namespace {

using detail::OnDevice;

}  // namespace

void CudaBackend::matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  if (out.numel() == 0) return;
  if (a.size(2) == 0) {  // an empty inner dim: a sum of nothing
    fill(out, 0);
  } else if (is_floating(out.dtype())) {
    detail::cublas_matmul(out, a, b);
  } else {
    OnDevice on(out);
    const int64_t sa[3] = {a.stride(0), a.stride(1), a.stride(2)}, sb[3] = {b.stride(0), b.stride(1), b.stride(2)};
    kernels::launch_matmul_int(out.dtype(), out.data_ptr(), a.data_ptr(), b.data_ptr(), out.size(0), out.size(1),
                               out.size(2), a.size(2), sa, sb, on.stream);
  }
  // the bias in a second pass, on the same stream (a cuBLASLt epilogue could fold it in)
  if (bias.defined()) binary(BinaryOp::Add, out, out, raw::expand(bias, out.shape()));
}

}  // namespace ember::cuda
