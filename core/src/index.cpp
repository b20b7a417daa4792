// defines: cat, stack, index_select and its adjoint index_add_zeros.
#include "op_utils.h"

namespace ember::raw {
using detail::describe;

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  EMBER_CHECK_VALUE(!xs.empty(), "cat: expected a non-empty list of tensors");
  for (size_t i = 0; i < xs.size(); ++i) detail::check_defined("cat", xs[i], "tensors[i]");
  const Tensor& first = xs[0];
  EMBER_CHECK_SHAPE(first.dim() > 0, "cat: zero-dimensional tensor (at position 0) cannot be concatenated");
  dim = normalize_dim(dim, first.dim(), "cat");
  DType dt = first.dtype();
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& t = xs[i];
    detail::check_same_device("cat", first, t);
    EMBER_CHECK_SHAPE(t.dim() == first.dim(), "cat: tensor ", i, " has shape ", t.shape(), " but tensor 0 has ",
                      first.shape(), " (ranks differ)");
    for (int64_t d = 0; d < t.dim(); ++d)
      EMBER_CHECK_SHAPE(d == dim || t.size(d) == first.size(d), "cat: sizes must match except in dim ", dim,
                        ": tensor 0 has shape ", first.shape(), ", tensor ", i, " has ", t.shape());
    dt = promote_types(dt, t.dtype());
    total += t.size(dim);
  }
  Shape os = first.shape();
  os[static_cast<size_t>(dim)] = total;
  Tensor out = detail::new_tensor(os, dt, first.device());
  Backend& be = backend_for(first.device());
  int64_t at = 0;
  for (const Tensor& t : xs) {
    if (t.numel()) be.copy(slice(out, dim, at, at + t.size(dim)), t);
    at += t.size(dim);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  EMBER_CHECK_VALUE(!xs.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < xs.size(); ++i) {
    detail::check_defined("stack", xs[i], "tensors[i]");
    EMBER_CHECK_SHAPE(xs[i].shape() == xs[0].shape(), "stack: expects each tensor to be equal size, but got ",
                      xs[0].shape(), " at entry 0 and ", xs[i].shape(), " at entry ", i);
  }
  dim = normalize_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> us;
  us.reserve(xs.size());
  for (const Tensor& t : xs) us.push_back(unsqueeze(t, dim));
  return cat(us, dim);
}

void check_index_range(const Tensor& index, int64_t lo, int64_t hi, const RangeMessage& message) {
  if (index.numel() == 0) return;
  const Tensor minmax = contiguous(stack({cast(min(index), kInt64), cast(max(index), kInt64)}, 0));
  backend_for(index.device()).check_range(minmax, lo, hi, message);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_defined("index_select", x, "x");
  detail::check_defined("index_select", index, "index");
  detail::check_same_device("index_select", x, index);
  EMBER_CHECK_DTYPE(index.dtype() == kInt64 || index.dtype() == kInt32,
                    "index_select: index must be int64 or int32, got ", describe(index));
  EMBER_CHECK_SHAPE(index.dim() <= 1, "index_select: index must be 0-D or 1-D, got ", index.shape());
  Tensor idx = contiguous(cast(reshape(index, {-1}), kInt64));
  const int64_t d = normalize_dim(dim, x.dim(), "index_select");
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  // On a GPU without the host waiting (Backend::check_range); the kernel skips a bad index meanwhile.
  check_index_range(idx, 0, n, [d, n, input = describe(x)](int64_t lo, int64_t hi) {
    return detail::str("index_select: index ", lo < 0 ? lo : hi, " is out of bounds for dim ", d, " with size ", n,
                       " (input ", input, ")");
  });
  // A 0-dim input has one element to pick: more indices cannot be laid out along a dim it lacks.
  EMBER_CHECK_INDEX(x.dim() > 0 || idx.numel() == 1, "index_select: a 0-dim input takes exactly 1 index, got ",
                    idx.numel(), " (input ", describe(x), ")");
  if (x.dim() == 0) return clone(x);
  Shape os = x.shape();
  os[static_cast<size_t>(d)] = idx.numel();
  Tensor out = detail::new_tensor(os, x.dtype(), x.device());
  if (out.numel()) backend_for(x.device()).index_select(out, x, d, idx);
  return out;
}

Tensor index_add_zeros(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_same_device("index_add", src, index);
  Tensor out = zeros(shape, {.dtype = src.dtype(), .device = src.device()});
  if (shape.empty()) return binary(BinaryOp::Add, out, sum(src));  // a 0-dim input: every index read it
  const int64_t d = normalize_dim(dim, static_cast<int64_t>(shape.size()), "index_add");
  Tensor idx = contiguous(cast(reshape(index, {-1}), kInt64));
  Shape expect = shape;
  expect[static_cast<size_t>(d)] = idx.numel();
  EMBER_CHECK_SHAPE(src.shape() == expect, "index_add: source ", src.shape(), " does not match ", expect);
  if (src.numel()) backend_for(src.device()).index_add(out, d, idx, src);
  return out;
}

Tensor& index_add_(Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_defined("index_add_", out, "out");
  detail::check_same_device("index_add_", out, src);
  detail::check_same_device("index_add_", out, index);
  EMBER_CHECK_DTYPE(src.dtype() == out.dtype() && (index.dtype() == kInt64 || index.dtype() == kInt32),
                    "index_add_: expected src of out's dtype and an int64 or int32 index, got out ", describe(out),
                    ", src ", describe(src), " and index ", describe(index));
  EMBER_CHECK_SHAPE(out.dim() > 0 && out.is_contiguous() && index.dim() <= 1,
                    "index_add_: expected a contiguous out of at least 1 dim and a 0-D or 1-D index, got out ",
                    describe(out), " and index ", describe(index));
  const int64_t d = normalize_dim(dim, out.dim(), "index_add_");
  Tensor idx = contiguous(cast(reshape(index, {-1}), kInt64));
  Shape expect = out.shape();
  expect[static_cast<size_t>(d)] = idx.numel();
  EMBER_CHECK_SHAPE(src.shape() == expect, "index_add_: source ", src.shape(), " does not match ", expect);
  const int64_t n = out.size(d);
  check_index_range(idx, 0, n, [d, n, target = describe(out)](int64_t lo, int64_t hi) {
    return detail::str("index_add_: index ", lo < 0 ? lo : hi, " is out of bounds for dim ", d, " with size ", n,
                       " (out ", target, ")");
  });
  if (src.numel()) backend_for(out.device()).index_add(out, d, idx, contiguous(src));
  return out;
}

}  // namespace ember::raw
