// defines: the argsort kernels, launch_argsort and argsort_workspace_bytes (launch.h). Elements compare as
// (value, index) pairs — NaN after every number, equal values by their index — which is a total order, so any
// correct sort gives exactly the CPU's stable result.
//   - rows of up to kSharedMax (2048): a bitonic sort, one block per row, of its (value, index) pairs in shared
//     memory (the row padded to a power of two p; padding slots hold indices >= n and compare after every element);
//   - longer rows: CUB's radix sort (stable) of (key, index) pairs, the key an unsigned integer whose order is the
//     comparator's (order_key: NaN of either sign above +inf, -0 equal to +0); a few long rows one after another
//     with the onesweep sort (the whole GPU on each), else a segmented sort over all rows (a block a row); the rule
//     is cuda_scratch.h's cuda_argsort_one_sweep.
#include <cstdint>
#include <cstring>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <type_traits>

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

// --- long rows: radix keys

template <int Bytes>
struct UnsignedOf;
template <>
struct UnsignedOf<1> {
  using type = uint8_t;
};
template <>
struct UnsignedOf<2> {
  using type = uint16_t;
};
template <>
struct UnsignedOf<4> {
  using type = uint32_t;
};
template <>
struct UnsignedOf<8> {
  using type = uint64_t;
};
template <class T>
using RadixKey = typename UnsignedOf<sizeof(T)>::type;

// The unsigned key whose ascending order is comes_before's for ascending values: for floats the sign-magnitude bits
// made monotonic (negative: all bits flipped, positive: the sign bit set), -0 mapped to +0's key, every NaN to the
// largest key (after +inf; a descending sort then puts it first); for signed integers the sign bit flipped.
template <class T>
__device__ inline RadixKey<T> order_key(T v) {
  using U = RadixKey<T>;
  constexpr U sign = static_cast<U>(U{1} << (8 * sizeof(T) - 1));
  if constexpr (std::is_floating_point_v<T> || is_reduced_v<T>) {
    const compute_t<T> c = load_c(v);
    if (is_nan(c)) return static_cast<U>(~U{0});
    if (c == compute_t<T>(0)) return sign;
    U bits;
    memcpy(&bits, &v, sizeof(U));
    return (bits & sign) ? static_cast<U>(~bits) : static_cast<U>(bits | sign);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<U>(static_cast<U>(v) ^ sign);
  } else {
    return static_cast<U>(v);
  }
}

// keys[e] = order_key(x[e]) and idx[e] = e's index in its row; offsets[r] = r * n for r <= rows (when given).
template <class T>
__global__ void radix_prepare_kernel(RadixKey<T>* keys, int64_t* idx, int64_t* offsets, const T* x, int64_t rows,
                                     int64_t n) {
  EMBER_KERNEL_LOOP(e, rows * n) {
    keys[e] = order_key(x[e]);
    idx[e] = e % n;
  }
  if (offsets) EMBER_KERNEL_LOOP(r, rows + 1) offsets[r] = r * n;
}

// The workspace's parts (cuda_scratch.h's layout): the second key buffer after the first, then the second index
// buffer, then the offsets (segmented sorts), then CUB's storage.
template <class U>
struct RadixBuffers {
  U* keys[2];
  int64_t* idx2;
  int64_t* offsets;
  void* cub_temp;
};
template <class U>
RadixBuffers<U> radix_buffers(void* workspace, int64_t rows, int64_t n) {
  using ::ember::detail::cuda_align256;
  unsigned char* w = static_cast<unsigned char*>(workspace);
  const int64_t keys = cuda_align256(rows * n * static_cast<int64_t>(sizeof(U))), idx = cuda_align256(rows * n * 8);
  const bool segmented = !::ember::detail::cuda_argsort_one_sweep(rows, n);
  const int64_t offs = segmented ? cuda_align256((rows + 1) * 8) : 0;
  return {{reinterpret_cast<U*>(w), reinterpret_cast<U*>(w + keys)},
          reinterpret_cast<int64_t*>(w + 2 * keys),
          segmented ? reinterpret_cast<int64_t*>(w + 2 * keys + idx) : nullptr,
          w + 2 * keys + idx + offs};
}

// Rows per segmented sort: CUB's segmented sort counts elements in int (n <= INT32_MAX there).
int64_t rows_per_sort(int64_t rows, int64_t n) {
  const int64_t fit = int64_t{INT32_MAX} / n;
  return rows < fit ? rows : fit;
}

// CUB's sort of n (key, index) pairs of one row (offsets null: onesweep) or of `rows` rows (offsets given: one
// segmented sort), held in the double buffers (CUB swaps them as it goes: the result is in their Current());
// temp == nullptr asks for temp_bytes only.
template <class U>
cudaError_t radix_sort(void* temp, size_t& temp_bytes, cub::DoubleBuffer<U>& keys, cub::DoubleBuffer<int64_t>& idx,
                       int64_t rows, int64_t n, const int64_t* offsets, bool descending, cudaStream_t stream) {
  const int bits = static_cast<int>(8 * sizeof(U));
  if (!offsets) {
    return descending ? cub::DeviceRadixSort::SortPairsDescending(temp, temp_bytes, keys, idx, n, 0, bits, stream)
                      : cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, idx, n, 0, bits, stream);
  }
  const int items = static_cast<int>(rows * n), segments = static_cast<int>(rows);
  return descending ? cub::DeviceSegmentedRadixSort::SortPairsDescending(temp, temp_bytes, keys, idx, items, segments,
                                                                         offsets, offsets + 1, 0, bits, stream)
                    : cub::DeviceSegmentedRadixSort::SortPairs(temp, temp_bytes, keys, idx, items, segments, offsets,
                                                               offsets + 1, 0, bits, stream);
}

