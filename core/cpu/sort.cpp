// defines: the CPU argsort: each row sorted on its own (rows in parallel) by a stable sort of its indices, so that
// equal elements keep their order and the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "cpu_backend.h"
#include "parallel.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

namespace {
// a comes before b in ascending order: NaN after every number, as PyTorch's sort (NaNs tie with each other).
template <class T>
bool before(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(b) ? !std::isnan(a) : a < b;
  } else {
    return a < b;
  }
}
}  // namespace

void CpuBackend::argsort(const Tensor& out, const Tensor& x_in, bool descending) {
  const Tensor x = upcast(x_in);  // float16 / bfloat16 compare as float32, which holds each of their values exactly
  const int64_t n = x.size(x.dim() - 1), rows = x.numel() / n;
  int64_t* o = static_cast<int64_t*>(out.data_ptr());
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (is_reduced_v<T>) {
      throw InternalError("cpu argsort: reduced floats are upcast first");
    } else {
      const T* xp = static_cast<const T*>(x.data_ptr());
      // about n log2(n) comparisons per row; rows are independent
      const int64_t cost = n * std::max<int64_t>(1, static_cast<int64_t>(std::log2(static_cast<double>(n))));
      parallel_for(0, rows, std::max<int64_t>(1, kElementwiseGrain / cost), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const T* v = xp + r * n;
          int64_t* idx = o + r * n;
          std::iota(idx, idx + n, int64_t{0});
          // Descending swaps the operands of the comparison, not the result: ties still keep their order.
          if (descending) {
            std::stable_sort(idx, idx + n, [v](int64_t a, int64_t b) { return before(v[b], v[a]); });
          } else {
            std::stable_sort(idx, idx + n, [v](int64_t a, int64_t b) { return before(v[a], v[b]); });
          }
        }
      });
    }
  });
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
