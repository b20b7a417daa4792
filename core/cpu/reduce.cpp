// defines: the CPU reductions (sum, prod, max, min, argmax, argmin over any set of dims), cumsum and softmax /
// log-softmax. Floating sums accumulate in double. Full reductions split the input into fixed-size blocks
// and add the block results in order, so the answer does not depend on the number of threads.
#include <cmath>
#include <limits>

#include "cpu_backend.h"
#include "ember/internal/dim_walk.h"
#include "parallel.h"
#include "vec_math.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {
namespace {

// A walk over the kept or the reduced dims of x (ember/internal/dim_walk.h, shared with the CUDA reductions).
using Walk = DimWalk<64>;

// The accumulator math (scalar_math.h): double for floating sums and products, uint64 for integer ones (the
// result converts back to int64 modulo 2^64, as PyTorch's sum wraps), T for max and min, NaN propagating.
template <class T, ReduceOp Op>
using Reducer = scalar::ReduceMath<Op, T>;

// acc combined with p[0], p[stride], ..., p[(n - 1) * stride]. A contiguous floating sum keeps four partial
// sums (so the adds do not form one dependent chain, and vectorise), combined in a fixed order: the result
// depends on the data and the run's length only.
template <class T, ReduceOp Op>
typename Reducer<T, Op>::Acc reduce_run(typename Reducer<T, Op>::Acc acc, const T* p, int64_t n, int64_t stride) {
  using Red = Reducer<T, Op>;
  using A = typename Red::Acc;
  if constexpr (Op == ReduceOp::Sum && std::is_floating_point_v<T>) {
    if (stride == 1) {
      A s[4] = {0, 0, 0, 0};
      int64_t i = 0;
      for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; ++k) s[k] += static_cast<A>(p[i + k]);
      for (; i < n; ++i) s[0] += static_cast<A>(p[i]);
      return acc + ((s[0] + s[1]) + (s[2] + s[3]));
    }
  }
  for (int64_t i = 0; i < n; ++i) acc = Red::step(acc, p[i * stride]);
  return acc;
}

// The walk `w` without its innermost dim: the starts of its runs.
Walk runs_of(const Walk& w) {
  Walk outer;
  for (int d = 0; d + 1 < w.ndim; ++d) outer.add(w.sizes[d], w.strides[d]);
  return outer;
}

// acc combined with every element of `w` from base, in walk order, a run of the innermost dim at a time (one
// offset computation per run, not per element).
template <class T, ReduceOp Op>
typename Reducer<T, Op>::Acc reduce_walk(typename Reducer<T, Op>::Acc acc, const T* base, const Walk& w,
                                         const Walk& outer) {
  if (w.ndim == 0) return Reducer<T, Op>::step(acc, *base);  // one element
  const int64_t inner = w.sizes[w.ndim - 1], stride = w.strides[w.ndim - 1];
  for (int64_t r = 0; r < outer.numel; ++r) acc = reduce_run<T, Op>(acc, base + outer.offset(r), inner, stride);
  return acc;
}

