// defines: CudaBackend::matmul: cuBLAS for floating types (cublas.cpp; cuBLASLt with a linear layer's bias,
// cublaslt.cpp), kernels/matmul_int.cu for integers; CudaBackend::gemm_epilogue
// (contracts in core/include/ember/core/backend.h; each checks nothing raw_ops has checked and runs on the
// current stream of its tensors' device).
#include "compute_internal.h"
#include "cuda_backend.h"
#include "ember/core/raw_ops.h"
#include "ember/internal/gemm_epilogue.h"
#include "kernel_args.h"
#include "kernels/launch.h"

namespace ember::cuda {
namespace {

using detail::OnDevice;

// A linear layer's bias rides in cuBLASLt's epilogue (one GEMM, one pass over out); other products, and a layout
// cuBLASLt refuses, take cuBLAS's GEMM and the bias in a second pass.
bool lt_bias_applies(const Tensor& out, const Tensor& a, const Tensor& bias) {
  const DType dt = out.dtype();
  return bias.defined() && out.size(0) == 1 && out.size(1) > 1 && out.size(2) > 1 && a.size(2) > 1 &&
         (dt == kFloat32 || dt == kFloat16 || dt == kBFloat16);
}

}  // namespace

void CudaBackend::matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  if (out.numel() == 0) return;
  auto first = [](const Tensor& t) { return raw::select(t, 0, 0); };
  if (lt_bias_applies(out, a, bias) && detail::cublaslt_matmul_bias(first(out), first(a), first(b), bias)) return;
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
  if (bias.defined()) binary(BinaryOp::Add, out, out, raw::expand(bias, out.shape()));  // same stream, in order
}

// One cuBLASLt call where it has the epilogue and an algorithm for it; the composed steps otherwise.
void CudaBackend::gemm_epilogue(const GemmEpilogueArgs& a) {
  if (ember::detail::gemm_epilogue_on_cublaslt(a) && detail::cublaslt_gemm_epilogue(a)) return;
  ember::detail::gemm_epilogue_composed(*this, a);
}

}  // namespace ember::cuda
