// defines: ember::raw — every tensor op without autograd. Each one checks its arguments (and throws an
// ember::Error subclass naming the op, shapes, dtypes and devices), computes the output shape and dtype,
// allocates the output on the inputs' device and makes one backend call. The public, differentiable ops
// (ember::add, ember::matmul, ...) in autograd/ are built on these.
#pragma once
#include <cstdint>
#include <vector>

#include "ember/core/backend.h"
#include "ember/core/tensor.h"

namespace ember::raw {

// --- elementwise (NumPy broadcasting; tensor-tensor dtypes promote as promote_types)
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor binary(BinaryOp op, const Tensor& a, Scalar b);
Tensor binary(BinaryOp op, Scalar a, const Tensor& b);
Tensor& binary_(BinaryOp op, Tensor& self, const Tensor& other);  // in place: self = self op other
Tensor& binary_(BinaryOp op, Tensor& self, Scalar other);
Tensor unary(UnaryOp op, const Tensor& x);  // integer inputs to float ops (exp, sqrt, ...) give kFloat32
Tensor& unary_(UnaryOp op, Tensor& self);
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor& clamp_(Tensor& self, double lo, double hi);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// --- reductions (dims may be negative; empty dims = all dims)
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, const char* opname);
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor min(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false, int64_t correction = 1);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
// The running sum along dim (reverse: from the end); integer and bool inputs give kInt64, as PyTorch's cumsum.
Tensor cumsum(const Tensor& x, int64_t dim, bool reverse = false);
// The indices (kInt64, x's shape) that sort x along dim: stable, NaN largest (as PyTorch's sort(stable=True));
// descending puts the largest first and still keeps equal elements in their order.
Tensor argsort(const Tensor& x, int64_t dim, bool descending = false);
// Sums a broadcast tensor back to `shape` (the reverse of broadcasting; used by autograd).
Tensor sum_to(const Tensor& x, const Shape& shape);

// --- linear algebra
Tensor matmul(const Tensor& a, const Tensor& b);  // [M,K]@[K,N], [B,M,K]@[B,K,N] (batch broadcasts), 1-D as numpy
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);  // x[..., in] w[out, in] b[out] (b may be undefined)
// The fused forms of a linear layer (Backend::gemm_epilogue; cuBLASLt's epilogues on CUDA). The callers
// (autograd's linear and linear_gelu_linear) have checked the operands as linear does (check_linear).
void check_linear(const char* op, const Tensor& x, const Tensor& w, const Tensor& b);
// gelu(x w^T + b) and its input pre = x w^T + b (kept for the backward), both [..., out]; tanh: GELU's tanh form.
struct LinearGeluResult {
  Tensor y, pre;
};
LinearGeluResult linear_gelu(const Tensor& x, const Tensor& w, const Tensor& b, bool tanh);
// A linear layer's weight gradient g^T x [out, in] from g [rows, out] and x [rows, in], and with_bias its bias
// gradient (g's column sums, [out]) from the same GEMM.
struct LinearWeightGrads {
  Tensor w, b;
};
LinearWeightGrads linear_weight_grads(const Tensor& g, const Tensor& x, bool with_bias);
// Through linear(gelu(pre), w) backwards from its output gradient g [rows, out] (w [out, hidden], pre [rows,
// hidden]): the gradient at GELU's input, (g w) * gelu'(pre), in one GEMM, and with_bias its column sums (the
// gradient of the bias that pre includes).
struct GeluInputGrads {
  Tensor pre, b;
};
GeluInputGrads linear_gelu_input_grads(const Tensor& g, const Tensor& w, const Tensor& pre, bool tanh, bool with_bias);

