// defines: DType names and promotion, Device printing, Shape helpers, Storage and TensorImpl lifetimes.
#include <ostream>

#include "ember/core/allocator.h"
#include "ember/core/dtype.h"
#include "ember/core/error.h"
#include "ember/core/shape.h"
#include "ember/core/storage.h"
#include "ember/core/tensor_impl.h"

namespace ember {

// --- DType (names and sizes: op_list.h)
std::ostream& operator<<(std::ostream& os, DType d) { return os << name(d); }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // A rank for each dtype: bool < uint8 < int32 < int64 < float16/bfloat16 < float32 < float64.
  auto rank = [](DType d) {
    switch (d) {
      case kBool: return 0;
      case kUInt8: return 1;
      case kInt32: return 2;
      case kInt64: return 3;
      case kFloat16: case kBFloat16: return 4;
      case kFloat32: return 5;
      case kFloat64: return 6;
    }
    return 0;
  };
  if (rank(a) == 4 && rank(b) == 4) return kFloat32;  // float16 with bfloat16
  return rank(a) >= rank(b) ? a : b;
}

// --- Device
std::string Device::to_string() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index_);
}
std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.to_string(); }

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
void Shape::push_back(int64_t v) {
  resize(n_ + 1, v);
}
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
  return out;
}
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;  // a scalar accepts dim 0 / -1
  EMBER_CHECK_INDEX(dim >= lo && dim <= hi, op, ": dim ", dim, " is out of range for a tensor of rank ", ndim,
                    " (expected a dim in [", lo, ", ", hi, "])");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

// --- Storage
StorageImpl::StorageImpl(size_t n, Allocator& alloc)
    : data(alloc.allocate(n)), nbytes(n), device(alloc.device()), allocator(&alloc) {}
StorageImpl::StorageImpl(void* d, size_t n, Device dev, std::function<void(void*)> del)
    : data(d), nbytes(n), device(dev), deleter(std::move(del)) {}
StorageImpl::~StorageImpl() {
  if (allocator) allocator->deallocate(data, nbytes);
  else if (deleter) deleter(data);
}

// --- TensorImpl
TensorImpl::TensorImpl(Storage s, int64_t off, Shape sz, Shape st, DType dt)
    : storage(std::move(s)), offset(off), sizes(std::move(sz)), strides(std::move(st)), dtype(dt) {
  refresh();
}
void TensorImpl::refresh() {
  numel = sizes.numel();
  contiguous = true;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) { contiguous = numel == 0; break; }
    expected *= sizes[i];
  }
}

}  // namespace ember
