// defines: the CPU index_select, index_add and check_range.
#include <cstring>

#include "cpu_backend.h"
#include "parallel.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

void CpuBackend::index_add(const Tensor& out, int64_t dim, const Tensor& index_in, const Tensor& src_in) {
  if (is_reduced_float(out.dtype())) {
    Tensor tmp = raw::cast(out, kFloat32);
    index_add(tmp, dim, index_in, upcast(src_in));
    copy(out, tmp);
    return;
  }
  Tensor src = raw::contiguous(src_in), index = raw::contiguous(index_in);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.size(d);
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.size(d);
  const int64_t D = out.size(dim), n = index.numel();
  const int64_t* idx = static_cast<const int64_t*>(index.data_ptr());
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (is_reduced_v<T>) {
      throw InternalError("unreachable");
    } else {
      T* op = static_cast<T*>(out.data_ptr());
      const T* sp = static_cast<const T*>(src.data_ptr());
      // Parallel over the outer dims only: repeated indices within one outer slice add up in order.
      parallel_for(0, outer, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, n * inner)),
                   [&](int64_t o0, int64_t o1) {
                     for (int64_t o = o0; o < o1; ++o)
                       for (int64_t i = 0; i < n; ++i) {
                         T* dst = op + (o * D + idx[i]) * inner;
                         const T* s = sp + (o * n + i) * inner;
                         for (int64_t k = 0; k < inner; ++k) dst[k] = static_cast<T>(dst[k] + s[k]);
                       }
                   });
    }
  });
}

void CpuBackend::check_range(const Tensor& minmax, int64_t lo, int64_t hi, const RangeMessage& message) {
  const int64_t* v = static_cast<const int64_t*>(minmax.data_ptr());
  EMBER_CHECK_INDEX(v[0] >= lo && v[1] < hi, message(v[0], v[1]));
}

void CpuBackend::index_select(const Tensor& out, const Tensor& x_in, int64_t dim, const Tensor& index_in) {
  Tensor x = raw::contiguous(x_in), index = raw::contiguous(index_in);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t D = x.size(dim), n = index.numel();
  const size_t row = static_cast<size_t>(inner) * x.itemsize();
  const char* xp = static_cast<const char*>(x.data_ptr());
  char* op = static_cast<char*>(out.data_ptr());
  const int64_t* idx = static_cast<const int64_t*>(index.data_ptr());
  if (out.numel() == 0) return;
  parallel_for(0, outer * n, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const int64_t o = r / n, i = r % n;
                   std::memcpy(op + static_cast<size_t>(r) * row, xp + static_cast<size_t>(o * D + idx[i]) * row, row);
                 }
               });
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