// Reduces along `red` for each output element in `kept` order. R is the output element type.
template <class T, class R, ReduceOp Op>
void reduce_values(const Tensor& out, const Tensor& x, const Walk& kept, const Walk& red) {
  using Red = Reducer<T, Op>;
  using A = typename Red::Acc;
  const T* in = static_cast<const T*>(x.data_ptr());
  R* o = static_cast<R*>(out.data_ptr());
  const int64_t nout = kept.numel, nred = red.numel;
  const bool inner_contig = red.contiguous();
  const Walk outer = runs_of(red);

  if (nout == 1) {
    // Full reduction: fixed blocks of whole runs (~16384 elements), then blocks combined in order (deterministic
    // whatever the threads).
    const int64_t run = red.ndim ? red.sizes[red.ndim - 1] : 1, stride = red.ndim ? red.strides[red.ndim - 1] : 1;
    const int64_t per = inner_contig ? 16384 : std::max<int64_t>(1, 16384 / run);  // elements, or runs
    const int64_t units = inner_contig ? nred : outer.numel;
    const int64_t nblocks = (units + per - 1) / per;
    std::vector<A> partial(static_cast<size_t>(std::max<int64_t>(nblocks, 1)), Red::init());
    parallel_for(0, nblocks, 4, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t s = blk * per, e = std::min(units, s + per);
        A acc = Red::init();
        if (inner_contig) {
          acc = reduce_run<T, Op>(acc, in + s, e - s, 1);
        } else {
          for (int64_t r = s; r < e; ++r) acc = reduce_run<T, Op>(acc, in + outer.offset(r), run, stride);
        }
        partial[static_cast<size_t>(blk)] = acc;
      }
    });
    A acc = Red::init();
    for (A p : partial) acc = Red::combine(acc, p);
    o[0] = static_cast<R>(acc);
    return;
  }

  // Column reduction (e.g. a bias gradient: sum over the batch of [N, C]): the kept dims form one contiguous
  // run, so accumulate whole rows at a time instead of walking each column with a large stride. Threads take
  // ranges of columns (at least a cache line of each row) sized by the elements they read: a linear layer's bias
  // gradient, [4096, 512] in the charlm's MLP or [256, 1024] in mlp-big, is one pass over a few MB of dy. Each
  // column still adds its rows in order, whatever the thread count.
  if (kept.contiguous() && !inner_contig) {
    constexpr int64_t kLine = 64 / sizeof(T);
    const int64_t cols = (kElementwiseGrain / std::max<int64_t>(nred, 1) + kLine - 1) / kLine * kLine;
    parallel_for(0, nout, std::max(kLine, cols), [&](int64_t j0, int64_t j1) {
      std::vector<A> acc(static_cast<size_t>(j1 - j0), Red::init());
      for (int64_t r = 0; r < nred; ++r) {
        const T* row = in + red.offset(r);
        for (int64_t j = j0; j < j1; ++j)
          acc[static_cast<size_t>(j - j0)] = Red::step(acc[static_cast<size_t>(j - j0)], row[j]);
      }
      for (int64_t j = j0; j < j1; ++j) o[j] = static_cast<R>(acc[static_cast<size_t>(j - j0)]);
    });
    return;
  }

  // One output at a time, its reduced elements a run of the innermost reduced dim at a time (mean over {0, 2, 3}
  // of [N, C, H, W]: N runs of H*W per channel).
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(nred, 1));
  parallel_for(0, nout, grain, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j)
      o[j] = static_cast<R>(reduce_walk<T, Op>(Red::init(), in + kept.offset(j), red, outer));
  });
}

// Index of the first max (min) along one dim; NaN counts as the maximum (and minimum), as in PyTorch.
template <class T, bool IsMax>
void reduce_arg(const Tensor& out, const Tensor& x, const Walk& kept, const Walk& red) {
  const T* in = static_cast<const T*>(x.data_ptr());
  int64_t* o = static_cast<int64_t*>(out.data_ptr());
  const int64_t nred = red.numel;
  parallel_for(0, kept.numel, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(nred, 1)),
               [&](int64_t j0, int64_t j1) {
                 for (int64_t j = j0; j < j1; ++j) {
                   const T* base = in + kept.offset(j);
                   int64_t best = 0;
                   T bv = base[red.offset(0)];
                   for (int64_t i = 1; i < nred && !scalar::is_nan(bv); ++i) {
                     const T v = base[red.offset(i)];
                     if (scalar::arg_better<IsMax>(v, bv)) {
                       best = i;
                       bv = v;
                     }
                   }
                   o[j] = best;
                 }
               });
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims) {
  if (is_reduced_float(x.dtype())) {
    Tensor xf = upcast(x);
    if (op == ReduceOp::ArgMax || op == ReduceOp::ArgMin) return reduce(op, out, xf, dims);
    Tensor tmp = float_buffer_like(out);
    reduce(op, tmp, xf, dims);
    copy(out, tmp);
    return;
  }
  std::vector<bool> is_red(static_cast<size_t>(x.dim()), false);
  for (int64_t d : dims) is_red[static_cast<size_t>(d)] = true;
  Walk kept, red;
  for (int64_t d = 0; d < x.dim(); ++d) (void)(is_red[static_cast<size_t>(d)] ? red : kept).add(x.size(d), x.stride(d));
  if (out.numel() == 0) return;
  if (red.numel == 0) {  // reducing an empty dim: sum 0, prod 1 (max/min/arg are rejected by raw::reduce)
    fill(out, op == ReduceOp::Prod ? 1.0 : 0.0);
    return;
  }
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (is_reduced_v<T>) {
      throw InternalError("unreachable");
    } else {
      switch (op) {
#define EMBER_X(Name, str, kind) \
  case ReduceOp::Name: \
    if constexpr (is_index_reduction(ReduceOp::Name)) { \
      return reduce_arg<T, ReduceOp::Name == ReduceOp::ArgMax>(out, x, kept, red); \
    } else { \
      /* sums and products of integers give int64 */ \
      using R = std::conditional_t<Reducer<T, ReduceOp::Name>::kSumLike && !std::is_floating_point_v<T>, int64_t, T>; \
      return reduce_values<T, R, ReduceOp::Name>(out, x, kept, red); \
    }
        EMBER_REDUCE_OPS(EMBER_X)
#undef EMBER_X
      }
    }
  });
}