// --- nn kernels
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// cross_entropy from class indices, fused (backend.h: class_cross_entropy; nn::cross_entropy's forward): per row i
// of logits [N, C] (floating; 16-bit read as they are and computed in float32, never copied whole) the loss
// -log_softmax(logits)[i, t_i], and the row statistics its gradient reads. targets [N], int64 or int32, with values
// the caller has checked in [0, C) (raw::check_index_range).
struct ClassCrossEntropy {
  Tensor loss;   // [N], float32 (float64 for float64 logits)
  Tensor stats;  // [N, 2], loss's dtype: each row's max and the log of its sum of exp(x - max)
};
ClassCrossEntropy class_cross_entropy(const Tensor& logits, const Tensor& targets);
// Its gradient (softmax(logits) - onehot(targets)) * scale, of the logits' dtype and shape; scale is a 0-dim or
// [N] floating tensor on the logits' device (no host synchronisation: the loss's gradient / N stays there).
Tensor class_cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& stats,
                                    const Tensor& scale);
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, std::vector<int64_t> stride = {1, 1},
              std::vector<int64_t> padding = {0, 0});
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0});
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0});

// The stride and padding (and a pool's kernel) as the backends take them: checked, with their defaults (stride 1 for
// a convolution, the kernel for a pool), as conv2d and the pools resolve them.
Conv2dParams conv_params(const Tensor& x, const Tensor& w, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& padding);
Pool2dParams pool_params(const char* op, const Tensor& x, const std::vector<int64_t>& kernel,
                         const std::vector<int64_t>& stride, const std::vector<int64_t>& padding);
// Gradients of conv2d with respect to x, w and b (each computed only when its flag is set).
struct Conv2dGrads {
  Tensor x, w, b;
};
Conv2dGrads conv2d_backward(const Tensor& grad_out, const Tensor& x, const Tensor& w, std::vector<int64_t> stride,
                            std::vector<int64_t> padding, bool need_x, bool need_w, bool need_b);
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& x, std::vector<int64_t> kernel,
                           std::vector<int64_t> stride = {}, std::vector<int64_t> padding = {0, 0});
Tensor avg_pool2d_backward(const Tensor& grad_out, const Tensor& x, std::vector<int64_t> kernel,
                           std::vector<int64_t> stride = {}, std::vector<int64_t> padding = {0, 0});

// --- attention (core/src/attention.cpp)
// Scaled-dot-product attention over q [..., Tq, d], k [..., Tk, d], v [..., Tk, dv] (the same leading dims;
// [B, H, T, d] reads dim -3 as the heads): out [..., Tq, dv] and the per-row log-sum-exp lse [..., Tq] (float32,
// float64 for float64 inputs), which attention_backward needs. mask: undefined, kBool (true = attend) or additive
// of q's dtype, broadcastable to [..., Tq, Tk]; scale 0 means 1 / sqrt(d). A row whose keys are all masked out
// gives 0 (and lse -inf). The [Tq, Tk] scores are never stored: memory grows linearly in T.
struct AttentionResult {
  Tensor out, lse;
};
AttentionResult attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale,
                          bool causal);
// The checks of attention alone (what the composite with dropout needs).
void check_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale);
struct AttentionGrads {
  Tensor q, k, v;
};
AttentionGrads attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& mask, double scale, bool causal);

// --- normalisation
// Batch normalisation over dim 1 of x [N, C, ...] (torch.nn.functional.batch_norm). training: x is normalised
// with its own per-channel statistics (the variance biased), and running_mean / running_var, when defined, move
// towards them in place (rm = (1 - momentum) rm + momentum mean, the variance unbiased); else with the running
// statistics, which are then required. weight and bias may be undefined (1 and 0). 16-bit floats compute in
// float32. mean and invstd (1 / sqrt(var + eps)) are what batch_norm_backward needs.
struct BatchNormResult {
  Tensor y, mean, invstd;
};
// relu: y = relu(batch_norm(...)) in the same pass (the normalised values are not stored).
BatchNormResult batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                           const Tensor& bias, bool training, double momentum, double eps, bool relu = false);
struct BatchNormGrads {
  Tensor x, weight, bias;  // each only when asked for; weight and bias in the compute dtype (float32 for 16-bit x)
};
// relu_y: batch_norm_relu's output, whose ReLU backward is folded into the passes (undefined: plain batch_norm).
BatchNormGrads batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                   const Tensor& weight, bool training, bool need_x, bool need_weight, bool need_bias,
                                   const Tensor& relu_y = {});

