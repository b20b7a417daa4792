// defines: Shape, a list of int64_t sizes (also used for strides) with a few inline slots so that
// everyday tensors (rank <= 6) never touch the heap for their metadata; helpers for numel, contiguous
// strides, NumPy broadcasting and dim normalisation.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <iterator>
#include <vector>

namespace ember {

class Shape {
 public:
  static constexpr size_t kInline = 6;
  Shape() = default;
  Shape(std::initializer_list<int64_t> il) { assign(il.begin(), il.end()); }
  Shape(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit on purpose
  Shape(size_t n, int64_t value) { resize(n, value); }
  template <std::input_iterator It>  // constrained: Shape{a, b} of two tensors is no shape
  Shape(It first, It last) {
    assign(first, last);
  }

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t* data() { return n_ <= kInline ? inline_ : heap_.data(); }
  const int64_t* data() const { return n_ <= kInline ? inline_ : heap_.data(); }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + n_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + n_; }
  int64_t back() const { return data()[n_ - 1]; }

  void resize(size_t n, int64_t value = 0);
  void push_back(int64_t v);
  void insert(size_t pos, int64_t v);
  void erase(size_t pos);
  template <class It>
  void assign(It first, It last) {
    resize(static_cast<size_t>(std::distance(first, last)));
    std::copy(first, last, data());
  }

  int64_t numel() const;  // product of the sizes (1 for rank 0)
  // The product of the sizes, or -1 when it does not fit in int64 (or a size is negative): a shape whose element
  // count overflows is refused wherever one is formed (views, expand, broadcasting), not only when allocated.
  int64_t checked_numel() const;
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }
  bool operator==(const Shape& o) const { return n_ == o.n_ && std::equal(begin(), end(), o.begin()); }
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  int64_t inline_[kInline] = {};
  std::vector<int64_t> heap_;  // used only when n_ > kInline
  size_t n_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Shape& s);  // "[64, 784]"

Shape contiguous_strides(const Shape& sizes);
// NumPy broadcasting of two shapes; throws ShapeError naming `op` and both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Maps a possibly negative dim into [0, ndim); throws IndexError naming `op` when out of range.
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op);

}  // namespace ember
