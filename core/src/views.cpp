// defines: the view ops of ember::raw (metadata only; every view shares its base's storage) and the
// bounds check that keeps any view inside its storage.
#include <algorithm>
#include <numeric>
#include <optional>

#include "op_utils.h"

namespace ember::raw {
using detail::describe;

Tensor as_strided(const Tensor& x, const Shape& sizes, const Shape& strides, int64_t offset) {
  detail::check_defined("as_strided", x, "x");
  EMBER_CHECK_SHAPE(sizes.size() == strides.size(), "as_strided: ", sizes.size(), " sizes but ", strides.size(),
                    " strides");
  int64_t lo = offset, hi = offset;  // the lowest and highest element reached
  bool empty = false, overflow = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EMBER_CHECK_SHAPE(sizes[i] >= 0, "as_strided: negative size in ", sizes);
    if (sizes[i] == 0) empty = true;
    int64_t reach = 0;
    overflow |= __builtin_mul_overflow(std::max<int64_t>(sizes[i] - 1, 0), strides[i], &reach);
    overflow |= __builtin_add_overflow(strides[i] < 0 ? lo : hi, reach, strides[i] < 0 ? &lo : &hi);
  }
  EMBER_CHECK_SHAPE(sizes.checked_numel() >= 0, "as_strided: view ", sizes, " has more elements than int64 can count");
  EMBER_CHECK_INDEX(empty || !overflow, "as_strided: view ", sizes, " with strides ", strides, " at offset ", offset,
                    " reaches past the int64 range");
  const int64_t cap = static_cast<int64_t>(x.impl()->storage->nbytes / x.itemsize());
  EMBER_CHECK_INDEX(empty || (lo >= 0 && hi < cap), "as_strided: view ", sizes, " with strides ", strides,
                    " at offset ", offset, " reaches outside its storage of ", cap, " elements");
  return Tensor(std::make_shared<TensorImpl>(x.impl()->storage, offset, sizes, strides, x.dtype()));
}

Tensor alias(const Tensor& x) { return as_strided(x, x.shape(), x.strides(), x.storage_offset()); }

namespace {
// Resolves one -1 in `shape` against numel, checking the product.
Shape infer_shape(const char* op, const Tensor& x, Shape shape) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      EMBER_CHECK_SHAPE(infer < 0, op, ": only one dimension can be -1, got ", shape);
      infer = static_cast<int64_t>(i);
    } else {
      EMBER_CHECK_SHAPE(shape[i] >= 0, op, ": invalid size ", shape[i], " in shape ", shape);
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    EMBER_CHECK_SHAPE(known != 0 && x.numel() % known == 0, op, ": shape ", shape, " is invalid for input of size ",
                      x.numel());
    shape[static_cast<size_t>(infer)] = x.numel() / known;
  }
  EMBER_CHECK_SHAPE(shape.numel() == x.numel(), op, ": shape ", shape, " is invalid for input of size ", x.numel(),
                    " (input shape ", x.shape(), ")");
  return shape;
}

