// defines: the batch-norm kernels and their launchers (launch.h: launch_batch_norm_*), the CUDA side of
// core/cpu/norm.cpp. x, y, dy, dx are read and written in their own dtype (16-bit widened to float in registers,
// each result rounded once: no float32 copy of an activation); the per-channel tensors are in the compute type C
// (float for 16-bit, else the element type); sums accumulate in double.
//   - sums, S > 1: each channel's N * S elements in P parts (batch_norm_parts, kernel_params.h), one block per
//     (channel, part), so that a [256, 64, 56, 56] batch fills every SM instead of 64 of them. A block walks its
//     part run by run (no division per element when a run is at least a block wide), adds by warp shuffles and
//     writes its two sums to the workspace; a second kernel adds each channel's parts in order (deterministic).
//   - sums, S == 1 ([N, C], and channels-last tensors as their [N*H*W, C] rows): a thread per (channel, part of the
//     rows) (batch_norm_column_parts; adjacent threads read adjacent columns) into the same workspace, then the
//     ordered second kernel; one thread per channel over all N rows when N <= 512.
//   - the statistics take one pass over x: the sums of (x - k) and (x - k)^2 with k the channel's first element,
//     in double; the shift keeps E[x^2] - mean^2 from cancelling when |mean| >> std.
//   - elementwise (with ReLU fused when asked), S >= 128: a block per (n, c) run, the channel's coefficients worked out
//     once per block; S < 128: one thread per element, its channel (i / S) % C.
//   - batch_norm_relu's backward reads its output beside dy in both passes (dy is 0 where the output is not > 0):
//     no masked copy of dy.
// The coefficients come from scalar_fused.h (bn_affine, bn_backward), as on the CPU.
#include <cstdint>

#include "common.cuh"
#include "ember/core/kernel_params.h"
#include "ember/internal/scalar_fused.h"

