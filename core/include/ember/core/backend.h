// defines: Backend, the one polymorphic seam between ops and devices (CPU here, CUDA in cuda/), the op enums
// and argument structs it takes (incl. the fused optimiser steps), and backend_for(Device). Ops in raw_ops
// check arguments and allocate outputs first, so a backend may assume what each `requires:` line says.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ember/core/allocator.h"
#include "ember/core/factory.h"
#include "ember/core/kernel_params.h"
#include "ember/core/op_list.h"
#include "ember/core/tensor.h"

namespace ember {

// UnaryOp, BinaryOp, ReduceOp, their names and properties: op_list.h.
enum class PoolKind : uint8_t { Max, Avg };

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};
struct Pool2dParams {
  int64_t kernel_h = 2, kernel_w = 2, stride_h = 2, stride_w = 2, pad_h = 0, pad_w = 0;
};

// One fused optimiser update of one parameter (optim/ fills these; PyTorch's update rules; the hyperparameters
// in kernel_params.h are handed to the CUDA kernels as they are).
// requires: param, grad and the state buffers are contiguous, of one shape, one floating dtype (float32 or
// float64) and one device, and none aliases another; param and the buffers are updated in place.
struct SgdStepArgs {
  Tensor param, grad;
  Tensor momentum_buf;  // undefined when momentum == 0
  SgdParams hyper;
};
struct AdamStepArgs {
  Tensor param, grad, exp_avg, exp_avg_sq;
  AdamParams hyper;
};

// A row normalisation (kernel_params.h's RowNorm) and its gradients. x, dy [rows, cols] contiguous, float32 or
// float64; w, b [cols] of x's dtype, contiguous, or undefined (1 and 0); mean, rstd [rows] of x's dtype.
struct RowNormArgs {
  RowNorm norm;
  Tensor y, mean, rstd;  // written
  Tensor x, w, b;
};
// Batch normalisation's element passes (the per-channel tensors [C] in the compute dtype, contiguous: see
// Backend::batch_norm_stats).
struct BatchNormElemtArgs {
  Tensor y;  // written, x's shape
  Tensor x, mean, invstd;
  Tensor w, b;        // each may be undefined (1 and 0)
  bool relu = false;  // y = relu(y) in the same pass (BatchNorm+ReLU; relu's rule: NaN stays)
};
struct BatchNormGradElemtArgs {
  Tensor dx;  // written, x's shape
  Tensor dy, x, mean, invstd;
  Tensor w;                   // may be undefined (1)
  Tensor sum_dy, sum_dy_xmu;  // batch_norm_backward_reduce's sums; undefined: fixed running statistics
  int64_t count = 0;          // the elements per channel
  Tensor relu_y{};            // see BatchNormGradReduceArgs
};
struct RowNormGradArgs {
  RowNorm norm;
  Tensor dx, dw, db;  // written; each may be undefined (not wanted)
  Tensor dy, x, mean, rstd, w;
};

// conv2d's gradients (NCHW): gx[N, C, H, W], gw[OC, C, KH, KW], gb[OC], each may be undefined (not wanted).
struct Conv2dGradArgs {
  Tensor gx, gw, gb;  // written
  Tensor gy, x, w;
  Conv2dParams p;
};
// A linear layer's GEMM with what cuBLASLt folds into its epilogue (Backend::gemm_epilogue; docs/cuda.md,
// "Linear epilogues"): out[M, N] = a[M, K] @ b[K, N], then
//   BiasGelu  aux = out + bias[N] (bias may be undefined), out = gelu(aux): the forward of gelu(linear(x));
//   DGelu     out = out * gelu'(aux): the gradient into a GELU's input when the gradient at its output is the
//             product (the next linear's input gradient); bias_grad[N] = out's column sums;
//   BGradA    bias_grad[M] = a's row sums: with a weight gradient g^T @ x, the bias gradient sum(g).
enum class GemmEpilogue : uint8_t { BiasGelu, DGelu, BGradA };
struct GemmEpilogueArgs {
  GemmEpilogue epilogue = GemmEpilogue::BGradA;
  Tensor out{};        // written: [M, N], contiguous
  Tensor a{}, b{};     // [M, K], [K, N]: 2-D, of out's floating dtype, may be strided (transposed views)
  Tensor bias{};       // BiasGelu: [N] contiguous, or undefined
  Tensor aux{};        // [M, N] contiguous: BiasGelu writes it (GELU's input, kept for the backward), DGelu reads it
  Tensor bias_grad{};  // written where defined (DGelu: [N], BGradA: [M]), contiguous; may be undefined
  bool gelu_tanh = false;  // which GELU: exact (erf) or the tanh approximation (cuBLASLt's own)
};
// Attention (AttentionParams in kernel_params.h): see Backend::attention.
struct AttentionArgs {
  Tensor out, lse;  // written
  Tensor q, k, v;
  Tensor mask;  // undefined when p.mask is None
  AttentionParams p;
};
struct AttentionGradArgs {
  Tensor gq, gk, gv;  // written
  Tensor gout, q, k, v, out, lse, mask;
  AttentionParams p;
};
// Batch normalisation's backward sums per channel (x, dy [N, C, S...]; the rest [C]).
struct BatchNormGradReduceArgs {
  Tensor sum_dy, sum_dy_xmu;  // written
  Tensor dy, x, mean;
  // batch_norm_relu's output (x's shape and layout) or undefined: when defined, dy counts as 0 wherever relu_y is
  // not > 0 (ReLU's backward, ReluBackward's rule, applied as dy is read: no masked copy of dy is made).
  Tensor relu_y{};
};

