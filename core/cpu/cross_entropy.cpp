// defines: the CPU's fused cross_entropy from class indices (backend.h: class_cross_entropy and its backward). A
// thread takes whole rows of the logits [N, C]; 16-bit rows are widened into a row buffer of float as they are read
// (no float32 copy of the whole tensor). Per row: the max (softmax's rule: an all -inf row is shifted by 0), the
// exps in one vectorised pass into the row buffer, their sum in double, and the statistics (max, log of the sum)
// the backward reads; the loss is log(sum) - (x[t] - max), the picked entry of log_softmax, negated. The backward
// writes (exp((x - max) - log(sum)) - [j == t]) * scale, row by row.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu_backend.h"
#include "parallel.h"
#include "vec_math.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {
namespace {

// T: the logits' element type; C: the compute type (double for double, else float).
template <class T>
using compute_of = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The row as C values: the row itself when T is C, else widened into buf.
template <class T, class C>
const C* row_as(const T* x, int64_t n, std::vector<C>& buf) {
  if constexpr (std::is_same_v<T, C>) {
    return x;
  } else {
    for (int64_t k = 0; k < n; ++k) buf[static_cast<size_t>(k)] = static_cast<C>(static_cast<float>(x[k]));
    return buf.data();
  }
}

// Rows per task: about kElementwiseGrain elements.
int64_t row_grain(int64_t cols) { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, cols)); }

template <class T>
void forward_rows(const Tensor& loss, const Tensor& stats, const Tensor& logits, const Tensor& targets) {
  using C = compute_of<T>;
  const int64_t N = logits.size(0), D = logits.size(1);
  const T* x = static_cast<const T*>(logits.data_ptr());
  const int64_t* t = static_cast<const int64_t*>(targets.data_ptr());
  C* l = static_cast<C*>(loss.data_ptr());
  C* s = static_cast<C*>(stats.data_ptr());
  parallel_for(0, N, row_grain(D), [&](int64_t r0, int64_t r1) {
    std::vector<C> wide(std::is_same_v<T, C> ? 0 : static_cast<size_t>(D)), e(static_cast<size_t>(D));
    for (int64_t r = r0; r < r1; ++r) {
      const C* row = row_as<T, C>(x + r * D, D, wide);
      const C m = scalar::softmax_shift(row_max(row, D, scalar::softmax_max_start<C>()));
      exp_shifted(row, m, e.data(), D);
      const C log_sum = static_cast<C>(std::log(row_sum_double(e.data(), D)));
      s[2 * r] = m;
      s[2 * r + 1] = log_sum;
      l[r] = log_sum - (row[t[r]] - m);  // targets were checked in range
    }
  });
}

template <class T>
void backward_rows(const Tensor& dlogits, const Tensor& logits, const Tensor& targets, const Tensor& stats,
                   const Tensor& scale) {
  using C = compute_of<T>;
  const int64_t N = logits.size(0), D = logits.size(1);
  const T* x = static_cast<const T*>(logits.data_ptr());
  const int64_t* t = static_cast<const int64_t*>(targets.data_ptr());
  const C* s = static_cast<const C*>(stats.data_ptr());
  const C* sc = static_cast<const C*>(scale.data_ptr());
  const int64_t scale_stride = scale.numel() == 1 ? 0 : 1;  // one scale, or one per row
  T* g = static_cast<T*>(dlogits.data_ptr());
  parallel_for(0, N, row_grain(D), [&](int64_t r0, int64_t r1) {
    std::vector<C> wide(std::is_same_v<T, C> ? 0 : static_cast<size_t>(D)), e(static_cast<size_t>(D));
    for (int64_t r = r0; r < r1; ++r) {
      const C* row = row_as<T, C>(x + r * D, D, wide);
      const C m = s[2 * r], log_sum = s[2 * r + 1], k = sc[r * scale_stride];
      for (int64_t j = 0; j < D; ++j) e[static_cast<size_t>(j)] = exp_of((row[j] - m) - log_sum);
      e[static_cast<size_t>(t[r])] -= C(1);
      T* gr = g + r * D;
      for (int64_t j = 0; j < D; ++j) gr[j] = static_cast<T>(e[static_cast<size_t>(j)] * k);
    }
  });
}

template <class F>
void by_logits_dtype(DType d, const char* what, F&& f) {
  switch (d) {
    case kFloat32: f.template operator()<float>(); break;
    case kFloat64: f.template operator()<double>(); break;
    case kBFloat16: f.template operator()<BFloat16>(); break;
    case kFloat16: f.template operator()<Half>(); break;
    default: throw InternalError(detail::str("cpu ", what, ": floating logits expected, got ", d));
  }
}

}  // namespace

void CpuBackend::class_cross_entropy(const Tensor& loss, const Tensor& stats, const Tensor& logits,
                                     const Tensor& targets) {
  if (logits.numel() == 0) return;
  by_logits_dtype(logits.dtype(), "class_cross_entropy",
                  [&]<class T>() { forward_rows<T>(loss, stats, logits, targets); });
}

void CpuBackend::class_cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                                              const Tensor& stats, const Tensor& scale) {
  if (logits.numel() == 0) return;
  by_logits_dtype(logits.dtype(), "class_cross_entropy_backward",
                  [&]<class T>() { backward_rows<T>(dlogits, logits, targets, stats, scale); });
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