// CUB's storage for the largest sort launch_radix_argsort makes (either direction).
template <class U>
int64_t radix_temp_bytes(int64_t rows, int64_t n) {
  const bool one_sweep = ::ember::detail::cuda_argsort_one_sweep(rows, n);
  static const int64_t kAnyOffsets = 0;  // the size query reads no offsets, but a non-null pointer picks segmented
  const int64_t* offsets = one_sweep ? nullptr : &kAnyOffsets;
  const int64_t per = one_sweep ? 1 : rows_per_sort(rows, n);
  cub::DoubleBuffer<U> keys(nullptr, nullptr);
  cub::DoubleBuffer<int64_t> idx(nullptr, nullptr);
  size_t asc = 0, desc = 0;
  EMBER_CUDA_CHECK(radix_sort<U>(nullptr, asc, keys, idx, per, n, offsets, false, nullptr));
  EMBER_CUDA_CHECK(radix_sort<U>(nullptr, desc, keys, idx, per, n, offsets, true, nullptr));
  return static_cast<int64_t>(asc > desc ? asc : desc);
}

template <class T>
void launch_radix_argsort(int64_t* out, const T* x, int64_t rows, int64_t n, bool descending, void* workspace,
                          int64_t workspace_bytes, CUstream_st* stream) {
  using U = RadixKey<T>;
  const RadixBuffers<U> b = radix_buffers<U>(workspace, rows, n);
  radix_prepare_kernel<T><<<grid_size(rows * n), kBlockSize, 0, stream>>>(b.keys[0], out, b.offsets, x, rows, n);
  // one row at a time (onesweep), or groups of rows that CUB can count (segmented; the offsets serve every group)
  const int64_t per = b.offsets ? rows_per_sort(rows, n) : 1;
  const int64_t before_temp = static_cast<unsigned char*>(b.cub_temp) - static_cast<unsigned char*>(workspace);
  const size_t temp_bytes = static_cast<size_t>(workspace_bytes - before_temp);
  for (int64_t r0 = 0; r0 < rows; r0 += per) {
    const int64_t r = rows - r0 < per ? rows - r0 : per, at = r0 * n;
    cub::DoubleBuffer<U> keys(b.keys[0] + at, b.keys[1] + at);
    cub::DoubleBuffer<int64_t> idx(out + at, b.idx2 + at);
    size_t bytes = temp_bytes;
    EMBER_CUDA_CHECK(radix_sort<U>(b.cub_temp, bytes, keys, idx, r, n, b.offsets, descending, stream));
    if (idx.Current() != out + at)
      EMBER_CUDA_CHECK(cudaMemcpyAsync(out + at, idx.Current(), static_cast<size_t>(r * n) * sizeof(int64_t),
                                       cudaMemcpyDeviceToDevice, stream));
  }
}

}  // namespace

int64_t argsort_workspace_bytes(DType type, int64_t rows, int64_t n) {
  const int64_t key_bytes = static_cast<int64_t>(itemsize(type));
  const int64_t planned = ::ember::detail::cuda_argsort_workspace_bytes(rows, n, key_bytes);
  if (planned == 0 || rows == 0) return planned;
  int64_t cub = 0;
  dispatch(type, [&](auto tag) { cub = radix_temp_bytes<RadixKey<typename decltype(tag)::type>>(rows, n); });
  const int64_t needed = ::ember::detail::cuda_argsort_radix_bytes(rows, n, key_bytes) + cub;
  return needed > planned ? needed : planned;  // the plan's figure wherever its bound on CUB's storage holds
}

void launch_argsort(DType type, int64_t* out, const void* x, int64_t rows, int64_t n, bool descending, void* workspace,
                    int64_t workspace_bytes, CUstream_st* stream) {
  if (rows == 0 || n == 0) return;
  dispatch(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xt = static_cast<const T*>(x);
    if (n > kSharedMax)
      return launch_radix_argsort<T>(out, xt, rows, n, descending, workspace, workspace_bytes, stream);
    const int64_t p = pow2_at_least(n);
    const size_t smem = static_cast<size_t>(keys_bytes(p, sizeof(compute_t<T>)) + p * sizeof(int32_t));
    const int threads = static_cast<int>(p < kSortThreads ? p : kSortThreads);
    // a block per row, up to 65535 blocks (plenty to fill any GPU); the blocks then take further rows in turn
    const unsigned grid = static_cast<unsigned>(rows < 65535 ? rows : 65535);
    argsort_shared_kernel<T><<<grid, threads, smem, stream>>>(out, xt, rows, n, static_cast<int>(p), descending);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
