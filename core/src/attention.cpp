// defines: the raw attention ops (raw::attention, raw::attention_backward): argument checks, the flattening of
// q/k/v to [BH, T, d] and of the mask to four strides, and one backend call each.
#include <array>
#include <cmath>

#include "ember/core/memory_context.h"
#include "op_utils.h"

namespace ember::raw {
using detail::describe;

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// What every call checks and derives from q, k, v and the mask.
struct Prepared {
  AttentionParams p;
  Shape lead;       // the leading dims shared by q, k and v
  Tensor q, k, v;   // contiguous, in the compute dtype
  Tensor mask;      // expanded to [B, H, Tq, Tk] (a view; strides in p.mask_stride), or undefined
  DType dtype;      // the inputs' dtype
  DType compute;    // the kernels': float32 for 16-bit floats on the CPU
};

Shape leading(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// t as [batch, heads, rows, width] in the compute dtype without a copy when its last dim is contiguous and its
// leading dims merge into two (a transposed or sliced projection); its strides go to `stride`.
Tensor rows_of(const Tensor& t, DType compute, const AttentionParams& p, int64_t rows, int64_t* stride) {
  const int64_t batch = p.batch_heads / std::max<int64_t>(p.heads, 1);
  Tensor r = reshape(cast(t, compute), {batch, p.heads, rows, t.size(-1)});
  if (r.stride(3) != 1 && r.size(3) > 1) r = contiguous(r);
  for (int i = 0; i < 3; ++i) stride[i] = r.stride(i);
  return r;
}

// Whether `from` broadcasts to exactly `to` (NumPy's rule, without the exception of broadcast_shapes).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != to[lead + i] && from[i] != 1) return false;
  return true;
}
// The shape of a key-padding mask for scores of shape `full`: [batch..., 1, 1, key length].
Shape padding_mask_shape(const Shape& full) {
  Shape s = full;
  s[s.size() - 2] = 1;
  if (s.size() >= 4) s[s.size() - 3] = 1;  // a heads dim
  return s;
}
// " in module 'encoder.0.attn'" when a module's forward is running (nn::Module pushes its path), else "".
std::string in_module() {
  const std::string path = memory::current_context().module_path;
  return path.empty() ? std::string() : detail::str(" in module '", path, "'");
}

Prepared prepare(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale, bool causal) {
  detail::check_defined(kOp, q, "query");
  detail::check_defined(kOp, k, "key");
  detail::check_defined(kOp, v, "value");
  detail::check_same_device(kOp, q, k);
  detail::check_same_device(kOp, q, v);
  detail::check_floating(kOp, q);
  EMBER_CHECK_DTYPE(k.dtype() == q.dtype() && v.dtype() == q.dtype(), kOp,
                    ": expected query, key and value of one dtype, got ", describe(q), ", ", describe(k), " and ",
                    describe(v));
  EMBER_CHECK_SHAPE(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), kOp,
                    ": expected query, key and value of one rank >= 2 ([..., T, d]; [batch, heads, T, d] as "
                    "PyTorch), got ",
                    q.shape(), ", ", k.shape(), " and ", v.shape());
  EMBER_CHECK_SHAPE(leading(k) == leading(q) && leading(v) == leading(q), kOp,
                    ": query, key and value must share their leading dims, got ", q.shape(), ", ", k.shape(), " and ",
                    v.shape());
  EMBER_CHECK_SHAPE(k.size(-1) == q.size(-1), kOp, ": query and key need one feature size d, got query ", q.shape(),
                    " and key ", k.shape());
  EMBER_CHECK_SHAPE(v.size(-2) == k.size(-2), kOp, ": key and value need one length, got key ", k.shape(),
                    " and value ", v.shape());
  EMBER_CHECK_VALUE(std::isfinite(scale), kOp, ": scale must be finite (0 = 1 / sqrt(d)), got ", scale);

  Prepared r;
  r.dtype = q.dtype();
  r.compute = is_reduced_float(q.dtype()) && q.device().is_cpu() ? kFloat32 : q.dtype();
  r.lead = leading(q);
  AttentionParams& p = r.p;
  p.tq = q.size(-2);
  p.tk = k.size(-2);
  p.d = q.size(-1);
  p.dv = v.size(-1);
  p.heads = q.dim() >= 3 ? q.size(-3) : 1;
  p.batch_heads = r.lead.numel();
  p.scale = scale != 0 ? scale : (p.d > 0 ? 1.0 / std::sqrt(static_cast<double>(p.d)) : 1.0);
  p.causal = causal;
  r.q = rows_of(q, r.compute, p, p.tq, p.q_stride);
  r.k = rows_of(k, r.compute, p, p.tk, p.k_stride);
  r.v = rows_of(v, r.compute, p, p.tk, p.v_stride);

