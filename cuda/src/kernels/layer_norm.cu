// defines: the row-norm kernels (layer and RMS norm) and their launchers (launch.h: launch_row_norm*), the CUDA side of
// core/cpu/layer_norm.cpp: sums in double, the variance as a second pass over the deviations.
//   - forward and dx: one block per row (grid-stride over rows); its threads stride over the row's D values
//     (coalesced), and warp shuffles add their partial sums (block_reduce);
//   - dw, db in two passes, as the field computes them (PyTorch's and apex's LayerNorm backward): a grid of column
//     tiles by row chunks, each block summing 32 columns over its chunk into one double per column (the chunks and
//     their workspace: row_norm_grad_chunks in kernel_params.h), then a thread per column adding the chunks in order.
//     (One thread per column walking all N rows left most SMs idle: 768 columns are 3 blocks.)
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

// Sums a and b over the block (blockDim.x == kBlockSize); every thread gets the totals.
__device__ void block_sum2(double& a, double& b) {
  __shared__ double pa[32], pb[32];
  auto add = [](double u, double v) { return u + v; };
  a = block_reduce(a, pa, add);
  b = block_reduce(b, pb, add);
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

// dw, db pass 1: block (tile, chunk) of kTileCols x kTileRows threads sums columns [tile * 32, +32) over its chunk's
// rows (thread row y takes every kTileRows-th row: a warp reads 32 adjacent columns of one row), then its kTileRows
// partial sums per column in shared memory; part_w / part_b [chunks, D].
constexpr int kTileCols = 32, kTileRows = 8;
template <class T>
__global__ void layer_norm_dwdb_partial_kernel(double* part_w, double* part_b, const T* dy, const T* x,
                                               const T* mean, const T* rstd, int64_t N, int64_t D,
                                               int64_t rows_per_chunk) {
  __shared__ double sw[kTileRows][kTileCols + 1], sb[kTileRows][kTileCols + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kTileCols + tx;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < N ? r0 + rows_per_chunk : N;
  double aw = 0, ab = 0;
  if (j < D) {
    for (int64_t n = r0 + ty; n < r1; n += kTileRows) {
      const double g = static_cast<double>(dy[n * D + j]);
      aw += g * (static_cast<double>(x[n * D + j]) - static_cast<double>(mean[n])) * static_cast<double>(rstd[n]);
      ab += g;
    }
  }
  sw[ty][tx] = aw;
  sb[ty][tx] = ab;
  __syncthreads();
  if (ty == 0 && j < D) {
    for (int k = 1; k < kTileRows; ++k) {
      aw += sw[k][tx];
      ab += sb[k][tx];
    }
    part_w[blockIdx.y * D + j] = aw;
    part_b[blockIdx.y * D + j] = ab;
  }
}

// dw, db pass 2: each column's chunk sums added in chunk order (deterministic); either output may be null.
template <class T>
__global__ void layer_norm_dwdb_finish_kernel(T* dw, T* db, const double* part_w, const double* part_b,
                                              int64_t chunks, int64_t D) {
  EMBER_KERNEL_LOOP(j, D) {
    double sw = 0, sb = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      sw += part_w[c * D + j];
      sb += part_b[c * D + j];
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
                              const void* x, const void* mean, const void* rstd, const void* w, void* workspace,
                              CUstream_st* stream) {
  const int64_t n = norm.rows, d = norm.cols;
  dispatch_float(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dx && n > 0 && d > 0)
      layer_norm_dx_kernel<T><<<row_grid(n), kBlockSize, 0, stream>>>(
          static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(mean),
          static_cast<const T*>(rstd), static_cast<const T*>(w), n, d, norm.kind == RowNormKind::LayerNorm);
    if ((dw || db) && d > 0) {
      const int64_t chunks = row_norm_grad_chunks(n);
      double* part_w = static_cast<double*>(workspace);
      double* part_b = part_w ? part_w + chunks * d : nullptr;
      if (chunks > 0) {
        const dim3 grid(static_cast<unsigned>(CEIL_DIV(d, int64_t{kTileCols})), static_cast<unsigned>(chunks));
        layer_norm_dwdb_partial_kernel<T><<<grid, dim3(kTileCols, kTileRows), 0, stream>>>(
            part_w, part_b, static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(mean),
            static_cast<const T*>(rstd), n, d, CEIL_DIV(n, chunks));
      }
      layer_norm_dwdb_finish_kernel<T><<<grid_size(d), kBlockSize, 0, stream>>>(
          static_cast<T*>(dw), static_cast<T*>(db), part_w, part_b, chunks, d);
    }
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
