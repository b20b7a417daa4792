// defines: the batch-norm kernels and their launchers (launch.h: launch_batch_norm_*), the CUDA side of
// core/cpu/norm.cpp with the same arithmetic: per-channel sums in double (the variance in a second pass over the
// deviations from the mean, as the CPU's), elementwise passes as one multiply-add
// with per-channel coefficients from scalar_fused.h (bn_affine, bn_backward).
//   - sums, S > 1: one block per channel; its threads walk the channel's N runs of S values in order (reads are
//     coalesced within a run), then a shared-memory tree adds the threads' partial sums;
//   - sums, S == 1 ([N, C]): one thread per channel walks the N rows (adjacent threads read adjacent columns);
//   - elementwise: one thread per element, its channel (i / S) % C.
#include <cstdint>

#include "common.cuh"
#include "ember/internal/scalar_fused.h"

namespace ember::cuda::kernels {
namespace {

// The two sums of one channel: sa += a(i, c), sb += b(i, c) over the flat indices i of channel c.
struct Sums {
  double a = 0, b = 0;
};

// Partial sums of one thread, for channel c, S > 1: elements t, t + blockDim.x, ... of the channel's N * S.
template <class F>
__device__ Sums thread_sums(const NcsShape& d, int64_t c, F f) {
  Sums s;
  const int64_t m = d.n * d.s;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
    const int64_t n = k / d.s, i = (n * d.c + c) * d.s + (k - n * d.s);
    f(i, c, s);
  }
  return s;
}

// Adds the block's partial sums (tree in shared memory); thread 0 gets the channel's totals.
__device__ Sums block_sums(Sums s) {
  __shared__ double ba[kBlockSize], bb[kBlockSize];
  ba[threadIdx.x] = s.a;
  bb[threadIdx.x] = s.b;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h /= 2) {
    if (static_cast<int>(threadIdx.x) < h) {
      ba[threadIdx.x] += ba[threadIdx.x + h];
      bb[threadIdx.x] += bb[threadIdx.x + h];
    }
    __syncthreads();
  }
  return {ba[0], bb[0]};
}

// Calls f(i, c, sums) for every element of channel c, then done(c, totals) once per channel.
template <class F, class Done>
__global__ void channel_block_kernel(NcsShape d, F f, Done done) {
  for (int64_t c = blockIdx.x; c < d.c; c += gridDim.x) {
    const Sums t = block_sums(thread_sums(d, c, f));
    if (threadIdx.x == 0) done(c, t);
    __syncthreads();  // the shared buffers are reused for the next channel
  }
}
template <class F, class Done>
__global__ void channel_column_kernel(NcsShape d, F f, Done done) {
  EMBER_KERNEL_LOOP(c, d.c) {
    Sums s;
    for (int64_t n = 0; n < d.n; ++n) f(n * d.c + c, c, s);
    done(c, s);
  }
}

template <class F, class Done>
void channel_sums(const NcsShape& d, F f, Done done, CUstream_st* stream) {
  if (d.c == 0) return;
  if (d.s == 1) {
    channel_column_kernel<<<grid_size(d.c), kBlockSize, 0, stream>>>(d, f, done);
  } else {
    const unsigned grid = static_cast<unsigned>(d.c < (int64_t{1} << 20) ? d.c : (int64_t{1} << 20));
    channel_block_kernel<<<grid, kBlockSize, 0, stream>>>(d, f, done);
  }
}

// The statistics of x, in two passes as on the CPU: the mean, then the sum of squared deviations from it (a one-pass
// E[x^2] - mean^2 cancels catastrophically when |mean| >> std). Pass 1 adds x, pass 2 adds (x - mean)^2, into s.a.
template <class T>
struct SumTerm {
  const T* x;
  __device__ void operator()(int64_t i, int64_t, Sums& s) const { s.a += static_cast<double>(x[i]); }
};
template <class T>
struct SquaredDeviationTerm {
  const T* x;
  double mean;
  __device__ void operator()(int64_t i, int64_t, Sums& s) const {
    const double v = static_cast<double>(x[i]) - mean;
    s.a += v * v;
  }
};

template <class T>
__global__ void stats_block_kernel(NcsShape d, const T* x, T* mean, T* var) {
  const double count = static_cast<double>(d.n * d.s);
  for (int64_t c = blockIdx.x; c < d.c; c += gridDim.x) {
    const double mu = block_sums(thread_sums(d, c, SumTerm<T>{x})).a / count;  // every thread reads the total
    __syncthreads();  // all have read it before the shared buffers are reused
    const double ss = block_sums(thread_sums(d, c, SquaredDeviationTerm<T>{x, mu})).a;
    if (threadIdx.x == 0) {
      mean[c] = static_cast<T>(mu);
      var[c] = static_cast<T>(ss / count);
    }
    __syncthreads();
  }
}
template <class T>
__global__ void stats_column_kernel(NcsShape d, const T* x, T* mean, T* var) {
  const double count = static_cast<double>(d.n);
  EMBER_KERNEL_LOOP(c, d.c) {
    Sums s;
    for (int64_t n = 0; n < d.n; ++n) SumTerm<T>{x}(n * d.c + c, c, s);
    const double mu = s.a / count;
    Sums q;
    for (int64_t n = 0; n < d.n; ++n) SquaredDeviationTerm<T>{x, mu}(n * d.c + c, c, q);
    mean[c] = static_cast<T>(mu);
    var[c] = static_cast<T>(q.a / count);
  }
}

