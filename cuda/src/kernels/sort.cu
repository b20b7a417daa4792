// defines: the argsort kernels, launch_argsort and argsort_workspace_bytes (launch.h). Elements compare as
// (value, index) pairs — NaN after every number, equal values by their index — which is a total order, so any
// correct sort gives exactly the CPU's stable result. Bitonic sorts, over each row padded to a power of two p
// (the padding slots hold indices >= n and compare after every element, so they need no sentinel value):
//   - p <= kSharedMax: one block per row sorts its (value, index) pairs in shared memory;
//   - longer rows: the indices sort in a global-memory workspace, one launch per stage of the network (about
//     log2(p)^2 / 2 launches), comparing values read from x through the indices.
#include <cstdint>

#include "common.cuh"
#include "ember/internal/cuda_scratch.h"

namespace ember::cuda::kernels {
namespace {

// (8-byte value, 4-byte index) pairs: 24 KiB of shared memory; shared with memory::plan (cuda_scratch.h)
constexpr int64_t kSharedMax = ::ember::detail::kCudaSortSharedMax;
constexpr int kSortThreads = 512;

// Bytes of the shared keys of a row of p slots, rounded up so that the int32 indices after them are aligned (a row
// of 1 or 2 one-byte keys would leave them misaligned).
__host__ __device__ inline int64_t keys_bytes(int64_t p, int64_t key_size) { return (p * key_size + 3) / 4 * 4; }

using ::ember::detail::pow2_at_least;

// Value a (at index ia) comes before value b (at index ib): ascending with NaN last, or descending with NaN first;
// equal values (and NaNs among themselves) by index, which keeps the sort stable in both directions.
template <class K>
__device__ inline bool comes_before(K a, int64_t ia, K b, int64_t ib, bool descending) {
  const bool a_nan = is_nan(a), b_nan = is_nan(b);
  bool a_first, b_first;  // strictly, by value
  if (a_nan || b_nan) {
    a_first = descending ? (a_nan && !b_nan) : (!a_nan && b_nan);
    b_first = descending ? (b_nan && !a_nan) : (!b_nan && a_nan);
  } else {
    a_first = descending ? b < a : a < b;
    b_first = descending ? a < b : b < a;
  }
  return a_first || (!b_first && ia < ib);
}

// One row at a time per block (grid-stride over the rows): load, sort the p slots in shared memory, write the first
// n indices.
template <class T>
__device__ void argsort_shared_row(int64_t* orow, const T* xr, int64_t n, int p, bool descending) {
  using K = compute_t<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  K* keys = reinterpret_cast<K*>(smem);
  int32_t* idx = reinterpret_cast<int32_t*>(smem + keys_bytes(p, sizeof(K)));
  for (int i = threadIdx.x; i < p; i += blockDim.x) {
    idx[i] = i;
    if (i < n) keys[i] = load_c(xr[i]);
  }
  __syncthreads();
  // slot s holds an element that comes before slot t's (padding, idx >= n, after every element)
  auto before = [&](int s, int t) {
    if (idx[s] >= n || idx[t] >= n) return idx[s] < idx[t];
    return comes_before(keys[s], idx[s], keys[t], idx[t], descending);
  };
  for (int k = 2; k <= p; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < p; i += blockDim.x) {
        const int l = i ^ j;
        if (l <= i) continue;
        // blocks of size k alternate direction until the last merge, which sorts the whole row ascending
        const bool swap = (i & k) == 0 ? before(l, i) : before(i, l);
        if (swap) {
          const K tk = keys[i];
          keys[i] = keys[l];
          keys[l] = tk;
          const int32_t ti = idx[i];
          idx[i] = idx[l];
          idx[l] = ti;
        }
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) orow[i] = idx[i];
  __syncthreads();  // the block's next row reuses the shared slots
}
template <class T>
__global__ void argsort_shared_kernel(int64_t* out, const T* x, int64_t rows, int64_t n, int p, bool descending) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    argsort_shared_row<T>(out + r * n, x + r * n, n, p, descending);
}

// The global-memory network: ws holds rows x p indices (padding slots too).
__global__ void argsort_init_kernel(int64_t* ws, int64_t rows, int64_t p) {
  EMBER_KERNEL_LOOP(e, rows * p) ws[e] = e % p;
}

// One stage (k, j) of the network over every row: each thread owns one pair (i, i ^ j) with i < i ^ j.
template <class T>
__global__ void argsort_stage_kernel(int64_t* ws, const T* x, int64_t rows, int64_t n, int64_t p, int64_t k, int64_t j,
                                     bool descending) {
  EMBER_KERNEL_LOOP(e, rows * (p / 2)) {
    const int64_t row = e / (p / 2), h = e % (p / 2);
    // the h-th slot whose bit j is clear, and its partner
    const int64_t i = ((h / j) * 2 * j) + (h % j), l = i + j;
    int64_t* w = ws + row * p;
    const T* xr = x + row * n;
    const int64_t a = w[i], b = w[l];
    auto before = [&](int64_t s, int64_t t) {  // element s comes before element t (indices into the row)
      if (s >= n || t >= n) return s < t;
      return comes_before(load_c(xr[s]), s, load_c(xr[t]), t, descending);
    };
    const bool swap = (i & k) == 0 ? before(b, a) : before(a, b);
    if (swap) {
      w[i] = b;
      w[l] = a;
    }
  }
}

__global__ void argsort_copy_out_kernel(int64_t* out, const int64_t* ws, int64_t rows, int64_t n, int64_t p) {
  EMBER_KERNEL_LOOP(e, rows * n) out[e] = ws[(e / n) * p + e % n];
}

}  // namespace

int64_t argsort_workspace_bytes(int64_t rows, int64_t n) {
  return ::ember::detail::cuda_argsort_workspace_bytes(rows, n);
}

void launch_argsort(DType type, int64_t* out, const void* x, int64_t rows, int64_t n, bool descending, void* workspace,
                    CUstream_st* stream) {
  if (rows == 0 || n == 0) return;
  const int64_t p = pow2_at_least(n);
  dispatch(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xt = static_cast<const T*>(x);
    if (p <= kSharedMax) {
      const size_t smem = static_cast<size_t>(keys_bytes(p, sizeof(compute_t<T>)) + p * sizeof(int32_t));
      const int threads = static_cast<int>(p < kSortThreads ? p : kSortThreads);
      // a block per row, up to 65535 blocks (plenty to fill any GPU); the blocks then take further rows in turn
      const unsigned grid = static_cast<unsigned>(rows < 65535 ? rows : 65535);
      argsort_shared_kernel<T><<<grid, threads, smem, stream>>>(out, xt, rows, n, static_cast<int>(p), descending);
      return;
    }
    int64_t* ws = static_cast<int64_t*>(workspace);
    argsort_init_kernel<<<grid_size(rows * p), kBlockSize, 0, stream>>>(ws, rows, p);
    for (int64_t k = 2; k <= p; k <<= 1)
      for (int64_t j = k >> 1; j > 0; j >>= 1)
        argsort_stage_kernel<T>
            <<<grid_size(rows * (p / 2)), kBlockSize, 0, stream>>>(ws, xt, rows, n, p, k, j, descending);
    argsort_copy_out_kernel<<<grid_size(rows * n), kBlockSize, 0, stream>>>(out, ws, rows, n, p);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