void CpuBackend::cumsum(const Tensor& out, const Tensor& x, int64_t dim, bool reverse) {
  // (the sums themselves are in double)
  if (through_float32(out, [&](const Tensor& tmp) { cumsum(tmp, upcast(x), dim, reverse); })) return;
  // x and out are contiguous [outer, n, inner]: each row of n elements has stride `inner`
  const int64_t n = x.size(dim);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (!std::is_floating_point_v<T> && !std::is_same_v<T, int64_t>) {
      throw InternalError(detail::str("cpu cumsum: takes a floating dtype or int64, got ", out.dtype()));
    } else {
      // floating sums accumulate in double, int64 ones wrap (scalar::wrap_add), as sum's do
      using A = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
      const T* in = static_cast<const T*>(x.data_ptr());
      T* o = static_cast<T*>(out.data_ptr());
      // One work item = one outer index and a block of up to kCols neighbouring rows (adjacent in memory when
      // inner > 1), walked together along n with one accumulator each: every load and store is contiguous.
      constexpr int64_t kCols = 64;
      const int64_t blocks = (inner + kCols - 1) / kCols;
      const int64_t per_item = n * std::min(inner, kCols);
      parallel_for(0, outer * blocks, std::max<int64_t>(1, kElementwiseGrain / per_item), [&](int64_t w0, int64_t w1) {
        A acc[kCols];
        for (int64_t w = w0; w < w1; ++w) {
          const int64_t c0 = (w % blocks) * kCols, nc = std::min(kCols, inner - c0);
          const T* src = in + (w / blocks) * n * inner + c0;
          T* dst = o + (w / blocks) * n * inner + c0;
          for (int64_t c = 0; c < nc; ++c) acc[c] = A(0);
          for (int64_t s = 0; s < n; ++s) {
            const int64_t k = (reverse ? n - 1 - s : s) * inner;
            for (int64_t c = 0; c < nc; ++c) {
              acc[c] = scalar::wrap_add(acc[c], static_cast<A>(src[k + c]));
              dst[k + c] = static_cast<T>(acc[c]);
            }
          }
        }
      });
    }
  });
}

void CpuBackend::softmax(const Tensor& out, const Tensor& x_in, int64_t dim, bool log) {
  if (through_float32(out, [&](const Tensor& tmp) { softmax(tmp, upcast(x_in), dim, log); })) return;
  Tensor x = raw::contiguous(x_in);
  int64_t D = x.size(dim), inner = 1, outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  if (x.numel() == 0) return;
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (!std::is_floating_point_v<T>) {
      throw InternalError("cpu softmax: floating dtype expected");
    } else {
      const T* in = static_cast<const T*>(x.data_ptr());
      T* o = static_cast<T*>(out.data_ptr());
      // One row = D elements with stride `inner`. Subtracting the row max keeps exp() from overflowing.
      parallel_for(0, outer * inner, std::max<int64_t>(1, kElementwiseGrain / (4 * D)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t base = (r / inner) * D * inner + (r % inner);
          const T* xi = in + base;
          T* oi = o + base;
          // the row max (an all -inf row is shifted by 0: avoids (-inf) - (-inf)), as the CUDA kernels
          // (row_max keeps softmax_max_step's rule: NaN skipped here, it makes the row NaN through the sum)
          T m = scalar::softmax_max_start<T>();
          if (inner == 1) {
            m = row_max(xi, D, m);
          } else {
            for (int64_t k = 0; k < D; ++k) m = scalar::softmax_max_step(m, xi[k * inner]);
          }
          m = scalar::softmax_shift(m);
          double sum = 0;
          if (inner == 1) {
            // a contiguous row: the exps in one vectorised pass (written to the output, which log-softmax then
            // overwrites), summed in double afterwards in vector lanes
            exp_shifted(xi, m, oi, D);
            sum = row_sum_double(oi, D);
          } else {
            for (int64_t k = 0; k < D; ++k) {
              T e = exp_of(xi[k * inner] - m);
              sum += e;
              if (!log) oi[k * inner] = e;
            }
          }
          if (log) {
            // (x - m) - log(sum), not x - (m + log(sum)): rounding m + log(sum) to T would cost an ulp of |m|,
            // far more than the result's own precision when the logits are large
            const T ls = static_cast<T>(std::log(sum));
            for (int64_t k = 0; k < D; ++k) oi[k * inner] = (xi[k * inner] - m) - ls;
          } else {
            const T inv = static_cast<T>(1.0 / sum);
            for (int64_t k = 0; k < D; ++k) oi[k * inner] *= inv;
          }
        }
      });
    }
  });
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
