// defines: the public tensor operations of API.md as free functions in namespace ember, plus the C++
// operators + - * / (tensor-tensor, tensor-scalar, scalar-tensor). They are built on ember::raw; this is
// where autograd records its nodes.
//
//   Tensor y = ember::relu(ember::matmul(x, w) + b);
//   Tensor p = ember::softmax(y, -1);
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ember/core/tensor.h"

namespace ember {

// --- arithmetic (NumPy broadcasting; dtypes promote as PyTorch's)
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, Scalar exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);  // log(1 + x), exact for small x
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor square(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor clamp(const Tensor& x, double lo, double hi);
// One-sided clamps (PyTorch's clamp_min / clamp_max): max(x, min) and min(x, max), NaN in x passing through.
Tensor clamp_min(const Tensor& x, double min);
Tensor clamp_max(const Tensor& x, double max);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& x);

// --- comparisons (give kBool) and selection
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// --- linear algebra
Tensor matmul(const Tensor& a, const Tensor& b);                        // 1-D, 2-D, batched (batch dims broadcast)
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {});  // y = x w^T + b, w is [out, in]

// --- reductions (dims may be negative; no dims = all)
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor max(const Tensor& x);
Tensor max(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor min(const Tensor& x);
Tensor min(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor var(const Tensor& x);  // unbiased (correction 1), as torch.var
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false, int64_t correction = 1);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
// log(sum(exp(x))) over dims, computed as m + log(sum(exp(x - m))) with m the max (no overflow); integer inputs
// give float32.
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// The p-norm over dims (all when empty) of a floating tensor: p >= 1 (sum |x|^p)^(1/p), or p = inf / -inf (the
// largest / smallest |x|). The gradient of a zero norm is 0, as PyTorch's.
Tensor norm(const Tensor& x, double p = 2, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// The running sum along dim; integer and bool inputs give int64.
Tensor cumsum(const Tensor& x, int64_t dim);

// --- activations
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x);       // exact (erf) form
// GELU's form: None, the exact x Phi(x); Tanh, x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (PyTorch's
// approximate="tanh", GPT-2's "gelu_new").
enum class GeluApproximate { None, Tanh };
struct GeluOptions {
  GeluApproximate approximate = GeluApproximate::None;
};
Tensor gelu(const Tensor& x, const GeluOptions& opts);  // gelu(x, {.approximate = GeluApproximate::Tanh})
// A transformer's MLP in one op: linear(gelu(linear(x, w1, b1), opts), w2, b2) (w1 [hidden, in], w2 [out, hidden];
// either bias may be undefined), with the GELU, its derivative and the bias gradients folded into the GEMMs where
// the device can (cuBLASLt's epilogues on CUDA, for the tanh GELU: docs/cuda.md, "Linear epilogues"). Same values
// and gradients as the three ops; autocast runs it in the autocast dtype (as linear).
Tensor linear_gelu_linear(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
                          const GeluOptions& opts = {});
Tensor softplus(const Tensor& x);   // log(1 + exp(x)), x itself above 20 (PyTorch's beta 1, threshold 20)
Tensor silu(const Tensor& x);       // x * sigmoid(x)
Tensor mish(const Tensor& x);       // x * tanh(softplus(x))
Tensor hardswish(const Tensor& x);  // x * relu6(x + 3) / 6
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);  // x > 0 ? x : negative_slope * x
Tensor elu(const Tensor& x, double alpha = 1.0);                   // x > 0 ? x : alpha * (exp(x) - 1)
Tensor softmax(const Tensor& x, int64_t dim);
// Batch normalisation over dim 1 of x [N, C, ...] (torch.nn.functional.batch_norm): with the batch's statistics
// when training (updating running_mean / running_var in place when they are defined), else with the running ones.
// weight, bias, running_mean and running_var may be undefined; differentiable in x, weight and bias.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight = {},
                  const Tensor& bias = {}, bool training = true, double momentum = 0.1, double eps = 1e-5);
// relu(batch_norm(...)) in one pass: the same values and gradients, the normalised tensor never written (the forward
// writes one activation instead of writing, reading and writing two; backward reads x and the output, which the next
// layer keeps anyway). nn::BatchNorm2d(c, {.relu = true}) is this op.
Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight = {}, const Tensor& bias = {}, bool training = true,
                       double momentum = 0.1, double eps = 1e-5);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Layer normalisation over the last dims of x (torch.nn.functional.layer_norm): (x - mean) / sqrt(var + eps), with