namespace ember::cuda::kernels {
namespace {

struct Sums {
  double a = 0, b = 0;
};

template <class T>
__device__ double wide(T v) {
  return static_cast<double>(load_c(v));
}

// The sums of (x - k) and (x - k)^2, k = the channel's first element (x[n = 0, c, s = 0]).
template <class T>
struct StatsTerm {
  const T* x;
  int64_t s;
  __device__ double shift(int64_t c) const { return wide(x[c * s]); }
  __device__ void add(int64_t i, double k, Sums& t) const {
    const double v = wide(x[i]) - k;
    t.a += v;
    t.b += v * v;
  }
};
// mean = k + sum / count, var = sum_sq / count - (sum / count)^2 (biased), from the shifted sums.
template <class C>
struct StatsFinish {
  C *mean, *var;
  double count;
  __device__ void operator()(int64_t c, const Sums& t, double k) const {
    const double d = t.a / count, v = t.b / count - d * d;
    mean[c] = static_cast<C>(k + d);
    var[c] = static_cast<C>(v > 0 ? v : 0.0);
  }
};

// The backward's sums: of dy, and of dy * (x - mean[c]); dy is 0 where relu_y (when given) is not > 0.
template <class T>
struct GradTerm {
  const T *dy, *x;
  const compute_t<T>* mean;
  const T* relu_y;
  __device__ double shift(int64_t c) const { return static_cast<double>(mean[c]); }
  __device__ void add(int64_t i, double m, Sums& t) const {
    const double g = relu_y && !(load_c(relu_y[i]) > 0) ? 0.0 : wide(dy[i]);
    t.a += g;
    t.b += g * (wide(x[i]) - m);
  }
};
template <class C>
struct GradFinish {
  C *sum_dy, *sum_dy_xmu;
  __device__ void operator()(int64_t c, const Sums& t, double) const {
    sum_dy[c] = static_cast<C>(t.a);
    sum_dy_xmu[c] = static_cast<C>(t.b);
  }
};

// The block's threads' sums over the elements k in [k0, k1) of channel c (k = n * S + s).
template <class Term>
__device__ Sums part_sums(const NcsShape& d, int64_t c, int64_t k0, int64_t k1, const Term& term, double k) {
  Sums t;
  if (d.s >= static_cast<int64_t>(blockDim.x)) {  // whole runs: the threads stride within one (no division)
    for (int64_t n = k0 / d.s; n < d.n && n * d.s < k1; ++n) {
      const int64_t run = n * d.s, base = (n * d.c + c) * d.s;
      const int64_t lo = k0 > run ? k0 - run : 0, hi = k1 - run < d.s ? k1 - run : d.s;
      for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) term.add(base + j, k, t);
    }
  } else {
    for (int64_t q = k0 + threadIdx.x; q < k1; q += blockDim.x) {
      const int64_t n = q / d.s;
      term.add((n * d.c + c) * d.s + (q - n * d.s), k, t);
    }
  }
  return t;
}

// Block b = (channel c, part p) writes its two sums to ws[2b], ws[2b + 1].
template <class Term>
__global__ void part_sums_kernel(NcsShape d, int64_t parts, Term term, double* ws) {
  __shared__ double shared[32];
  const auto plus = [](double u, double v) { return u + v; };
  const int64_t per = d.n * d.s, chunk = CEIL_DIV(per, parts);
  for (int64_t b = blockIdx.x; b < d.c * parts; b += gridDim.x) {
    const int64_t c = b / parts, p = b - c * parts, k0 = p * chunk, k1 = k0 + chunk < per ? k0 + chunk : per;
    const Sums t = part_sums(d, c, k0, k1, term, term.shift(c));
    const double ta = block_reduce(t.a, shared, plus), tb = block_reduce(t.b, shared, plus);
    if (threadIdx.x == 0) {
      ws[2 * b] = ta;
      ws[2 * b + 1] = tb;
    }
  }
}
// Each channel's parts added in order, then finish(c, totals, shift).
template <class Term, class Finish>
__global__ void finish_kernel(NcsShape d, int64_t parts, const double* ws, Term term, Finish finish) {
  EMBER_KERNEL_LOOP(c, d.c) {
    Sums t;
    for (int64_t p = 0; p < parts; ++p) {
      t.a += ws[2 * (c * parts + p)];
      t.b += ws[2 * (c * parts + p) + 1];
    }
    finish(c, t, term.shift(c));
  }
}
// [N, C] (S == 1): one thread per channel over the N rows.
template <class Term, class Finish>
__global__ void column_kernel(NcsShape d, Term term, Finish finish) {
  EMBER_KERNEL_LOOP(c, d.c) {
    Sums t;
    const double k = term.shift(c);
    for (int64_t n = 0; n < d.n; ++n) term.add(n * d.c + c, k, t);
    finish(c, t, k);
  }
}

// [N, C] with many rows (batch_norm_column_parts > 1): thread (part p, channel c) sums channel c over part p of the
// rows (adjacent threads read adjacent channels) into part_sums_kernel's workspace layout, for finish_kernel.
template <class Term>
__global__ void column_part_kernel(NcsShape d, int64_t parts, Term term, double* ws) {
  const int64_t chunk = CEIL_DIV(d.n, parts);
  EMBER_KERNEL_LOOP(i, d.c * parts) {
    const int64_t p = i / d.c, c = i - p * d.c, n0 = p * chunk, n1 = n0 + chunk < d.n ? n0 + chunk : d.n;
    const double k = term.shift(c);
    Sums t;
    for (int64_t n = n0; n < n1; ++n) term.add(n * d.c + c, k, t);
    ws[2 * (c * parts + p)] = t.a;
    ws[2 * (c * parts + p) + 1] = t.b;
  }
}

template <class Term, class Finish>
void channel_sums(const NcsShape& d, const Term& term, const Finish& finish, void* workspace, CUstream_st* stream) {
  if (d.c == 0) return;
  if (d.s == 1) {
    const int64_t parts = batch_norm_column_parts(d.n);
    if (parts == 1) {
      column_kernel<<<grid_size(d.c), kBlockSize, 0, stream>>>(d, term, finish);
      return;
    }
    double* ws = static_cast<double*>(workspace);
    column_part_kernel<<<grid_size(d.c * parts), kBlockSize, 0, stream>>>(d, parts, term, ws);
    finish_kernel<<<grid_size(d.c), kBlockSize, 0, stream>>>(d, parts, ws, term, finish);
    return;
  }
  const int64_t parts = batch_norm_parts(d.n * d.s), blocks = d.c * parts;
  double* ws = static_cast<double*>(workspace);
  part_sums_kernel<<<static_cast<unsigned>(blocks < (int64_t{1} << 20) ? blocks : (int64_t{1} << 20)), kBlockSize, 0,
                     stream>>>(d, parts, term, ws);
  finish_kernel<<<grid_size(d.c), kBlockSize, 0, stream>>>(d, parts, ws, term, finish);
}

// out[i] = k1 * u[i] + k2 * v[i] + k3 with (k1, k2, k3) the coefficients of i's channel (v null: k2 unused).
template <class C>
struct Coefs {
  C k1, k2, k3;
};
template <class C>
struct AffineCoefs {  // y = scale * x + shift
  const C *mean, *invstd, *w, *b;
  __device__ Coefs<C> operator()(int64_t c) const {
    const scalar::BnAffine k = scalar::bn_affine(mean[c], invstd[c], w ? w[c] : 1.0, b ? b[c] : 0.0);
    return {static_cast<C>(k.scale), C(0), static_cast<C>(k.shift)};
  }
};
template <class C>
struct BackwardCoefs {  // dx = k1 * dy + k2 * x + k3
  const C *mean, *invstd, *w, *sum_dy, *sum_dy_xmu;
  double count;
  __device__ Coefs<C> operator()(int64_t c) const {
    const bool batch_stats = sum_dy != nullptr;
    const scalar::BnBackward k = scalar::bn_backward(mean[c], invstd[c], w ? w[c] : 1.0, batch_stats ? sum_dy[c] : 0.0,
                                                     batch_stats ? sum_dy_xmu[c] : 0.0, count, batch_stats);
    return {static_cast<C>(k.k1), static_cast<C>(k.k2), static_cast<C>(k.k3)};
  }
};

// Then relu of it when Relu (BatchNorm+ReLU: the normalised value is never stored). u[i] counts as 0 where mask
// (when given: batch_norm_relu's output, in its backward) is not > 0.
template <bool Relu, class T, class C>
__device__ T affine_at(const Coefs<C>& k, const T* u, const T* v, const T* mask, int64_t i) {
  const C ui = mask && !(load_c(mask[i]) > C(0)) ? C(0) : load_c(u[i]);
  const C r = v ? k.k1 * ui + k.k2 * load_c(v[i]) + k.k3 : k.k1 * ui + k.k3;
  return store_c<T>(Relu ? scalar::unary<UnaryOp::Relu>(r) : r);
}

template <bool Relu, class T, class Coef>
__global__ void affine_rows_kernel(T* out, const T* u, const T* v, const T* mask, Coef coef, NcsShape d) {
  for (int64_t r = blockIdx.x; r < d.n * d.c; r += gridDim.x) {
    const auto k = coef(r % d.c);
    for (int64_t j = threadIdx.x; j < d.s; j += blockDim.x)
      out[r * d.s + j] = affine_at<Relu>(k, u, v, mask, r * d.s + j);
  }
}
template <bool Relu, class T, class Coef>
__global__ void affine_flat_kernel(T* out, const T* u, const T* v, const T* mask, Coef coef, NcsShape d) {
  EMBER_KERNEL_LOOP(i, d.n * d.c * d.s) { out[i] = affine_at<Relu>(coef(i / d.s % d.c), u, v, mask, i); }
}

template <bool Relu, class T, class Coef>
void channel_affine(T* out, const T* u, const T* v, const T* mask, const Coef& coef, const NcsShape& d,
                    CUstream_st* stream) {
  const int64_t n = d.n * d.c * d.s, rows = d.n * d.c;
  if (n == 0) return;
  if (d.s >= 128)
    affine_rows_kernel<Relu>
        <<<static_cast<unsigned>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20)), kBlockSize, 0, stream>>>(
            out, u, v, mask, coef, d);
  else affine_flat_kernel<Relu><<<grid_size(n), kBlockSize, 0, stream>>>(out, u, v, mask, coef, d);
}

}  // namespace

