// defines: Shape's members and printing, and the shape helpers: contiguous strides, broadcasting, dim checks.
#include <algorithm>
#include <ostream>

#include "ember/core/error.h"
#include "ember/core/shape.h"

namespace ember {

// --- Shape
void Shape::resize(size_t n, int64_t value) {
  if (n <= kInline) {
    if (n_ > kInline) std::copy(heap_.begin(), heap_.begin() + n, inline_);  // shrink back inline
    for (size_t i = std::min(n_, n); i < n; ++i) inline_[i] = value;
    heap_.clear();
  } else {
    if (n_ <= kInline) heap_.assign(inline_, inline_ + n_);
    heap_.resize(n, value);
  }
  n_ = n;
}
void Shape::push_back(int64_t v) { resize(n_ + 1, v); }
void Shape::insert(size_t pos, int64_t v) {
  resize(n_ + 1);
  int64_t* d = data();
  for (size_t i = n_ - 1; i > pos; --i) d[i] = d[i - 1];
  d[pos] = v;
}
void Shape::erase(size_t pos) {
  int64_t* d = data();
  for (size_t i = pos; i + 1 < n_; ++i) d[i] = d[i + 1];
  resize(n_ - 1);
}
int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t s : *this) n *= s;
  return n;
}
int64_t Shape::checked_numel() const {
  // Zeros count as one for the overflow check (as for the strides, which must fit whatever the zeros), so the
  // answer does not depend on where a zero stands.
  int64_t span = 1;
  bool zero = false;
  for (int64_t s : *this) {
    if (s < 0 || __builtin_mul_overflow(span, std::max<int64_t>(s, 1), &span)) return -1;
    zero |= s == 0;
  }
  return zero ? 0 : span;
}
std::ostream& operator<<(std::ostream& os, const Shape& s) {
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  return os << ']';
}
Shape contiguous_strides(const Shape& sizes) {
  Shape st(sizes.size(), 1);
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(sizes[i], 1);
  }
  return st;
}
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    EMBER_CHECK_SHAPE(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b,
                      " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  EMBER_CHECK_SHAPE(out.checked_numel() >= 0, op, ": broadcasting ", a, " and ", b, " gives ", out,
                    ", more elements than int64 can count");
  return out;
}
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;  // a scalar accepts dim 0 / -1
  EMBER_CHECK_INDEX(dim >= lo && dim <= hi, op, ": dim ", dim, " is out of range for a tensor of rank ", ndim,
                    " (expected a dim in [", lo, ", ", hi, "])");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

}  // namespace ember
