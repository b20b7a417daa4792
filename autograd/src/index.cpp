// defines: the public cat, stack, index_select, gather, scatter_add and masked_fill of ops.h, recording their
// backward when an input requires grad (gather, scatter_add and masked_fill are composites).
#include "ember/autograd/ops.h"
#include "grad_utils.h"

namespace ember {

// --- shape
Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  OpEntry op(opdef::cat);
  Tensor y = raw::cat(xs, dim);
  if (!op.needs_grad(xs)) return y;
  const int64_t d = normalize_dim(dim, xs[0].dim(), op.name());
  std::vector<InputInfo> infos;
  for (const Tensor& t : xs) infos.emplace_back(t);
  op.record(xs, {y}).backward([infos, d](const Grads& g) -> Grads {
    Grads out;
    int64_t at = 0;
    for (const InputInfo& in : infos) {
      const int64_t n = in.shape[static_cast<size_t>(d)];
      out.push_back(in.wants ? g[0].slice(d, at, at + n).to(in.dtype) : Tensor());  // differentiable again
      at += n;
    }
    return out;
  });
  return y;
}
Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  OpEntry op(opdef::stack);
  Tensor y = raw::stack(xs, dim);
  if (!op.needs_grad(xs)) return y;
  const int64_t d = normalize_dim(dim, xs[0].dim() + 1, op.name());
  std::vector<InputInfo> infos;
  for (const Tensor& t : xs) infos.emplace_back(t);
  op.record(xs, {y}).backward([infos, d](const Grads& g) -> Grads {
    Grads out;
    for (size_t i = 0; i < infos.size(); ++i)
      out.push_back(infos[i].wants ? g[0].select(d, static_cast<int64_t>(i)).to(infos[i].dtype) : Tensor());
    return out;
  });
  return y;
}

// --- indexing
namespace {
// A zero tensor of `shape` with src added at the positions index_select(dim, index) reads: the adjoint of
// index_select. Recorded, with index_select as its gradient, so that each one's backward is differentiable again.
Tensor index_add_zeros(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  OpEntry op(opdef::index_add);
  Tensor y = raw::index_add_zeros(shape, dim, index, src);
  if (!op.needs_grad({&src})) return y;
  op.record({src}, {y}).backward([dim, si = save(index)](const Grads& g) -> Grads {
    return {ember::index_select(g[0], dim, si.get())};
  });
  return y;
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  OpEntry op(opdef::index_select);
  Tensor y = raw::index_select(x, dim, index);
  if (!op.needs_grad({&x})) return y;
  InputInfo ix(x);
  op.record({x}, {y}).backward([ix, dim, si = save(index)](const Grads& g) -> Grads {
    return {index_add_zeros(ix.shape, dim, si.get(), g[0])};
  });
  return y;
}

namespace {
// The checks gather and scatter_add share: an int64 index of x's rank, no larger than x outside dim, with values in
// [0, x.size(dim)). Returns dim normalised.
int64_t check_index(const char* op, const Tensor& x, int64_t dim, const Tensor& index) {
  autograd::check_defined(op, x, "x");
  autograd::check_defined(op, index, "index");
  EMBER_CHECK_DTYPE(index.dtype() == kInt64, op, ": index must be int64, got ", index.dtype(), index.shape());
  EMBER_CHECK_DEVICE(index.device() == x.device(), op, ": expected all tensors on the same device, got ", x.device(),
                     " and ", index.device());
  const int64_t d = normalize_dim(dim, x.dim(), op);
  EMBER_CHECK_SHAPE(index.dim() == x.dim(), op, ": index ", index.shape(), " must have as many dims as the input ",
                    x.dtype(), x.shape());
  for (int64_t k = 0; k < x.dim(); ++k)
    EMBER_CHECK_SHAPE(k == d || index.size(k) <= x.size(k), op, ": index ", index.shape(), " is larger than the input ",
                      x.dtype(), x.shape(), " in dim ", k, " (only dim ", d, " may be)");
  // without the host waiting on a GPU (Backend::check_range)
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  raw::check_index_range(
      index, 0, n,
      [op, d, n, input = detail::str(x.dtype(), x.shape()), ishape = index.shape()](int64_t lo, int64_t hi) {
        return detail::str(op, ": index ", lo < 0 ? lo : hi, " is out of bounds for dim ", d, " with size ", n,
                           " (input ", input, ", index ", ishape, ")");
      });
  return d;
}

// The flat position, in a contiguous tensor of `shape`, that each element of index addresses: its value along dim
// (dim < 0: none, every coordinate its own), its own coordinate along the others. Integer arithmetic on index's
// device, broadcast to index's shape.
Tensor flat_positions(const Shape& shape, int64_t dim, const Tensor& index) {
  const Shape strides = contiguous_strides(shape);
  const TensorOptions i64{.dtype = kInt64, .device = index.device()};
  Tensor flat = dim >= 0 ? index * strides[static_cast<size_t>(dim)] : zeros(index.shape(), i64);
  for (int64_t k = 0; k < index.dim(); ++k) {
    if (k == dim || index.size(k) <= 1) continue;  // a dim of size 1 has coordinate 0 only
    Shape along(static_cast<size_t>(index.dim()), 1);
    along[static_cast<size_t>(k)] = index.size(k);
    flat = flat + arange(index.size(k), i64).reshape(along) * strides[static_cast<size_t>(k)];
  }
  return flat.reshape({-1});
}
}  // namespace

// Composites of index_select / index_add on flattened tensors: differentiable (twice) on every device.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  OpEntry op(opdef::gather);
  const int64_t d = check_index(op.name(), x, dim, index);
  const Tensor pos = x.dim() == 0 ? index.reshape({-1}) : flat_positions(x.shape(), d, index);
  return index_select(x.reshape({-1}), 0, pos).reshape(index.shape());
}

