// defines: the linear-algebra raw ops: matmul (1-D, 2-D and batched with broadcast batch dims) and linear.
#include "op_utils.h"

namespace ember::raw {
using detail::describe;

namespace {
// Views t [batch..., R, C] (already expanded to `batch`) as [B, R, C] without copying when the batch dims
// collapse to one stride, else through a contiguous copy.
Tensor as_batched3(const Tensor& t, const Shape& batch) {
  Shape full = batch;
  full.push_back(t.size(-2));
  full.push_back(t.size(-1));
  Tensor e = expand(t, full);
  const int64_t nb = static_cast<int64_t>(batch.size());
  int64_t B = 1, stride = 0;
  bool ok = true;
  for (int64_t d = nb - 1; d >= 0; --d) {
    const int64_t sz = e.size(d);
    if (sz == 1) continue;
    if (B == 1) stride = e.stride(d);
    else if (e.stride(d) != stride * B) ok = false;  // stride of this dim must continue the inner ones
    B *= sz;
  }
  if (ok) return as_strided(e, {B, e.size(-2), e.size(-1)}, {stride, e.stride(-2), e.stride(-1)}, e.storage_offset());
  return reshape(contiguous(e), {B, e.size(-2), e.size(-1)});
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::check_defined("matmul", a, "a");
  detail::check_defined("matmul", b, "b");
  detail::check_same_device("matmul", a, b);
  detail::check_product_dtypes("matmul", a, b);
  EMBER_CHECK_SHAPE(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dimension, got shapes ",
                    a.shape(), " and ", b.shape());
  // 1-D operands as NumPy: a vector on the left is a row, on the right a column; that dim is dropped after.
  Tensor A = a.dim() == 1 ? unsqueeze(a, 0) : a;
  Tensor Bm = b.dim() == 1 ? unsqueeze(b, 1) : b;
  const int64_t M = A.size(-2), K = A.size(-1), K2 = Bm.size(-2), N = Bm.size(-1);
  EMBER_CHECK_SHAPE(K == K2, "matmul: shapes ", a.shape(), " and ", b.shape(), " cannot be multiplied (", K, " != ", K2,
                    ")");
  Shape ba(A.shape().begin(), A.shape().end() - 2), bb(Bm.shape().begin(), Bm.shape().end() - 2);
  // Checked here so that the message names both full shapes, not only their batch dims.
  bool batch_ok = true;
  for (size_t i = 1; i <= std::min(ba.size(), bb.size()); ++i) {
    const int64_t da = ba[ba.size() - i], db = bb[bb.size() - i];
    batch_ok = batch_ok && (da == db || da == 1 || db == 1);
  }
  EMBER_CHECK_SHAPE(batch_ok, "matmul: shapes ", a.shape(), " and ", b.shape(), " cannot be multiplied (batch dims ",
                    ba, " and ", bb, " do not broadcast)");
  Shape batch = broadcast_shapes(ba, bb, "matmul");
  Tensor A3 = as_batched3(A, batch), B3 = as_batched3(Bm, batch);
  Tensor out = detail::new_tensor({A3.size(0), M, N}, a.dtype(), a.device());
  backend_for(a.device()).matmul(out, A3, B3, Tensor());
  Shape os = batch;
  if (a.dim() > 1) os.push_back(M);
  if (b.dim() > 1) os.push_back(N);
  return view(out, os);
}

void check_linear(const char* op, const Tensor& x, const Tensor& w, const Tensor& b) {
  detail::check_defined(op, x, "x");
  detail::check_defined(op, w, "weight");
  detail::check_same_device(op, x, w);
  detail::check_product_dtypes(op, x, w);
  EMBER_CHECK_SHAPE(w.dim() == 2, op, ": weight must be 2-D [out, in], got ", w.shape());
  EMBER_CHECK_SHAPE(x.dim() >= 1 && x.size(-1) == w.size(1), op, ": input ", x.shape(), " does not match weight ",
                    w.shape(), " (expected the last dim of the input to be ", w.size(1), ")");
  if (b.defined()) {
    detail::check_same_device(op, x, b);
    detail::check_product_dtypes(op, x, b);
    EMBER_CHECK_SHAPE(b.dim() == 1 && b.size(0) == w.size(0), op, ": bias ", b.shape(), " does not match weight ",
                      w.shape(), " (expected [", w.size(0), "])");
  }
}

namespace {
// x [..., in] as its rows [rows, in] (rows counted explicitly: reshape cannot infer -1 when in is 0).
Tensor as_rows(const Tensor& x) {
  return reshape(x, {Shape(x.shape().begin(), x.shape().end() - 1).numel(), x.size(-1)});
}
// x's shape with the last dim `last`.
Shape with_last(const Tensor& x, int64_t last) {
  Shape s = x.shape();
  s[s.size() - 1] = last;
  return s;
}
}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_linear("linear", x, w, b);
  // y[N, out] = x[N, in] @ w^T + b, the transpose being a free strided view (the bias added by the backend's
  // matmul: on the CPU as the GEMM stores its tiles, no second pass over y; on CUDA in cuBLASLt's epilogue).
  Tensor x2 = as_rows(x);
  Tensor out = detail::new_tensor({1, x2.size(0), w.size(0)}, x.dtype(), x.device());
  backend_for(x.device())
      .matmul(out, unsqueeze(x2, 0), unsqueeze(transpose(w, 0, 1), 0), b.defined() ? contiguous(b) : Tensor());
  return view(out, with_last(x, w.size(0)));
}

LinearGeluResult linear_gelu(const Tensor& x, const Tensor& w, const Tensor& b, bool tanh) {
  const Tensor x2 = as_rows(x);
  GemmEpilogueArgs a{.epilogue = GemmEpilogue::BiasGelu, .a = x2, .b = transpose(w, 0, 1),
                     .bias = b.defined() ? contiguous(b) : Tensor(), .gelu_tanh = tanh};
  a.out = detail::new_tensor({x2.size(0), w.size(0)}, x.dtype(), x.device());
  a.aux = detail::new_tensor({x2.size(0), w.size(0)}, x.dtype(), x.device());
  backend_for(x.device()).gemm_epilogue(a);
  return {view(a.out, with_last(x, w.size(0))), view(a.aux, with_last(x, w.size(0)))};
}

LinearWeightGrads linear_weight_grads(const Tensor& g, const Tensor& x, bool with_bias) {
  GemmEpilogueArgs a{.epilogue = GemmEpilogue::BGradA, .a = transpose(g, 0, 1), .b = x};
  a.out = detail::new_tensor({g.size(1), x.size(1)}, g.dtype(), g.device());
  if (with_bias) a.bias_grad = detail::new_tensor({g.size(1)}, g.dtype(), g.device());
  backend_for(g.device()).gemm_epilogue(a);
  return {a.out, a.bias_grad};
}

GeluInputGrads linear_gelu_input_grads(const Tensor& g, const Tensor& w, const Tensor& pre, bool tanh,
                                       bool with_bias) {
  GemmEpilogueArgs a{.epilogue = GemmEpilogue::DGelu, .a = g, .b = w, .aux = contiguous(pre), .gelu_tanh = tanh};
  a.out = detail::new_tensor({g.size(0), w.size(1)}, g.dtype(), g.device());
  if (with_bias) a.bias_grad = detail::new_tensor({w.size(1)}, g.dtype(), g.device());
  backend_for(g.device()).gemm_epilogue(a);
  return {a.out, a.bias_grad};
}

}  // namespace ember::raw
