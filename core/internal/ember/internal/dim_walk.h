// defines: DimWalk, a strided walk over some dims of a tensor, and strided_offset, the address arithmetic
// behind it: the one dimension-merging walk that the CPU reductions (core/cpu/reduce.cpp) and the CUDA ones
// (cuda/src/reduce.cpp, cuda/src/kernels/reduce.cu) share. Plain C++17, host and device; private to core/
// and cuda/.
#pragma once
#include <cstdint>

#include "ember/internal/scalar_math.h"  // EMBER_HD

namespace ember {

// Offset (in elements) of the i-th element, in row-major order over `ndim` dims of `sizes`, of an operand with
// `strides`. Inner dims are peeled off with % and /; the outermost takes what is left, so a 1-D (e.g.
// contiguous) walk costs no division.
EMBER_HD int64_t strided_offset(int64_t i, int ndim, const int64_t* sizes, const int64_t* strides) {
  int64_t offset = 0;
  for (int d = ndim - 1; d > 0; --d) {
    offset += (i % sizes[d]) * strides[d];
    i /= sizes[d];
  }
  if (ndim > 0) offset += i * strides[0];
  return offset;
}

// Dims are added outermost first (strides in elements). Size-1 dims are dropped, and a dim that continues the
// previous one (stride[prev] == stride * size) merges into it, so a contiguous run of dims becomes one.
// Fixed capacity, so that a walk is passed to a CUDA kernel by value. 64 dims always suffice for a walk with
// at least one element: every kept dim has size >= 2.
template <int MaxDims>
struct DimWalk {
  int ndim = 0;
  int64_t numel = 1;
  int64_t sizes[MaxDims] = {};
  int64_t strides[MaxDims] = {};

  // Adds a dim inside the ones added so far; false (and nothing added) when it would need more than MaxDims.
  bool add(int64_t size, int64_t stride) {
    if (size == 1) return true;
    if (ndim > 0 && strides[ndim - 1] == stride * size) {
      numel *= size;
      sizes[ndim - 1] *= size;
      strides[ndim - 1] = stride;
      return true;
    }
    if (ndim == MaxDims) return false;
    numel *= size;
    sizes[ndim] = size;
    strides[ndim] = stride;
    ++ndim;
    return true;
  }
  // Element offset of the i-th element in walk order.
  EMBER_HD int64_t offset(int64_t i) const { return strided_offset(i, ndim, sizes, strides); }
  // True when the walk is one run of consecutive elements.
  bool contiguous() const { return ndim == 1 && strides[0] == 1; }
};

}  // namespace ember