Tensor scatter_add(const Tensor& x_in, int64_t dim, const Tensor& index, const Tensor& src_in) {
  OpEntry op(opdef::scatter_add);
  // Autocast promotes x and src to the wider of their float dtypes (as PyTorch's autocast "promote" list).
  const std::vector<Tensor> xs = op.in({x_in, src_in});
  const Tensor &x = xs[0], &src = xs[1];
  const int64_t d = check_index(op.name(), x, dim, index);
  autograd::check_defined(op.name(), src, "src");
  EMBER_CHECK_DTYPE(src.dtype() == x.dtype(), op.name(), ": src must have the input's dtype, got ", src.dtype(),
                    src.shape(), " and ", x.dtype(), x.shape());
  EMBER_CHECK_DEVICE(src.device() == x.device(), op.name(), ": expected all tensors on the same device, got ",
                     x.device(), " and ", src.device());
  bool src_larger = false;
  EMBER_CHECK_SHAPE(src.dim() == index.dim(), op.name(), ": src ", src.shape(), " must have as many dims as index ",
                    index.shape());
  for (int64_t k = 0; k < src.dim(); ++k) {
    EMBER_CHECK_SHAPE(index.size(k) <= src.size(k), op.name(), ": index ", index.shape(), " is larger than src ",
                      src.shape(), " in dim ", k);
    src_larger = src_larger || src.size(k) > index.size(k);
  }
  // The part of src that index covers, in index's row-major order.
  const Tensor part =
      src_larger ? index_select(src.reshape({-1}), 0, flat_positions(src.shape(), -1, index)) : src.reshape({-1});
  const Tensor pos = x.dim() == 0 ? index.reshape({-1}) : flat_positions(x.shape(), d, index);
  return x + index_add_zeros({x.numel()}, 0, pos, part).reshape(x.shape());
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  OpEntry op(opdef::masked_fill);
  autograd::check_defined(op.name(), x, "x");
  autograd::check_defined(op.name(), mask, "mask");
  autograd::check_defined(op.name(), value, "value");
  EMBER_CHECK_DTYPE(mask.dtype() == kBool, op.name(), ": mask must be bool, got ", mask.dtype(), mask.shape());
  EMBER_CHECK_SHAPE(value.dim() == 0, op.name(), ": value must be a 0-dim tensor, got ", value.dtype(), value.shape());
  EMBER_CHECK_DEVICE(mask.device() == x.device(), op.name(), ": expected all tensors on the same device, got ",
                     x.device(), " and ", mask.device());
  (void)broadcast_shapes(x.shape(), mask.shape(), op.name());  // throws naming both shapes
  return where(mask, value.to(x.dtype()).to(x.device()), x);
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  OpEntry op(opdef::masked_fill);
  autograd::check_defined(op.name(), x, "x");
  return masked_fill(x, mask, full({}, value, {.dtype = x.dtype(), .device = x.device()}));
}

}  // namespace ember