// The backward's sums: of dy, and of dy * (x - mean[c]).
template <class T>
struct GradTerm {
  const T *dy, *x, *mean;
  __device__ void operator()(int64_t i, int64_t c, Sums& s) const {
    const double g = static_cast<double>(dy[i]);
    s.a += g;
    s.b += g * (static_cast<double>(x[i]) - static_cast<double>(mean[c]));
  }
};
template <class T>
struct GradDone {
  T *sum_dy, *sum_dy_xmu;
  __device__ void operator()(int64_t c, const Sums& t) const {
    sum_dy[c] = static_cast<T>(t.a);
    sum_dy_xmu[c] = static_cast<T>(t.b);
  }
};

template <class T>
__global__ void elemt_kernel(T* y, const T* x, const T* mean, const T* invstd, const T* w, const T* b, NcsShape d) {
  EMBER_KERNEL_LOOP(i, d.n * d.c * d.s) {
    const int64_t c = i / d.s % d.c;
    const scalar::BnAffine k = scalar::bn_affine(mean[c], invstd[c], w ? w[c] : 1.0, b ? b[c] : 0.0);
    y[i] = static_cast<T>(k.scale) * x[i] + static_cast<T>(k.shift);
  }
}

template <class T>
__global__ void backward_elemt_kernel(T* dx, const T* dy, const T* x, const T* mean, const T* invstd, const T* w,
                                      const T* sum_dy, const T* sum_dy_xmu, double count, NcsShape d) {
  const bool batch_stats = sum_dy != nullptr;
  EMBER_KERNEL_LOOP(i, d.n * d.c * d.s) {
    const int64_t c = i / d.s % d.c;
    const scalar::BnBackward k = scalar::bn_backward(mean[c], invstd[c], w ? w[c] : 1.0, batch_stats ? sum_dy[c] : 0.0,
                                                     batch_stats ? sum_dy_xmu[c] : 0.0, count, batch_stats);
    const T v = static_cast<T>(k.k1) * dy[i];
    dx[i] = batch_stats ? v + static_cast<T>(k.k2) * x[i] + static_cast<T>(k.k3) : v;
  }
}

}  // namespace

void launch_batch_norm_stats(DType type, void* mean, void* var, const void* x, const NcsShape& d, CUstream_st* stream) {
  if (d.c == 0) return;
  dispatch_float(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = static_cast<const T*>(x);
    T *m = static_cast<T*>(mean), *v = static_cast<T*>(var);
    if (d.s == 1) {
      stats_column_kernel<T><<<grid_size(d.c), kBlockSize, 0, stream>>>(d, xs, m, v);
    } else {
      const unsigned grid = static_cast<unsigned>(d.c < (int64_t{1} << 20) ? d.c : (int64_t{1} << 20));
      stats_block_kernel<T><<<grid, kBlockSize, 0, stream>>>(d, xs, m, v);
    }
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_batch_norm_elemt(DType type, void* y, const void* x, const void* mean, const void* invstd, const void* w,
                             const void* b, const NcsShape& d, CUstream_st* stream) {
  const int64_t n = d.n * d.c * d.s;
  if (n == 0) return;
  dispatch_float(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    elemt_kernel<T><<<grid_size(n), kBlockSize, 0, stream>>>(static_cast<T*>(y), static_cast<const T*>(x),
                                                             static_cast<const T*>(mean), static_cast<const T*>(invstd),
                                                             static_cast<const T*>(w), static_cast<const T*>(b), d);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_batch_norm_backward_reduce(DType type, void* sum_dy, void* sum_dy_xmu, const void* dy, const void* x,
                                       const void* mean, const NcsShape& d, CUstream_st* stream) {
  dispatch_float(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    channel_sums(d, GradTerm<T>{static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(mean)},
                 GradDone<T>{static_cast<T*>(sum_dy), static_cast<T*>(sum_dy_xmu)}, stream);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_batch_norm_backward_elemt(DType type, void* dx, const void* dy, const void* x, const void* mean,
                                      const void* invstd, const void* w, const void* sum_dy, const void* sum_dy_xmu,
                                      int64_t count, const NcsShape& d, CUstream_st* stream) {
  const int64_t n = d.n * d.c * d.s;
  if (n == 0) return;
  dispatch_float(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward_elemt_kernel<T><<<grid_size(n), kBlockSize, 0, stream>>>(
        static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(mean),
        static_cast<const T*>(invstd), static_cast<const T*>(w), static_cast<const T*>(sum_dy),
        static_cast<const T*>(sum_dy_xmu), static_cast<double>(count), d);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
