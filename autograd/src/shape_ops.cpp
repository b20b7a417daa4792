// defines: the public chunk, split and pad of ops.h. chunk and split are one recorded op whose outputs are the
// pieces (views of x); its gradient is the pieces' gradients side by side (a cat, zeros for a piece that got none),
// not one zero-filled copy of x per piece added up, as slicing each piece would give. pad is one recorded op whose
// gradient is a pad again (the negated pads crop what it added and add back, as zeros, what it cropped), so it is
// differentiable to any order.
#include <algorithm>

#include "ember/autograd/ops.h"
#include "grad_utils.h"

namespace ember {

namespace {
// The dim along which x is cut into pieces, normalised; a 0-dim tensor has none.
int64_t piece_dim(const char* op, const Tensor& x, int64_t dim) {
  autograd::check_defined(op, x, "x");
  EMBER_CHECK_SHAPE(x.dim() > 0, op, ": expects a tensor with at least 1 dim, got a 0-dim ", x.dtype(), " tensor");
  return normalize_dim(dim, x.dim(), op);
}

// g's pieces as one tensor of `shape` when they already lie side by side along d in one contiguous buffer, each
// where its part of that buffer is (the gradients attention gives the pieces of a packed q, k, v projection do):
// then no copy. Undefined otherwise.
Tensor pieces_in_place(const Grads& g, size_t n, const Shape& shape, int64_t d) {
  if (g.size() < n || !g[0].defined()) return {};
  const Tensor& first = g[0];
  int64_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = g[i];
    if (!p.defined() || p.impl()->storage != first.impl()->storage || p.dtype() != first.dtype() ||
        p.strides() != first.strides() || p.storage_offset() != first.storage_offset() + at * first.stride(d))
      return {};
    at += p.size(d);
  }
  // Side by side, so the whole lies in their storage; contiguous also rules out overlap (a stride of 0 along d).
  Tensor whole = raw::as_strided(first, shape, first.strides(), first.storage_offset());
  return whole.is_contiguous() ? whole : Tensor();
}

// The gradient of split: the pieces' gradients side by side along d, zeros for a piece that got none.
Tensor join_piece_grads(const Grads& g, const std::vector<Shape>& piece_shapes, const InputInfo& ix, int64_t d) {
  const size_t n = piece_shapes.size();
  if (!autograd::create_graph_enabled())
    if (Tensor whole = pieces_in_place(g, n, ix.shape, d); whole.defined()) return whole;
  std::vector<Tensor> parts;
  for (size_t i = 0; i < n; ++i) {
    const bool got = i < g.size() && g[i].defined();
    parts.push_back(got ? g[i] : zeros(piece_shapes[i], {.dtype = ix.dtype, .device = ix.device}));
  }
  return autograd::create_graph_enabled() ? cat(parts, d) : raw::cat(parts, d);  // cat: differentiable again
}

// x cut along d into pieces of `sizes` (checked by the caller), recorded as one op.
std::vector<Tensor> split_into(const Tensor& x, const std::vector<int64_t>& sizes, int64_t d) {
  OpEntry op(opdef::split);
  std::vector<Tensor> pieces;
  std::vector<Shape> piece_shapes;
  int64_t at = 0;
  for (int64_t s : sizes) {
    pieces.push_back(raw::slice(x, d, at, at + s));
    piece_shapes.push_back(pieces.back().shape());
    at += s;
  }
  if (!op.needs_grad({&x})) return pieces;
  op.record({x}, pieces, /*outputs_are_views=*/true)
      .backward([ix = InputInfo(x), piece_shapes, d](const Grads& g) -> Grads {
        return {join_piece_grads(g, piece_shapes, ix, d)};
      });
  return pieces;
}
}  // namespace

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  const int64_t d = piece_dim("split", x, dim);
  const int64_t n = x.size(d);
  EMBER_CHECK_VALUE(split_size > 0 || (split_size == 0 && n == 0),
                    "split: split_size must be positive (0 only for an "
                    "empty dim), got ",
                    split_size, " for dim ", d, " of ", x.dtype(), x.shape());
  if (n == 0) return {x.slice(d, 0, 0)};  // one empty piece, as PyTorch
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < n; at += split_size) sizes.push_back(std::min(split_size, n - at));
  return split_into(x, sizes, d);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim) {
  const int64_t d = piece_dim("split", x, dim);
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    EMBER_CHECK_VALUE(s >= 0, "split: split_sizes must be non-negative, got ", Shape(split_sizes));
    total += s;
  }
  EMBER_CHECK_VALUE(total == x.size(d), "split: split_sizes ", Shape(split_sizes), " add up to ", total, " but dim ", d,
                    " of ", x.dtype(), x.shape(), " has size ", x.size(d));
  return split_into(x, split_sizes, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  const int64_t d = piece_dim("chunk", x, dim);
  EMBER_CHECK_VALUE(chunks > 0, "chunk: chunks must be positive, got ", chunks);
  const int64_t n = x.size(d);
  if (n == 0) return std::vector<Tensor>(static_cast<size_t>(chunks), x.slice(d, 0, 0));  // as PyTorch
  return split(x, (n + chunks - 1) / chunks, d);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, Scalar value) {
  OpEntry op(opdef::pad);
  autograd::check_defined(opdef::pad.name, x, "x");
  const int64_t pairs = static_cast<int64_t>(pads.size() / 2);
  EMBER_CHECK_VALUE(pads.size() % 2 == 0, opdef::pad.name, ": pads must come in (before, after) pairs, got ",
                    pads.size(), " values ", Shape(pads));
  EMBER_CHECK_VALUE(pairs <= x.dim(), opdef::pad.name, ": pads ", Shape(pads), " cover ", pairs, " dims but the input ",
                    x.dtype(), x.shape(), " has ", x.dim());
  // Pair k pads dim (rank - 1 - k). A negative pad crops, but no more than the dim has.
  Shape out_shape = x.shape();
  for (int64_t k = 0; k < pairs; ++k) {
    const size_t d = static_cast<size_t>(x.dim() - 1 - k);
    const int64_t lo = pads[static_cast<size_t>(2 * k)], hi = pads[static_cast<size_t>(2 * k + 1)];
    EMBER_CHECK_VALUE(x.shape()[d] + std::min<int64_t>(lo, 0) + std::min<int64_t>(hi, 0) >= 0, opdef::pad.name,
                      ": pads (", lo, ", ", hi, ") crop more than the ", x.shape()[d], " elements of dim ", d, " of ",
                      x.dtype(), x.shape());
    out_shape[d] += lo + hi;
  }
  Tensor y = full(out_shape, value, {.dtype = x.dtype(), .device = x.device()});
  // The part of x that stays, and where it lands in y.
  Tensor src = raw::alias(x), dst = raw::alias(y);
  for (int64_t k = 0; k < pairs; ++k) {
    const int64_t d = x.dim() - 1 - k;
    const int64_t lo = pads[static_cast<size_t>(2 * k)], hi = pads[static_cast<size_t>(2 * k + 1)];
    src = raw::slice(src, d, std::max<int64_t>(-lo, 0), x.size(d) - std::max<int64_t>(-hi, 0));
    dst = raw::slice(dst, d, std::max<int64_t>(lo, 0), out_shape[static_cast<size_t>(d)] - std::max<int64_t>(hi, 0));
  }
  if (src.numel() > 0) raw::copy_(dst, src);
  if (!op.needs_grad({&x})) return y;
  std::vector<int64_t> back(pads.size());
  std::transform(pads.begin(), pads.end(), back.begin(), [](int64_t p) { return -p; });
  op.record({x}, {y}).backward([back](const Grads& g) -> Grads { return {pad(g[0], back, 0)}; });
  return y;
}

}  // namespace ember
