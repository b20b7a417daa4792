// defines: the row-norm kernels (layer and RMS norm) and their launchers (launch.h: launch_row_norm*), the CUDA side of
// core/cpu/layer_norm.cpp: sums in double, the variance as a second pass over the deviations.
//   - forward and dx: one block per row (grid-stride over rows); its threads stride over the row's D values
//     (coalesced), and a shared-memory tree adds their partial sums;
//   - dw, db: one thread per column walks the N rows (adjacent threads read adjacent columns).
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

// Sums a and b over the block (blockDim.x == kBlockSize, a power of two); every thread gets the totals.
__device__ void block_sum2(double& a, double& b) {
  __shared__ double sa[kBlockSize], sb[kBlockSize];
  const int t = static_cast<int>(threadIdx.x);
  sa[t] = a;
  sb[t] = b;
  __syncthreads();
  for (int h = kBlockSize / 2; h > 0; h /= 2) {
    if (t < h) {
      sa[t] += sa[t + h];
      sb[t] += sb[t + h];
    }
    __syncthreads();
  }
  a = sa[0];
  b = sb[0];
  __syncthreads();  // every thread has read the totals before the arrays are written again
}

template <class T>
__global__ void layer_norm_kernel(T* y, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t N, int64_t D,
                                  double eps, bool centred) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* xr = x + n * D;
    double s = 0, unused = 0;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) s += static_cast<double>(xr[j]);
    block_sum2(s, unused);
    const double mu = D && centred ? s / static_cast<double>(D) : 0.0;  // RMS norm: the mean is taken as 0
    double q = 0;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      const double dv = static_cast<double>(xr[j]) - mu;
      q += dv * dv;
    }
    block_sum2(q, unused);
    const double r = 1.0 / sqrt((D ? q / static_cast<double>(D) : 0.0) + eps);
    if (threadIdx.x == 0) {
      mean[n] = static_cast<T>(mu);
      rstd[n] = static_cast<T>(r);
    }
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      double v = (static_cast<double>(xr[j]) - mu) * r;
      if (w) v *= static_cast<double>(w[j]);
      if (b) v += static_cast<double>(b[j]);
      y[n * D + j] = static_cast<T>(v);
    }
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w, per row (RMS norm: without the mean(g) term)
template <class T>
__global__ void layer_norm_dx_kernel(T* dx, const T* dy, const T* x, const T* mean, const T* rstd, const T* w,
                                     int64_t N, int64_t D, bool centred) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T *xr = x + n * D, *gr = dy + n * D;
    const double m = static_cast<double>(mean[n]), r = static_cast<double>(rstd[n]);
    double a = 0, c = 0;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      const double g = static_cast<double>(gr[j]) * (w ? static_cast<double>(w[j]) : 1.0);
      a += g;
      c += g * (static_cast<double>(xr[j]) - m) * r;
    }
    block_sum2(a, c);
    a = centred ? a / static_cast<double>(D) : 0.0;
    c /= static_cast<double>(D);
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      const double g = static_cast<double>(gr[j]) * (w ? static_cast<double>(w[j]) : 1.0);
      dx[n * D + j] = static_cast<T>(r * (g - a - (static_cast<double>(xr[j]) - m) * r * c));
    }
  }
}

// dw = sum over rows of dy * xhat, db = sum of dy; either may be null
template <class T>
__global__ void layer_norm_dwdb_kernel(T* dw, T* db, const T* dy, const T* x, const T* mean, const T* rstd, int64_t N,
                                       int64_t D) {
  EMBER_KERNEL_LOOP(j, D) {
    double sw = 0, sb = 0;
    for (int64_t n = 0; n < N; ++n) {
      const double g = static_cast<double>(dy[n * D + j]);
      sw += g * (static_cast<double>(x[n * D + j]) - static_cast<double>(mean[n])) * static_cast<double>(rstd[n]);
      sb += g;
    }
    if (dw) dw[j] = static_cast<T>(sw);
    if (db) db[j] = static_cast<T>(sb);
  }
}

unsigned row_grid(int64_t N) { return static_cast<unsigned>(N < (int64_t{1} << 20) ? N : (int64_t{1} << 20)); }

}  // namespace

void launch_row_norm(DType type, const RowNorm& norm, void* y, void* mean, void* rstd, const void* x, const void* w,
                     const void* b, CUstream_st* stream) {
  const int64_t n = norm.rows, d = norm.cols;
  const double eps = norm.eps;
  if (n == 0) return;
  dispatch_float(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    layer_norm_kernel<T><<<row_grid(n), kBlockSize, 0, stream>>>(
        static_cast<T*>(y), static_cast<T*>(mean), static_cast<T*>(rstd), static_cast<const T*>(x),
        static_cast<const T*>(w), static_cast<const T*>(b), n, d, eps, norm.kind == RowNormKind::LayerNorm);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_row_norm_backward(DType type, const RowNorm& norm, void* dx, void* dw, void* db, const void* dy,
                              const void* x, const void* mean, const void* rstd, const void* w, CUstream_st* stream) {
  const int64_t n = norm.rows, d = norm.cols;
  dispatch_float(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dx && n > 0 && d > 0)
      layer_norm_dx_kernel<T><<<row_grid(n), kBlockSize, 0, stream>>>(
          static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(mean),
          static_cast<const T*>(rstd), static_cast<const T*>(w), n, d, norm.kind == RowNormKind::LayerNorm);
    if ((dw || db) && d > 0)
      layer_norm_dwdb_kernel<T><<<grid_size(d), kBlockSize, 0, stream>>>(
          static_cast<T*>(dw), static_cast<T*>(db), static_cast<const T*>(dy), static_cast<const T*>(x),
          static_cast<const T*>(mean), static_cast<const T*>(rstd), n, d);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