  if (mask.defined()) {
    detail::check_same_device(kOp, q, mask);
    EMBER_CHECK_DTYPE(mask.dtype() == kBool || mask.dtype() == q.dtype(), kOp,
                      ": the mask must be bool (true = attend) or additive of the query's dtype, got mask ",
                      describe(mask), " for query ", describe(q));
    Shape full = r.lead;
    full.push_back(p.tq);
    full.push_back(p.tk);
    EMBER_CHECK_SHAPE(broadcasts_to(mask.shape(), full), kOp, ": the mask ", mask.shape(),
                      " does not broadcast to the scores' shape ", full, " ([batch..., heads, query length, key ",
                      "length]; a padding mask is [batch, 1, 1, key length] = ", padding_mask_shape(full), ")",
                      in_module());
    // [B..., H, Tq, Tk] as four dims (batch, heads, i, j): a reshape, which copies only when the batch dims
    // cannot be merged as they are
    Tensor m = expand(cast(mask, mask.dtype() == kBool ? kBool : r.compute), full);
    const int64_t batch = p.batch_heads / std::max<int64_t>(p.heads, 1);
    if (full.size() != 4) m = reshape(m, {batch, p.heads, p.tq, p.tk});
    for (int i = 0; i < 4; ++i) p.mask_stride[i] = m.stride(i);
    p.mask = mask.dtype() == kBool ? AttnMask::Bool : AttnMask::Additive;
    r.mask = m;
  }
  return r;
}

Shape with_last(const Shape& lead, std::initializer_list<int64_t> last) {
  Shape s = lead;
  for (int64_t v : last) s.push_back(v);
  return s;
}

// Whether t [B, H, T, w] is a head split: [B, T, H, w] seen through transpose(1, 2), its tokens `row` >= H w
// elements apart: x.reshape({B, T, H, hd}).transpose(1, 2) of a projection x [B, T, H * hd] (row = H hd), or of
// one piece of a packed q, k, v projection, split(qkv, d, -1) of qkv [B, T, 3 d] (row = 3 d).
bool is_head_split(const Tensor& t) {
  return t.dim() == 4 && t.stride(3) == 1 && t.stride(1) == t.size(3) && t.stride(2) >= t.size(1) * t.size(3) &&
         t.stride(0) == t.size(2) * t.stride(2);
}

// Whether q, k, v are the three pieces of one packed projection: head splits of one storage with rows of 3 H w,
// k right after q in each row and v right after k.
bool is_packed_qkv(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (!is_head_split(q) || k.shape() != q.shape() || v.shape() != q.shape() || k.strides() != q.strides() ||
      v.strides() != q.strides())
    return false;
  const int64_t width = q.size(1) * q.size(3);  // H w
  return q.stride(2) == 3 * width && k.impl()->storage == q.impl()->storage && v.impl()->storage == q.impl()->storage &&
         k.storage_offset() == q.storage_offset() + width && v.storage_offset() == q.storage_offset() + 2 * width;
}

// The head split of a new [B, T, parts * H w] buffer, part `part`: [B, H, T, w] with rows of parts * H w.
Tensor new_head_split(const Tensor& buffer, const Shape& shape, int64_t part) {
  const int64_t heads = shape[1], rows = shape[2], w = shape[3], row = buffer.size(2);
  return as_strided(buffer, shape, {rows * row, w, row, 1}, buffer.storage_offset() + part * heads * w);
}

// A new output or gradient of `shape` (lead + [rows, width]) for the kernels, laid out as a head split where
// `like` (the q, k or v it belongs to) is one and the device is the CPU (the CUDA kernels write contiguous rows):
// then merging the heads back, y.transpose(1, 2).reshape({B, T, d}), is a view, and so are the gradients' way back
// through the head split of the projections. Otherwise contiguous.
Tensor new_rows(const Tensor& like, const Shape& shape, DType dtype, Device dev) {
  if (!dev.is_cpu() || !is_head_split(like)) return detail::new_tensor(shape, dtype, dev);
  return new_head_split(detail::new_tensor({shape[0], shape[2], shape[1] * shape[3]}, dtype, dev), shape, 0);
}