// the biased variance, then * weight + bias (each of normalized_shape, optional).
Tensor layer_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// Root-mean-square normalisation over the last dims (torch.nn.functional.rms_norm): x / sqrt(mean(x^2) + eps) *
// weight (of normalized_shape, optional). eps defaults, as PyTorch's, to the machine epsilon of x's dtype
// (float32's for 16-bit inputs, which compute in float32).
Tensor rms_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);

// --- attention (autograd/src/attention.cpp; docs/attention.md)
struct SdpaOptions {
  bool causal = false;   // query i attends to keys j <= i (top-left aligned, as PyTorch's is_causal)
  Tensor mask = {};      // bool (true = attend) or additive (q's dtype), broadcastable to [..., Tq, Tk]
  double dropout_p = 0;  // dropout on the attention weights (applied whenever > 0, as the PyTorch function)
  double scale = 0;      // 0: 1 / sqrt(d)
};
// softmax(q k^T * scale + mask) v for q [..., Tq, d], k [..., Tk, d], v [..., Tk, dv] with one set of leading
// dims ([batch, heads, T, d] as PyTorch). Tiled (FlashAttention-2): memory linear in T, the scores recomputed in
// backward. A row whose keys are all masked out gives 0. dropout_p > 0 takes the plain composite (memory
// quadratic in T). Differentiable in q, k and v (twice too: through the composite); an additive mask is a constant.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& opts = {});

// --- shape
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
// Pieces of x along dim that are views of it, as torch.chunk / torch.split. chunk: pieces of ceil(size / chunks)
// elements, so possibly fewer than `chunks` (an empty dim gives `chunks` empty pieces). split: pieces of split_size
// (the last one smaller), or of the given sizes, which must add up to the dim's size. (C++ reads split(x, {n}) as
// split(x, n): write a one-size list as std::vector<int64_t>{n}.)
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
// Constant padding, as torch.nn.functional.pad: (before, after) pairs from the last dim backwards ({left, right}
// pads dim -1, {left, right, top, bottom} dims -1 and -2, ...); negative values crop.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, Scalar value = 0);

// --- indexing (an index is kInt64 with values in [0, x.size(dim)))
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j] = x[index[i][j]][j] (dim 0), x[i][index[i][j]] (dim 1), ...: index has x's rank, may be smaller than x in
// the other dims, and gives the result its shape (torch.gather).
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// x with src[i][j] added at [index[i][j]][j] (dim 0), [i][index[i][j]] (dim 1), ..., repeated indices adding up: the
// adjoint of gather (torch.scatter_add). src has x's dtype and is at least index's size in every dim (the part that
// index covers is used); differentiable in x and src.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// value where mask (kBool, broadcast with x) is true, x elsewhere; value converted to x's dtype. A 0-dim tensor
// value gets a gradient.
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);

// --- sorting: stable (equal elements keep their order, in both directions) with NaN the largest value, as
// PyTorch's sort(stable=True). values = gather(x, dim, indices), differentiable in x.
SortResult sort(const Tensor& x, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
// The k largest (smallest) elements along dim, largest (smallest) first, ties in their order in x. The result is
// always sorted (`sorted` is there for PyTorch's signature).
SortResult topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);

// --- einsum (torch.einsum): "ij,jk->ik", "bij,bjk->bik", "i,j->ij", "ij->ji", "ij->", "...ij,...jk" (an ellipsis
// stands for the same broadcast dims everywhere), implicit output (the indices that appear once, in alphabetical
// order). Any number of operands, contracted left to right, each pair as one batched matmul. An index repeated in
// one operand (a diagonal, "ii->i") throws ValueError.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

// --- convolution family (NCHW); stride/padding/kernel take 1 value (both dims) or 2 (h, w)
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = {}, std::vector<int64_t> stride = {1},
              std::vector<int64_t> padding = {0});
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0});
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0});
// The average over PyTorch's adaptive bins of x [N, C, H, W] or [C, H, W] (floating): output row i averages input
// rows floor(i * H / oh) to ceil((i + 1) * H / oh) - 1, columns alike. output_size: {oh, ow} or {s} for both.
Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size);

}  // namespace ember