// Strides that let `x` be seen as `shape` without a copy, if any (splitting and merging only dims that are
// contiguous with each other).
std::optional<Shape> view_strides(const Tensor& x, const Shape& shape) {
  if (x.is_contiguous() || x.numel() == 0) return contiguous_strides(shape);
  const Shape& os = x.shape();
  const Shape& ost = x.strides();
  Shape ns(shape.size(), 0);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_stride = ost.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(os.size()) - 1; d >= 0; --d) {
    tensor_numel *= os[static_cast<size_t>(d)];
    // a chunk of dims ends where the next-outer dim is not contiguous with it
    if (d == 0 ||
        (os[static_cast<size_t>(d - 1)] != 1 && ost[static_cast<size_t>(d - 1)] != tensor_numel * chunk_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[static_cast<size_t>(view_d)] == 1)) {
        ns[static_cast<size_t>(view_d)] = view_numel * chunk_stride;
        view_numel *= shape[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_stride = ost[static_cast<size_t>(d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return ns;
}
}  // namespace

Tensor view(const Tensor& x, const Shape& shape_in) {
  detail::check_defined("view", x, "x");
  Shape shape = infer_shape("view", x, shape_in);
  auto st = view_strides(x, shape);
  EMBER_CHECK_SHAPE(st.has_value(), "view: shape ", shape, " is not compatible with the strides ", x.strides(),
                    " of input ", describe(x), " (it spans non-contiguous memory); use reshape(), which copies");
  return as_strided(x, shape, *st, x.storage_offset());
}

Tensor reshape(const Tensor& x, const Shape& shape_in) {
  detail::check_defined("reshape", x, "x");
  Shape shape = infer_shape("reshape", x, shape_in);
  if (auto st = view_strides(x, shape)) return as_strided(x, shape, *st, x.storage_offset());
  return view(clone(x), shape);
}

Tensor transpose(const Tensor& x, int64_t a, int64_t b) {
  detail::check_defined("transpose", x, "x");
  if (x.dim() == 0) return alias(x);
  a = normalize_dim(a, x.dim(), "transpose");
  b = normalize_dim(b, x.dim(), "transpose");
  Shape sz = x.shape(), st = x.strides();
  std::swap(sz[static_cast<size_t>(a)], sz[static_cast<size_t>(b)]);
  std::swap(st[static_cast<size_t>(a)], st[static_cast<size_t>(b)]);
  return as_strided(x, sz, st, x.storage_offset());
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  detail::check_defined("permute", x, "x");
  const int64_t n = x.dim();
  EMBER_CHECK_SHAPE(static_cast<int64_t>(dims.size()) == n, "permute: got ", dims.size(), " dims for a tensor of rank ",
                    n, " (shape ", x.shape(), ")");
  std::vector<bool> seen(static_cast<size_t>(n), false);
  Shape sz(static_cast<size_t>(n), 0), st(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = normalize_dim(dims[static_cast<size_t>(i)], n, "permute");
    EMBER_CHECK_SHAPE(!seen[static_cast<size_t>(d)], "permute: dim ", d, " repeated in ", Shape(dims));
    seen[static_cast<size_t>(d)] = true;
    sz[static_cast<size_t>(i)] = x.size(d);
    st[static_cast<size_t>(i)] = x.stride(d);
  }
  return as_strided(x, sz, st, x.storage_offset());
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  detail::check_defined("slice", x, "x");
  EMBER_CHECK_SHAPE(x.dim() > 0, "slice: cannot slice a 0-dim tensor");
  dim = normalize_dim(dim, x.dim(), "slice");
  EMBER_CHECK_VALUE(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = x.size(dim);
  // Python slicing: negative indices count from the end; out-of-range bounds clamp.
  auto clampi = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = clampi(start);
  end = std::max(clampi(end), start);
  Shape sz = x.shape(), st = x.strides();
  sz[static_cast<size_t>(dim)] = (end - start + step - 1) / step;
  st[static_cast<size_t>(dim)] *= step;
  return as_strided(x, sz, st, x.storage_offset() + (sz[static_cast<size_t>(dim)] ? start * x.stride(dim) : 0));
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  detail::check_defined("select", x, "x");
  EMBER_CHECK_SHAPE(x.dim() > 0, "select: cannot select from a 0-dim tensor");
  dim = normalize_dim(dim, x.dim(), "select");
  const int64_t n = x.size(dim);
  EMBER_CHECK_INDEX(index >= -n && index < n, "select: index ", index, " is out of bounds for dim ", dim, " with size ",
                    n);
  if (index < 0) index += n;
  Shape sz = x.shape(), st = x.strides();
  sz.erase(static_cast<size_t>(dim));
  st.erase(static_cast<size_t>(dim));
  return as_strided(x, sz, st, x.storage_offset() + index * x.stride(dim));
}

Tensor squeeze(const Tensor& x) {
  detail::check_defined("squeeze", x, "x");
  Shape sz, st;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.size(d) != 1) {
      sz.push_back(x.size(d));
      st.push_back(x.stride(d));
    }
  return as_strided(x, sz, st, x.storage_offset());
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  detail::check_defined("squeeze", x, "x");
  if (x.dim() == 0) return alias(x);
  dim = normalize_dim(dim, x.dim(), "squeeze");
  if (x.size(dim) != 1) return alias(x);  // as PyTorch: squeezing a dim that is not 1 leaves it
  Shape sz = x.shape(), st = x.strides();
  sz.erase(static_cast<size_t>(dim));
  st.erase(static_cast<size_t>(dim));
  return as_strided(x, sz, st, x.storage_offset());
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  detail::check_defined("unsqueeze", x, "x");
  dim = normalize_dim(dim, x.dim() + 1, "unsqueeze");
  Shape sz = x.shape(), st = x.strides();
  int64_t s = dim < x.dim() ? x.stride(dim) * x.size(dim) : 1;
  sz.insert(static_cast<size_t>(dim), 1);
  st.insert(static_cast<size_t>(dim), s);
  return as_strided(x, sz, st, x.storage_offset());
}

Tensor flatten(const Tensor& x, int64_t start, int64_t end) {
  detail::check_defined("flatten", x, "x");
  if (x.dim() == 0) return reshape(x, {1});
  start = normalize_dim(start, x.dim(), "flatten");
  end = normalize_dim(end, x.dim(), "flatten");
  EMBER_CHECK_INDEX(start <= end, "flatten: start dim ", start, " must not come after end dim ", end);
  Shape sz;
  for (int64_t d = 0; d < start; ++d) sz.push_back(x.size(d));
  int64_t m = 1;
  for (int64_t d = start; d <= end; ++d) m *= x.size(d);
  sz.push_back(m);
  for (int64_t d = end + 1; d < x.dim(); ++d) sz.push_back(x.size(d));
  return reshape(x, sz);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  detail::check_defined("expand", x, "x");
  const int64_t n = static_cast<int64_t>(shape.size()), k = x.dim();
  EMBER_CHECK_SHAPE(n >= k, "expand: cannot expand ", x.shape(), " to fewer dims ", shape);
  Shape sz(static_cast<size_t>(n), 0), st(static_cast<size_t>(n), 0);
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t j = i - (n - k);  // matching dim of x, if any
    int64_t want = shape[static_cast<size_t>(i)];
    if (j < 0) {
      EMBER_CHECK_SHAPE(want >= 0, "expand: size -1 is not allowed for the new leading dim ", i, " in ", shape);
      sz[static_cast<size_t>(i)] = want;
      st[static_cast<size_t>(i)] = 0;
      continue;
    }
    const int64_t have = x.size(j);
    if (want == -1) want = have;
    EMBER_CHECK_SHAPE(have == want || have == 1, "expand: the size of ", x.shape(), " at dim ", j, " (", have,
                      ") must match ", shape, " at dim ", i, " (", want, ") or be 1");
    sz[static_cast<size_t>(i)] = want;
    st[static_cast<size_t>(i)] = (have == want) ? x.stride(j) : 0;
  }
  EMBER_CHECK_SHAPE(sz.checked_numel() >= 0, "expand: expanding ", x.shape(), " to ", shape,
                    " gives more elements than int64 can count");
  return as_strided(x, sz, st, x.storage_offset());
}

}  // namespace ember::raw
