// defines: the composed Backend::gemm_epilogue and the rule for cuBLASLt's (ember/internal/gemm_epilogue.h).
#include "ember/internal/gemm_epilogue.h"

#include "ember/core/raw_ops.h"

namespace ember::detail {

void gemm_epilogue_composed(Backend& be, const GemmEpilogueArgs& a) {
  const Tensor a3 = raw::unsqueeze(a.a, 0), b3 = raw::unsqueeze(a.b, 0);
  switch (a.epilogue) {
    case GemmEpilogue::BiasGelu:
      be.matmul(raw::unsqueeze(a.aux, 0), a3, b3, a.bias);
      be.unary(a.gelu_tanh ? UnaryOp::GeluTanh : UnaryOp::Gelu, a.out, a.aux);
      return;
    case GemmEpilogue::DGelu:
      be.matmul(raw::unsqueeze(a.out, 0), a3, b3, Tensor());
      be.binary(a.gelu_tanh ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward, a.out, a.out, a.aux);
      if (a.bias_grad.defined()) be.reduce(ReduceOp::Sum, raw::unsqueeze(a.bias_grad, 0), a.out, {0});
      return;
    case GemmEpilogue::BGradA:
      be.matmul(raw::unsqueeze(a.out, 0), a3, b3, Tensor());
      if (a.bias_grad.defined()) be.reduce(ReduceOp::Sum, raw::unsqueeze(a.bias_grad, 1), a.a, {1});
      return;
  }
}

bool gemm_epilogue_on_cublaslt(const GemmEpilogueArgs& a) {
  const DType dt = a.out.dtype();
  if (dt != kFloat16 && dt != kBFloat16 && dt != kFloat32) return false;
  // PyTorch keeps cuBLASLt away from 1-row or 1-column operands too (its heuristics refuse some)
  if (a.out.size(0) <= 1 || a.out.size(1) <= 1 || a.a.size(1) <= 1) return false;
  if (a.epilogue == GemmEpilogue::BGradA) return a.bias_grad.defined();  // else cuBLAS's plain GEMM
  return a.gelu_tanh && a.out.size(1) % 8 == 0;
}

}  // namespace ember::detail