// The message of a failed index range check, from the smallest and largest of the index values checked.
using RangeMessage = std::function<std::string(int64_t min, int64_t max)>;

// The kernels, one row each: X(name, (parameters), plan). Backend declares each one pure virtual; CpuBackend,
// CudaBackend and memory::plan's MetaBackend declare their overrides from the same rows, so a new kernel is one row
// here and one definition per device. `plan` says what a planning (meta) run does: `skip` (nothing: the outputs are
// already allocated) or `own` (MetaBackend defines it: the kernel takes device memory besides its outputs — on the
// CPU, the float32 buffers of a 16-bit input that a kernel computes in float32; core/src/memory_plan.cpp).
// requires (all rows): tensors on this backend's device; `out` is freshly allocated and contiguous unless stated;
// inputs may be strided or broadcast (stride 0); inputs never alias `out` unless stated.
#define EMBER_BACKEND_KERNELS(X)                                                                                      \
  /* dst = src with dtype conversion; dst may be any view (strided) of the right shape. Same device, or (the one     \
     exception) a transfer between the CPU and this backend's device, in either direction. non_blocking lets a       \
     transfer return before it completes where the device allows it (CUDA: pinned host memory; see docs/cuda.md);   \
     the CPU backend ignores it. */                                                                                   \
  X(copy, (const Tensor& dst, const Tensor& src, bool non_blocking), skip)                                            \
  /* dst (any view) = v converted to dst's dtype. */                                                                  \
  X(fill, (const Tensor& dst, double v), skip)                                                                        \
  /* out (1-D, contiguous) [i] = start + i * step, as one fused multiply-add in double (fma(i, step, start)),        \
     converted to out's dtype as a copy from float64 converts. */                                                     \
  X(arange, (const Tensor& out, double start, double step), skip)                                                     \
  /* out = op(x); x has out's shape and dtype; out may alias x exactly (in-place). */                                 \
  X(unary, (UnaryOp op, const Tensor& out, const Tensor& x), skip)                                                    \
  X(clamp, (const Tensor& out, const Tensor& x, double lo, double hi), skip)                                          \
  /* out = a op b; a and b have out's shape (broadcast views) and one dtype; out's dtype is that dtype, or kBool for  \
     comparisons; out may alias a exactly (in-place). */                                                              \
  X(binary, (BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b), skip)                                 \
  /* out = cond ? a : b; cond kBool, a/b of out's dtype, all with out's shape (broadcast views). */                   \
  X(where, (const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b), skip)                            \
  /* out has x's rank with the reduced dims of size 1; ArgMax/ArgMin take one dim and give kInt64. */                 \
  X(reduce, (ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims), own)                 \
  /* out = the running sum of x along dim (reverse: from the end, out[i] = x[i] + ... + x[n - 1]); x is contiguous,  \
     of out's shape and dtype, a floating one or kInt64; floating sums accumulate in double, int64 ones wrap. */      \
  X(cumsum, (const Tensor& out, const Tensor& x, int64_t dim, bool reverse), own)                                     \
  /* out (kInt64) = the indices that sort each row of x along its last dim: ascending (descending: largest first),   \
     stable (equal elements keep their order), NaN after every number (first when descending), as PyTorch's          \
     sort(stable=True). x is contiguous, of any dtype, with at least one element; out has x's shape. */               \
  X(argsort, (const Tensor& out, const Tensor& x, bool descending), own)                                              \
  /* out[B, M, N] = a[B, M, K] @ b[B, K, N], + bias[N] in every row when bias is defined (contiguous, of out's        \
     dtype: a linear layer's, which the CPU adds as its GEMM stores the product); a and b may be strided (e.g.        \
     transposed views). The plan: CUDA's cuBLAS workspace and contiguous copies. */                                   \
  X(matmul, (const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias), own)                           \
  /* GemmEpilogueArgs: out = a @ b with a GELU, its derivative or a bias gradient folded in. The plan: as matmul's,  \
     or the composed steps' where the device runs them (ember/internal/gemm_epilogue.h). */                          \
  X(gemm_epilogue, (const GemmEpilogueArgs& a), own)                                                                  \
  /* softmax or log-softmax of x along dim. */                                                                        \
  X(softmax, (const Tensor& out, const Tensor& x, int64_t dim, bool log), own)                                        \
  /* NCHW: out[N, OC, OH, OW] = conv(x[N, C, H, W], w[OC, C, KH, KW]) + b[OC] (b may be undefined). */               \
  X(conv2d, (const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p), own)       \
  X(conv2d_backward, (const Conv2dGradArgs& a), own)                                                                  \
  /* Pooling of [N, C, H, W]; avg divides by the full window (padding counted, as PyTorch's default). out (gx) is   \
     contiguous in x's suggested memory format, NCHW or channels-last (the raw op allocates it so); x, gy any        \
     strides. The CPU runs a channels-last one on NCHW copies (ember/internal/conv_channels_last.h). */              \
  X(pool2d, (PoolKind kind, const Tensor& out, const Tensor& x, const Pool2dParams& p), own)                          \
  /* gx = the gradient of pool2d, every element written (0 where no window routes a gradient): max routes each gy to \
     the first maximum of its window. */                                                                              \
  X(pool2d_backward, (PoolKind kind, const Tensor& gx, const Tensor& gy, const Tensor& x, const Pool2dParams& p),     \
    own)                                                                                                              \
  /* Scaled-dot-product attention without the [Tq, Tk] score matrix (FlashAttention-2's tiling: key blocks with an   \
     online softmax): out[BH, Tq, dv] = softmax(q k^T * scale + mask) v and lse[BH, Tq] = each row's log-sum-exp of   \
     its scores (-inf, and an output row of 0, when every key of the row is masked out). q, k, v: one floating       \
     dtype, rows where p.q_stride/k_stride/v_stride say (each row contiguous); out contiguous; lse contiguous,        \
     float32 (float64 for float64 inputs); mask undefined (p.mask None) or kBool / q's dtype, read through           \
     p.mask_stride. */                                                                                                \
  X(attention, (const AttentionArgs& a), own)                                                                         \
  /* Its gradients gq, gk, gv (contiguous [BH, T, d], every element written) from gout (contiguous) and the          \
     forward's out and lse; the scores are recomputed block by block, never stored whole. */                          \
  X(attention_backward, (const AttentionGradArgs& a), skip)                                                           \
  /* cross_entropy from class indices, fused: for each row i of logits [N, C] (contiguous, C >= 1, any floating     \
     dtype; 16-bit read as they are, computed in float32), with m = the row's max (0 for an all -inf row) and         \
     ls = log(sum_j exp(x[i, j] - m)) (the sum in double): stats[i] = (m, ls) and loss[i] = ls - (x[i, t_i] - m).      \
     targets [N] kInt64, contiguous, checked in range (CUDA: an out-of-range target gives a NaN loss, nothing read    \
     outside the row); loss [N] and stats [N, 2] float32 (float64 for float64 logits). */                            \
  X(class_cross_entropy, (const Tensor& loss, const Tensor& stats, const Tensor& logits, const Tensor& targets),       \
    skip)                                                                                                             \
  /* Its gradient: dlogits[i, j] = (exp((x[i, j] - m) - ls) - [j == t_i]) * scale[i], of the logits' dtype and       \
     shape (contiguous); scale float32 (float64 for float64 logits), contiguous, one value or [N]. */                 \
  X(class_cross_entropy_backward, (const Tensor& dlogits, const Tensor& logits, const Tensor& targets,               \
                                   const Tensor& stats, const Tensor& scale), skip)                                  \
  /* Index values in range: minmax is [2], kInt64, contiguous (the min and the max of some index values); throws     \
     IndexError(message(min, max)) unless lo <= min and max < hi. The CPU checks at once. CUDA queues the check on    \
     the current stream and returns without waiting (no host synchronisation in a training step): a failure is      \
     thrown by the next host synchronisation (a copy to the host, synchronize, an event or stream wait), and the     \
     kernels that read the indices meanwhile skip out-of-range ones instead of touching memory outside the tensor.   \
     A plan has no values to check. */                                                                                \
  X(check_range, (const Tensor& minmax, int64_t lo, int64_t hi, const RangeMessage& message), skip)                   \
  /* out = x gathered along dim by index (kInt64, 1-D, values already checked in range). */                          \
  X(index_select, (const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index), skip)                        \
  /* out (contiguous) += src scattered along dim by index (kInt64, 1-D, in range; repeated indices add up). */        \
  X(index_add, (const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src), own)                         \
  /* Batch normalisation over dim 1 of x [N, C, S...] (contiguous, any float dtype; y, dy, dx of x's dtype;           \
     per-channel tensors [C] contiguous in the compute dtype: float32 for 16-bit x, else x's dtype; 16-bit elements   \
     are widened as read and each result rounded once), in four passes (PyTorch's batch_norm_stats / _elemt /         \
     _backward_reduce / _backward_elemt); sums accumulate in double. mean[c], var[c] (biased) over every element of   \
     channel c. The plan: CUDA's per-part sums (batch_norm_workspace_bytes, kernel_params.h). */                      \
  X(batch_norm_stats, (const Tensor& mean, const Tensor& var, const Tensor& x), own)                                  \
  /* y = (x - mean[c]) * invstd[c] * w[c] + b[c], then relu(y) when a.relu. */                                       \
  X(batch_norm_elemt, (const BatchNormElemtArgs& a), skip)                                                            \
  /* sum_dy[c] = sum of dy over channel c, sum_dy_xmu[c] = sum of dy * (x - mean[c]); dy has x's shape. */            \
  X(batch_norm_backward_reduce, (const BatchNormGradReduceArgs& a), own)                                              \
  /* dx = w[c] * invstd[c] * (dy - sum_dy[c] / count - (x - mean[c]) * invstd[c]^2 * sum_dy_xmu[c] / count) for       \
     statistics of the batch (training), or dx = w[c] * invstd[c] * dy when sum_dy is undefined (fixed running        \
     statistics). */                                                                                                  \
  X(batch_norm_backward_elemt, (const BatchNormGradElemtArgs& a), skip)                                               \
  /* A row normalisation (RowNormArgs): y, and the per-row mean and rstd that the backward reads. */                  \
  X(row_norm, (const RowNormArgs& a), skip)                                                                           \
  /* Its gradients from dy and the forward's mean, rstd, with xhat = (x - mean) * rstd and g = dy * w:               \
     dx = rstd * (g - mean_cols(g) - xhat * mean_cols(g * xhat)); dw = sum_rows dy * xhat; db = sum_rows dy.        \
     The plan: CUDA's workspace for dw and db (row_norm_grad_workspace_bytes, kernel_params.h). */                    \
  X(row_norm_backward, (const RowNormGradArgs& a), own)                                                               \
  /* Fills out (floating or integer) from a Philox stream: Uniform in [lo, hi), Normal(lo = mean, hi = std), Int     \
     uniform in [lo, hi). */                                                                                          \
  X(random, (RandomKind kind, const Tensor& out, double lo, double hi, PhiloxState state), skip)                      \
  /* Fused optimiser steps over one optimiser step's parameters, each with its own hyperparameters (the list in     \
     any order, empty parameters allowed; all on this backend's devices): one pass over each parameter reads grad    \
     and state and writes param and state. On CUDA the small parameters of a dtype and option set share launches     \
     (multi-tensor apply, as torch.optim's foreach path); a parameter's update is the same wherever it runs. */       \
  X(sgd_step, (const std::vector<SgdStepArgs>& steps), skip)                                                          \
  X(adam_step, (const std::vector<AdamStepArgs>& steps), skip)                                                        \
  /* GradScaler's unscale (PyTorch's _amp_foreach_non_finite_check_and_unscale_): every tensor of `grads` (floating, \
     contiguous, on found_inf's device; float16 / bfloat16 scaled in float32) *= inv_scale in place, and found_inf   \
     (a float32 scalar) is set to 1 when any element is inf or NaN (else left as it is). One pass over all of them   \
     (on CUDA: multi-tensor launches), no host synchronisation. */                                                    \
  X(amp_unscale, (const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale), skip)

// A kernel's declaration in Backend, and in a backend that defines it (its .cpp files hold the definitions).
#define EMBER_BACKEND_PURE(name, params, plan) virtual void name params = 0;
#define EMBER_BACKEND_OVERRIDE(name, params, plan) void name params override;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType type() const = 0;
  virtual Allocator& allocator(int device_index) = 0;
  virtual void synchronize(int device_index) = 0;
  EMBER_BACKEND_KERNELS(EMBER_BACKEND_PURE)
  // copy without non_blocking: a blocking copy.
  void copy(const Tensor& dst, const Tensor& src) { copy(dst, src, false); }
};

// The backend for a device; throws DeviceError when that device type is not built or not available.
Backend& backend_for(Device d);

}  // namespace ember
