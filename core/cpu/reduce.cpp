// defines: the CPU reductions (sum, prod, max, min, argmax, argmin over any set of dims) and softmax /
// log-softmax. Floating sums accumulate in double. Full reductions split the input into fixed-size blocks
// and add the block results in order, so the answer does not depend on the number of threads.
#include <cmath>
#include <limits>

#include "cpu_backend.h"
#include "parallel.h"
#include "vec_math.h"

namespace ember::cpu {
namespace {

// Accumulators: double for floats; uint64 for integers, whose wrap-around on overflow is defined (the result
// converts back to int64 modulo 2^64, as PyTorch's sum wraps).
template <class T>
using acc_t = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

// A strided walk over a set of (size, stride) dims, innermost last, strides in elements.
struct Walk {
  Shape sizes, strides;
  int64_t numel = 1;
  void add(int64_t size, int64_t stride) {
    if (size == 1) return;
    numel *= size;
    size_t n = sizes.size();
    if (n && strides[n - 1] == stride * size) {  // contiguous with the previous (outer) dim: merge
      sizes[n - 1] *= size;
      strides[n - 1] = stride;
    } else {
      sizes.push_back(size);
      strides.push_back(stride);
    }
  }
  // Element offset of the i-th element in walk order.
  int64_t offset(int64_t i) const {
    int64_t off = 0;
    for (size_t d = sizes.size(); d-- > 0;) {
      off += (i % sizes[d]) * strides[d];
      i /= sizes[d];
    }
    return off;
  }
};

template <class T, ReduceOp Op>
struct Reducer {
  using A = std::conditional_t<Op == ReduceOp::Sum || Op == ReduceOp::Prod, acc_t<T>, T>;
  static A init() {
    if constexpr (Op == ReduceOp::Sum) return A(0);
    else if constexpr (Op == ReduceOp::Prod) return A(1);
    // floats start at -inf / +inf (not the lowest / largest finite value), so an all -inf max stays -inf
    else if constexpr (std::is_floating_point_v<T>)
      return Op == ReduceOp::Max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else if constexpr (Op == ReduceOp::Max) return std::numeric_limits<T>::lowest();
    else return std::numeric_limits<T>::max();
  }
  static A step(A acc, T v) {
    if constexpr (Op == ReduceOp::Sum) return acc + static_cast<A>(v);
    else if constexpr (Op == ReduceOp::Prod) return acc * static_cast<A>(v);
    else {
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(v) || std::isnan(acc)) return std::numeric_limits<T>::quiet_NaN();  // NaN propagates
      }
      if constexpr (Op == ReduceOp::Max) return v > acc ? v : acc;
      else return v < acc ? v : acc;
    }
  }
  static A combine(A a, A b) {
    if constexpr (Op == ReduceOp::Sum) return a + b;
    else if constexpr (Op == ReduceOp::Prod) return a * b;
    else return step(a, static_cast<T>(b));
  }
};