// The gradients of q, k and v in new buffers laid out as new_rows does, except for a packed q, k, v on the CPU: one
// buffer packed the same way, so that split's backward finds the three side by side and copies nothing.
std::array<Tensor, 3> new_qkv_grads(const Tensor& q, const Tensor& k, const Tensor& v, DType dtype, Device dev) {
  if (!dev.is_cpu() || !is_packed_qkv(q, k, v))
    return {new_rows(q, q.shape(), dtype, dev), new_rows(k, k.shape(), dtype, dev), new_rows(v, v.shape(), dtype, dev)};
  const Shape& s = q.shape();
  const Tensor buffer = detail::new_tensor({s[0], s[2], 3 * s[1] * s[3]}, dtype, dev);
  return {new_head_split(buffer, s, 0), new_head_split(buffer, s, 1), new_head_split(buffer, s, 2)};
}

}  // namespace

void check_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale) {
  prepare(q, k, v, mask, scale, false);
}

AttentionResult attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale,
                          bool causal) {
  Prepared r = prepare(q, k, v, mask, scale, causal);
  const Device dev = q.device();
  Tensor out = new_rows(q, with_last(r.lead, {r.p.tq, r.p.dv}), r.compute, dev);
  rows_of(out, r.compute, r.p, r.p.tq, r.p.o_stride);  // its strides (a view of it: no copy)
  Tensor lse = detail::new_tensor(with_last(r.lead, {r.p.tq}), r.compute == kFloat64 ? kFloat64 : kFloat32, dev);
  if (out.numel() > 0 && r.p.tk == 0) {  // no keys: every row is empty
    backend_for(dev).fill(out, 0.0);
    backend_for(dev).fill(lse, -INFINITY);
  } else if (out.numel() > 0) {
    backend_for(dev).attention({.out = out, .lse = lse, .q = r.q, .k = r.k, .v = r.v, .mask = r.mask, .p = r.p});
  }
  return {cast(out, r.dtype), lse};
}

AttentionGrads attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& mask, double scale,
                                  bool causal) {
  Prepared r = prepare(q, k, v, mask, scale, causal);
  const Device dev = q.device();
  const Shape out_shape = with_last(r.lead, {r.p.tq, r.p.dv});
  EMBER_CHECK_SHAPE(grad_out.defined() && grad_out.shape() == out_shape && out.shape() == out_shape, kOp,
                    ": backward expects the gradient and output of shape ", out_shape, ", got ", describe(grad_out),
                    " and ", describe(out));
  auto [gq, gk, gv] = new_qkv_grads(q, k, v, r.compute, dev);
  if (r.p.batch_heads == 0 || r.p.tq == 0 || r.p.tk == 0) {  // nothing attended: every gradient is 0
    for (const Tensor* g : {&gq, &gk, &gv}) backend_for(dev).fill(*g, 0.0);
    return {cast(gq, r.dtype), cast(gk, r.dtype), cast(gv, r.dtype)};
  }
  rows_of(gq, r.compute, r.p, r.p.tq, r.p.gq_stride);  // their strides (views: no copy)
  rows_of(gk, r.compute, r.p, r.p.tk, r.p.gk_stride);
  rows_of(gv, r.compute, r.p, r.p.tk, r.p.gv_stride);
  // The CPU reads the output and its gradient through their strides (a head split, or the view of one, stays
  // where it is); the CUDA kernels take them contiguous.
  Tensor go = cast(grad_out, r.compute), o = cast(out, r.compute);
  if (!dev.is_cpu()) {
    go = contiguous(go);
    o = contiguous(o);
  }
  go = rows_of(go, r.compute, r.p, r.p.tq, r.p.go_stride);
  o = rows_of(o, r.compute, r.p, r.p.tq, r.p.o_stride);
  backend_for(dev).attention_backward({.gq = gq,
                                       .gk = gk,
                                       .gv = gv,
                                       .gout = go,
                                       .q = r.q,
                                       .k = r.k,
                                       .v = r.v,
                                       .out = o,
                                       .lse = contiguous(lse),
                                       .mask = r.mask,
                                       .p = r.p});
  return {cast(gq, r.dtype), cast(gk, r.dtype), cast(gv, r.dtype)};
}

}  // namespace ember::raw
