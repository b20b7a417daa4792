// defines: the two ways Backend::gemm_epilogue runs — composed of the backend's own matmul, unary, binary and
// reduce (the CPU always; CUDA where cuBLASLt has no epilogue for it), or as one cuBLASLt call (CUDA, where
// gemm_epilogue_on_cublaslt says so). Written against Backend, so memory::plan's MetaBackend runs the same steps as
// the device it plans for. Private to core/ and cuda/.
#pragma once
#include "ember/core/backend.h"

namespace ember::detail {

// out = a @ b and the epilogue as GemmEpilogueArgs says, in the backend's separate steps: matmul (with the bias),
// then GELU (or its derivative, in place) and the bias gradient as a sum.
void gemm_epilogue_composed(Backend& be, const GemmEpilogueArgs& a);

// Whether cuBLASLt has the epilogue: float16, bfloat16 or float32; GELU only as its tanh approximation (cuBLASLt's
// GELU is that one, PyTorch's _addmm_activation uses it for approximate="tanh" alone); the GELU input (aux) with a
// row length divisible by 8 (cuBLASLt's rule for its leading dimension); every dimension at least 2; BGradA only
// with a bias gradient. CUDA may still fall back to the composed steps at run time when cuBLASLt offers no
// algorithm for the operands' layout (EMBER_CUBLASLT: docs/cuda.md).
bool gemm_epilogue_on_cublaslt(const GemmEpilogueArgs& a);

}  // namespace ember::detail
