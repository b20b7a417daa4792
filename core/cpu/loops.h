// defines: the elementwise loop engine of the CPU backend. An ElementwisePlan<N> takes N tensors of one
// shape (operand 0 is the output; inputs may be broadcast with stride 0), drops size-1 dims and merges dims
// that are contiguous for every operand, then for_each() walks it in chunks across threads, calling
// inner(ptrs, byte_strides, n) on runs of the innermost dim — where kernels put their vectorisable loops.
#pragma once
#include <array>
#include <cstdint>
#include <vector>
#include "isa.h"

#include "ember/core/tensor.h"
#include "parallel.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

template <int N>
struct ElementwisePlan {
  Shape sizes;                   // innermost last (Shape: no heap use up to rank 6)
  std::array<Shape, N> strides;  // in bytes, per operand
  std::array<char*, N> base{};
  int64_t numel = 0;

  explicit ElementwisePlan(const std::array<const Tensor*, N>& ts) {
    const Shape& shape = ts[0]->shape();
    numel = shape.numel();
    for (int k = 0; k < N; ++k) base[k] = static_cast<char*>(ts[k]->data_ptr());
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      // merge into the previous (outer) kept dim when that is contiguous with this one for all operands
      bool merge = !sizes.empty();
      for (int k = 0; k < N && merge; ++k) {
        int64_t st = ts[k]->stride(static_cast<int64_t>(d)) * static_cast<int64_t>(ts[k]->itemsize());
        merge = strides[k][strides[k].size() - 1] == st * shape[d];
      }
      for (int k = 0; k < N; ++k) {
        int64_t st = ts[k]->stride(static_cast<int64_t>(d)) * static_cast<int64_t>(ts[k]->itemsize());
        if (merge) strides[k][strides[k].size() - 1] = st;
        else strides[k].push_back(st);
      }
      if (merge) sizes[sizes.size() - 1] *= shape[d];
      else sizes.push_back(shape[d]);
    }
    if (sizes.empty()) {  // a single element
      sizes.push_back(1);
      for (int k = 0; k < N; ++k) strides[k].push_back(0);
    }
  }

  // inner(std::array<char*, N>& ptrs, const std::array<int64_t, N>& byte_strides, int64_t n)
  template <class Inner>
  void for_each(int64_t grain, const Inner& inner) const {
    if (numel == 0) return;
    const int nd = static_cast<int>(sizes.size());
    std::array<int64_t, N> inner_strides;
    for (int k = 0; k < N; ++k) inner_strides[k] = strides[k][nd - 1];
    parallel_for(0, numel, grain, [&](int64_t begin, int64_t end) {
      Shape idx(static_cast<size_t>(nd), 0);
      int64_t rem = begin;
      for (int d = nd - 1; d >= 0; --d) {
        idx[d] = rem % sizes[d];
        rem /= sizes[d];
      }
      std::array<char*, N> ptrs;
      int64_t pos = begin;
      while (pos < end) {
        for (int k = 0; k < N; ++k) {
          char* p = base[k];
          for (int d = 0; d < nd; ++d) p += idx[d] * strides[k][d];
          ptrs[k] = p;
        }
        int64_t n = std::min(sizes[nd - 1] - idx[nd - 1], end - pos);
        inner(ptrs, inner_strides, n);
        pos += n;
        idx[nd - 1] += n;
        for (int d = nd - 1; d > 0 && idx[d] == sizes[d]; --d) {
          idx[d] = 0;
          ++idx[d - 1];
        }
      }
    });
  }
};

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