// Row normalisation over the last k dims of x (kernel_params.h's RowNorm; LayerNorm is
// torch.nn.functional.layer_norm's math): each of the N rows of D = the product of those dims is normalised,
// then * weight + bias (each of the last k dims' shape, or undefined). 16-bit floats compute in float32 and y
// rounds back; mean and rstd (1 / sqrt(var + eps)) are [N] in the compute dtype, what row_norm_backward needs.
struct LayerNormResult {
  Tensor y, mean, rstd;
};
LayerNormResult row_norm(RowNormKind kind, const Tensor& x, int64_t k, const Tensor& weight, const Tensor& bias,
                         double eps);
struct LayerNormGrads {
  Tensor x, weight, bias;  // each only when asked for; weight and bias in the compute dtype
};
LayerNormGrads row_norm_backward(RowNormKind kind, const Tensor& grad_out, const Tensor& x, int64_t k,
                                 const Tensor& mean, const Tensor& rstd, const Tensor& weight, bool need_x,
                                 bool need_weight, bool need_bias);
inline LayerNormResult layer_norm(const Tensor& x, int64_t k, const Tensor& weight, const Tensor& bias, double eps) {
  return row_norm(RowNormKind::LayerNorm, x, k, weight, bias, eps);
}
inline LayerNormGrads layer_norm_backward(const Tensor& grad_out, const Tensor& x, int64_t k, const Tensor& mean,
                                          const Tensor& rstd, const Tensor& weight, bool need_x, bool need_weight,
                                          bool need_bias) {
  return row_norm_backward(RowNormKind::LayerNorm, grad_out, x, k, mean, rstd, weight, need_x, need_weight, need_bias);
}

// --- shape and indexing
Tensor cat(const std::vector<Tensor>& xs, int64_t dim);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// Every value of the integer tensor `index` in [lo, hi), else IndexError(message(min, max)). On a GPU the check is
// queued without the host waiting and a failure is thrown by the next synchronisation (Backend::check_range).
void check_index_range(const Tensor& index, int64_t lo, int64_t hi, const RangeMessage& message);
// A zero tensor of `shape` with src added at the positions index_select(dim, index) read (the adjoint).
Tensor index_add_zeros(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src);
// The same added into out (contiguous, src's dtype and device) in place; index values out of range throw.
Tensor& index_add_(Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);

// --- views (metadata only; share storage)
Tensor as_strided(const Tensor& x, const Shape& sizes, const Shape& strides, int64_t offset);
Tensor view(const Tensor& x, const Shape& shape);     // throws when strides make a view impossible
Tensor reshape(const Tensor& x, const Shape& shape);  // a view when possible, else a copy
Tensor transpose(const Tensor& x, int64_t a, int64_t b);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start = 0, int64_t end = -1);
Tensor expand(const Tensor& x, const Shape& shape);  // broadcast to shape (stride 0), -1 keeps a size
Tensor alias(const Tensor& x);                       // a new handle on the same data and metadata

// --- copies and dtypes
Tensor contiguous(const Tensor& x);         // x itself when already contiguous
Tensor clone(const Tensor& x);              // always a fresh contiguous copy
Tensor contiguous(const Tensor& x, MemoryFormat f);  // x itself when already dense in f
// A tensor dense in format f as the contiguous view that kernels taking contiguous tensors run on: channels-last
// [N, C, H, W] as its [N, H, W, C] permutation; any other format: x itself. from_layout_view undoes it.
Tensor layout_view(const Tensor& x, MemoryFormat f);
Tensor from_layout_view(const Tensor& v, MemoryFormat f);
Tensor clone(const Tensor& x, MemoryFormat f);       // a fresh copy in f (Preserve: x's suggest_memory_format())
Tensor cast(const Tensor& x, DType dtype);  // x itself when dtype matches
Tensor to_device(const Tensor& x, Device device, bool non_blocking = false);
// src broadcasts to dst; dtype converts; non_blocking as Tensor::copy_ (docs/cuda.md).
Tensor& copy_(Tensor& dst, const Tensor& src, bool non_blocking = false);
Tensor& fill_(Tensor& dst, Scalar v);

}  // namespace ember::raw

namespace ember::detail {
// Throws when writing into `t` would be ambiguous: an expanded view whose elements share memory.
void check_writable(const char* op, const Tensor& t);
}  // namespace ember::detail