// Reduces along `red` for each output element in `kept` order. R is the output element type.
template <class T, class R, ReduceOp Op>
void reduce_values(const Tensor& out, const Tensor& x, const Walk& kept, const Walk& red) {
  using Red = Reducer<T, Op>;
  using A = typename Red::A;
  const T* in = static_cast<const T*>(x.data_ptr());
  R* o = static_cast<R*>(out.data_ptr());
  const int64_t nout = kept.numel, nred = red.numel;
  const bool inner_contig = red.sizes.size() == 1 && red.strides[0] == 1;

  if (nout == 1) {
    // Full reduction: fixed blocks, then blocks combined in order (deterministic whatever the threads).
    constexpr int64_t kBlock = 16384;
    const int64_t nblocks = (nred + kBlock - 1) / kBlock;
    std::vector<A> partial(static_cast<size_t>(std::max<int64_t>(nblocks, 1)), Red::init());
    parallel_for(0, nblocks, 4, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        int64_t s = blk * kBlock, e = std::min(nred, s + kBlock);
        A acc = Red::init();
        if (inner_contig) for (int64_t i = s; i < e; ++i) acc = Red::step(acc, in[i]);
        else for (int64_t i = s; i < e; ++i) acc = Red::step(acc, in[red.offset(i)]);
        partial[static_cast<size_t>(blk)] = acc;
      }
    });
    A acc = Red::init();
    for (A p : partial) acc = Red::combine(acc, p);
    o[0] = static_cast<R>(acc);
    return;
  }

  // Column reduction (e.g. a bias gradient: sum over the batch of [N, C]): the kept dims form one contiguous
  // run, so accumulate whole rows at a time instead of walking each column with a large stride.
  if (kept.sizes.size() == 1 && kept.strides[0] == 1 && !inner_contig) {
    parallel_for(0, nout, 1024, [&](int64_t j0, int64_t j1) {
      std::vector<A> acc(static_cast<size_t>(j1 - j0), Red::init());
      for (int64_t r = 0; r < nred; ++r) {
        const T* row = in + red.offset(r);
        for (int64_t j = j0; j < j1; ++j) acc[static_cast<size_t>(j - j0)] = Red::step(acc[static_cast<size_t>(j - j0)], row[j]);
      }
      for (int64_t j = j0; j < j1; ++j) o[j] = static_cast<R>(acc[static_cast<size_t>(j - j0)]);
    });
    return;
  }

  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(nred, 1));
  parallel_for(0, nout, grain, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      const T* base = in + kept.offset(j);
      A acc = Red::init();
      if (inner_contig) for (int64_t i = 0; i < nred; ++i) acc = Red::step(acc, base[i]);
      else for (int64_t i = 0; i < nred; ++i) acc = Red::step(acc, base[red.offset(i)]);
      o[j] = static_cast<R>(acc);
    }
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
      for (int64_t i = 1; i < nred; ++i) {
        T v = base[red.offset(i)];
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(bv)) break;
          if (std::isnan(v)) { best = i; bv = v; break; }
        }
        if (IsMax ? v > bv : v < bv) { best = i; bv = v; }
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
  for (int64_t d = 0; d < x.dim(); ++d) (is_red[static_cast<size_t>(d)] ? red : kept).add(x.size(d), x.stride(d));
  if (out.numel() == 0) return;
  if (red.numel == 0) {  // reducing an empty dim: sum 0, prod 1 (max/min/arg are rejected by raw::reduce)
    fill(out, op == ReduceOp::Prod ? 1.0 : 0.0);
    return;
  }
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (is_reduced_v<T>) {
      throw InternalError("unreachable");
    } else {
      using S = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;  // sum/prod of ints give int64
      switch (op) {
        case ReduceOp::Sum: return reduce_values<T, S, ReduceOp::Sum>(out, x, kept, red);
        case ReduceOp::Prod: return reduce_values<T, S, ReduceOp::Prod>(out, x, kept, red);
        case ReduceOp::Max: return reduce_values<T, T, ReduceOp::Max>(out, x, kept, red);
        case ReduceOp::Min: return reduce_values<T, T, ReduceOp::Min>(out, x, kept, red);
        case ReduceOp::ArgMax: return reduce_arg<T, true>(out, x, kept, red);
        case ReduceOp::ArgMin: return reduce_arg<T, false>(out, x, kept, red);
      }
    }
  });
}

void CpuBackend::softmax(const Tensor& out, const Tensor& x_in, int64_t dim, bool log) {
  if (is_reduced_float(out.dtype())) {
    Tensor tmp = float_buffer_like(out);
    softmax(tmp, upcast(x_in), dim, log);
    copy(out, tmp);
    return;
  }
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
          T m = -std::numeric_limits<T>::infinity();
          for (int64_t k = 0; k < D; ++k) m = std::max(m, xi[k * inner]);
          if (std::isinf(m) && m < 0) m = 0;  // an all -inf row: avoid (-inf) - (-inf)
          double sum = 0;
          if (inner == 1) {
            // a contiguous row: the exps in one vectorisable pass (written to the output, which log-softmax then
            // overwrites), summed in double afterwards in four interleaved sums
            exp_shifted(xi, m, oi, D);
            double s4[4] = {0, 0, 0, 0};
            int64_t k = 0;
            for (; k + 4 <= D; k += 4)
              for (int j = 0; j < 4; ++j) s4[j] += static_cast<double>(oi[k + j]);
            for (; k < D; ++k) s4[0] += static_cast<double>(oi[k]);
            sum = (s4[0] + s4[1]) + (s4[2] + s4[3]);
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

}  // namespace ember::cpu