void launch_batch_norm_stats(DType type, void* mean, void* var, const void* x, const NcsShape& d, void* workspace,
                             CUstream_st* stream) {
  if (d.c == 0) return;
  dispatch_floating(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    channel_sums(d, StatsTerm<T>{static_cast<const T*>(x), d.s},
                 StatsFinish<C>{static_cast<C*>(mean), static_cast<C*>(var), static_cast<double>(d.n * d.s)}, workspace,
                 stream);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_batch_norm_elemt(DType type, void* y, const void* x, const void* mean, const void* invstd, const void* w,
                             const void* b, bool relu, const NcsShape& d, CUstream_st* stream) {
  dispatch_floating(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const AffineCoefs<C> coef{static_cast<const C*>(mean), static_cast<const C*>(invstd), static_cast<const C*>(w),
                              static_cast<const C*>(b)};
    T* out = static_cast<T*>(y);
    const T *in = static_cast<const T*>(x), *none = nullptr;
    if (relu) channel_affine<true>(out, in, none, none, coef, d, stream);
    else channel_affine<false>(out, in, none, none, coef, d, stream);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_batch_norm_backward_reduce(DType type, void* sum_dy, void* sum_dy_xmu, const void* dy, const void* x,
                                       const void* mean, const void* relu_y, const NcsShape& d, void* workspace,
                                       CUstream_st* stream) {
  dispatch_floating(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    channel_sums(d,
                 GradTerm<T>{static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const C*>(mean),
                             static_cast<const T*>(relu_y)},
                 GradFinish<C>{static_cast<C*>(sum_dy), static_cast<C*>(sum_dy_xmu)}, workspace, stream);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_batch_norm_backward_elemt(DType type, void* dx, const void* dy, const void* x, const void* mean,
                                      const void* invstd, const void* w, const void* sum_dy, const void* sum_dy_xmu,
                                      int64_t count, const void* relu_y, const NcsShape& d, CUstream_st* stream) {
  dispatch_floating(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const BackwardCoefs<C> coef{static_cast<const C*>(mean),       static_cast<const C*>(invstd),
                                static_cast<const C*>(w),          static_cast<const C*>(sum_dy),
                                static_cast<const C*>(sum_dy_xmu), static_cast<double>(count)};
    const T* xs = sum_dy ? static_cast<const T*>(x) : nullptr;  // fixed statistics: dx = k1 * dy
    channel_affine<false>(static_cast<T*>(dx), static_cast<const T*>(dy), xs, static_cast<const T*>(relu_y), coef, d,
                          stream);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
