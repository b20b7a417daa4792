// defines: the attention kernels and their launchers (launch.h): a flash-attention-style forward and a two-kernel
// backward that never materialise the [Tq, Tk] scores. A group of threads owns one row (a query row in the forward
// and in the dQ kernel, a key row in the dK/dV kernel) and keeps its vectors in registers, split across the group
// (RowLayout); the block walks the other side in tiles staged in shared memory, so every K/V (or Q/dO) element is read
// from global memory once per block. The forward's softmax is online (running max m and sum l, rescaled when the max
// grows); it stores the row's log-sum-exp, from which the backward recomputes each probability. float16/bfloat16 load
// into float and compute in float. The dQ pass is a separate kernel (rows owned by threads again) rather than atomics:
// no contention and a deterministic result.
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

constexpr int kTileBytes = 32 * 1024;  // shared memory for one staged tile pair

// The tile length (rows of the other side staged at once) for two vectors of DMAX elements of type C.
template <class C, int DMAX>
constexpr int kTileLen = kTileBytes / (2 * DMAX * static_cast<int>(sizeof(C)));

// An additive mask element, stored in T, in the compute type.
template <class T>
__device__ inline compute_t<T> read_additive(const void* mask, int64_t at) {
  return load_c(static_cast<const T*>(mask)[at]);
}

// The score of (i, j) with the causal rule and the mask applied; T is the stored type of an additive mask.
template <class T>
__device__ inline compute_t<T> apply_mask(compute_t<T> s, const AttentionParams& p, const void* mask, int64_t mbase,
                                          int64_t i, int64_t j) {
  using C = compute_t<T>;
  if (p.causal && j > i) return C(-INFINITY);
  if (p.mask == AttnMask::None) return s;
  const int64_t at = mbase + i * p.mask_stride[2] + j * p.mask_stride[3];
  if (p.mask == AttnMask::Bool) return static_cast<const bool*>(mask)[at] ? s : C(-INFINITY);
  return s + read_additive<T>(mask, at);
}

__device__ inline int64_t mask_base(const AttentionParams& p, int64_t bh) {
  return (bh / p.heads) * p.mask_stride[0] + (bh % p.heads) * p.mask_stride[1];
}

// Stages rows [r0, r0 + n) of a [rows, width] matrix (and of a second one) into shared memory as compute type,
// zero past the end. Every thread of the block takes part.
template <class T, int DMAX>
__device__ inline void stage(compute_t<T>* sa, const T* a, int64_t wa, compute_t<T>* sb, const T* b, int64_t wb,
                             int64_t r0, int n, int64_t rows) {
  for (int e = threadIdx.x; e < n * DMAX; e += blockDim.x) {
    const int r = e / DMAX, c = e % DMAX;
    const int64_t row = r0 + r;
    sa[e] = row < rows && c < wa ? load_c(a[row * wa + c]) : compute_t<T>(0);
    sb[e] = row < rows && c < wb ? load_c(b[row * wb + c]) : compute_t<T>(0);
  }
}

// --- one row, several threads: a row's vectors of up to DMAX elements are split over a group of G threads, each
// holding E elements in registers (64 bytes: 16 floats or 8 doubles per vector, so the dK/dV kernel's four vectors
// stay in registers even at DMAX = 128). Thread g of a group owns elements g, g + G, g + 2G, ..., so at one step the
// group reads G consecutive words of a staged tile (no bank conflicts). Dot products are summed across the group
// with shuffles, after which every thread of the group holds the same score.
constexpr int kThreads = 256;  // threads per block

template <class C, int DMAX>
struct RowLayout {
  static constexpr int E = static_cast<int>(64 / sizeof(C)) < DMAX ? static_cast<int>(64 / sizeof(C)) : DMAX;
  static constexpr int G = DMAX / E;      // threads per row: 2 to 32, a power of two
  static constexpr int R = kThreads / G;  // rows per block
  static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "a row's group must fit in a warp");
};

// The sum of v over the G threads of this thread's group (aligned lanes of one warp); every lane of the warp must
// call it, which is why the kernels below leave dead rows and masked scores only after it.
template <int G, class C>
__device__ inline C group_sum(C v) {
#pragma unroll
  for (int o = G / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Loads this thread's elements of row `row` (width w) of a, zero past w or for a dead row.
template <class T, int E, int G>
__device__ inline void load_row(compute_t<T> (&r)[E], const T* a, int64_t row, int64_t w, bool live, int g) {
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int c = e * G + g;
    r[e] = live && c < w ? load_c(a[row * w + c]) : compute_t<T>(0);
  }
}
template <class T, int E, int G>
__device__ inline void store_row(T* a, int64_t row, int64_t w, const compute_t<T> (&r)[E], int g) {
#pragma unroll
  for (int e = 0; e < E; ++e)
    if (e * G + g < w) a[row * w + e * G + g] = store_c<T>(r[e]);
}

// The group's dot product of this thread's elements with a staged tile row.
template <int E, int G, class C>
__device__ inline C dot(const C (&r)[E], const C* tile_row, int g) {
  C s = 0;
#pragma unroll
  for (int e = 0; e < E; ++e) s += r[e] * tile_row[e * G + g];
  return group_sum<G>(s);
}

// --- forward: a thread group per query row; K and V tiles in shared memory.
template <class T, int DMAX>
__device__ void attention_fwd_rows(int64_t i0, T* out, void* lse_out, const T* q, const T* k, const T* v,
                                   const void* mask, const AttentionParams& p) {
  using C = compute_t<T>;
  using L = RowLayout<C, DMAX>;
  constexpr int BC = kTileLen<C, DMAX>, E = L::E, G = L::G;
  extern __shared__ __align__(16) unsigned char smem_raw[];  // read as float or double tiles
  C* sk = reinterpret_cast<C*>(smem_raw);
  C* sv = sk + BC * DMAX;
  const int64_t bh = blockIdx.x;
  const int g = static_cast<int>(threadIdx.x) % G;
  const int64_t i = i0 + threadIdx.x / G;
  const bool live = i < p.tq;
  const int64_t mbase = mask_base(p, bh);

  C qr[E], acc[E] = {};
  load_row<T, E, G>(qr, q + bh * p.tq * p.d, i, p.d, live, g);
  C m = C(-INFINITY), l = 0;
  const int64_t jend = p.causal ? (p.tk < i0 + L::R ? p.tk : i0 + L::R) : p.tk;
  for (int64_t j0 = 0; j0 < jend; j0 += BC) {
    __syncthreads();  // the previous tile is no longer read
    stage<T, DMAX>(sk, k + bh * p.tk * p.d, p.d, sv, v + bh * p.tk * p.dv, p.dv, j0, BC, p.tk);
    __syncthreads();
    const int n = static_cast<int>(p.tk - j0 < BC ? p.tk - j0 : BC);
    for (int c = 0; c < n; ++c) {
      C s = dot<E, G>(qr, sk + c * DMAX, g);
      if (!live) continue;
      s = apply_mask<T>(s * static_cast<C>(p.scale), p, mask, mbase, i, j0 + c);
      if (s == C(-INFINITY)) continue;
      // online softmax: a new maximum rescales what was summed so far
      C w = 1;
      if (s > m) {
        const C alpha = scalar::fast_exp(m - s);
        l *= alpha;
#pragma unroll
        for (int e = 0; e < E; ++e) acc[e] *= alpha;
        m = s;
      } else {
        w = scalar::fast_exp(s - m);
      }
      l += w;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[e] += w * sv[c * DMAX + e * G + g];
    }
  }
  if (!live) return;
  const C inv = l > C(0) ? C(1) / l : C(0);
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] *= inv;
  store_row<T, E, G>(out + bh * p.tq * p.dv, i, p.dv, acc, g);
  if (g != 0) return;
  // lse is float32 (float64 for float64 inputs)
  const C lse = l > C(0) ? m + log(l) : C(-INFINITY);  // logf or log
  if constexpr (std::is_same<T, double>::value) static_cast<double*>(lse_out)[bh * p.tq + i] = lse;
  else static_cast<float*>(lse_out)[bh * p.tq + i] = static_cast<float>(lse);
}

template <class C>
__device__ inline C load_lse(const void* lse, int64_t at) {
  if constexpr (std::is_same<C, double>::value) return static_cast<const double*>(lse)[at];
  else return static_cast<const float*>(lse)[at];
}

// --- backward, dK and dV: a thread group per key row j; Q and dO tiles in shared memory, lse and D per query row.
//   p = exp(s - lse_i), dv_j += p dO_i, ds = p (dO_i . v_j - D_i) scale, dk_j += ds q_i
template <class T, int DMAX>
__device__ void attention_bwd_kv_rows(int64_t j0, T* gk, T* gv, const T* q, const T* k, const T* v, const T* gout,
                                      const void* lse, const void* Dsum, const void* mask, const AttentionParams& p) {
  using C = compute_t<T>;
  using L = RowLayout<C, DMAX>;
  constexpr int BR = kTileLen<C, DMAX>, E = L::E, G = L::G;
  extern __shared__ __align__(16) unsigned char smem_raw[];  // read as float or double tiles
  C* sq = reinterpret_cast<C*>(smem_raw);
  C* sdo = sq + BR * DMAX;
  const int64_t bh = blockIdx.x;
  const int g = static_cast<int>(threadIdx.x) % G;
  const int64_t j = j0 + threadIdx.x / G;
  const bool live = j < p.tk;
  const int64_t mbase = mask_base(p, bh);

  C kr[E], vr[E], dk[E] = {}, dv[E] = {};
  load_row<T, E, G>(kr, k + bh * p.tk * p.d, j, p.d, live, g);
  load_row<T, E, G>(vr, v + bh * p.tk * p.dv, j, p.dv, live, g);
  // under the causal rule, queries before j0 see none of this block's keys
  for (int64_t r0 = p.causal ? j0 : 0; r0 < p.tq; r0 += BR) {
    __syncthreads();
    stage<T, DMAX>(sq, q + bh * p.tq * p.d, p.d, sdo, gout + bh * p.tq * p.dv, p.dv, r0, BR, p.tq);
    __syncthreads();
    const int n = static_cast<int>(p.tq - r0 < BR ? p.tq - r0 : BR);
    for (int r = 0; r < n; ++r) {
      C s = dot<E, G>(kr, sq + r * DMAX, g);
      const C dp = dot<E, G>(vr, sdo + r * DMAX, g);
      if (!live) continue;
      const int64_t i = r0 + r;
      const C li = load_lse<C>(lse, bh * p.tq + i);
      if (li == C(-INFINITY)) continue;  // a fully masked row: no gradient
      s = apply_mask<T>(s * static_cast<C>(p.scale), p, mask, mbase, i, j);
      if (s == C(-INFINITY)) continue;
      const C pr = scalar::fast_exp(s - li);
      const C ds = pr * (dp - load_lse<C>(Dsum, bh * p.tq + i)) * static_cast<C>(p.scale);
#pragma unroll
      for (int e = 0; e < E; ++e) {
        dv[e] += pr * sdo[r * DMAX + e * G + g];
        dk[e] += ds * sq[r * DMAX + e * G + g];
      }
    }
  }
  if (!live) return;
  store_row<T, E, G>(gk + bh * p.tk * p.d, j, p.d, dk, g);
  store_row<T, E, G>(gv + bh * p.tk * p.dv, j, p.dv, dv, g);
}

// --- backward, dQ: a thread group per query row i; K and V tiles in shared memory.
//   dq_i += ds k_j with ds as above
template <class T, int DMAX>
__device__ void attention_bwd_q_rows(int64_t i0, T* gq, const T* q, const T* k, const T* v, const T* gout,
                                     const void* lse, const void* Dsum, const void* mask, const AttentionParams& p) {
  using C = compute_t<T>;
  using L = RowLayout<C, DMAX>;
  constexpr int BC = kTileLen<C, DMAX>, E = L::E, G = L::G;
  extern __shared__ __align__(16) unsigned char smem_raw[];  // read as float or double tiles
  C* sk = reinterpret_cast<C*>(smem_raw);
  C* sv = sk + BC * DMAX;
  const int64_t bh = blockIdx.x;
  const int g = static_cast<int>(threadIdx.x) % G;
  const int64_t i = i0 + threadIdx.x / G;
  const bool live = i < p.tq;
  const int64_t mbase = mask_base(p, bh);

  C qr[E], dor[E], dq[E] = {};
  load_row<T, E, G>(qr, q + bh * p.tq * p.d, i, p.d, live, g);
  load_row<T, E, G>(dor, gout + bh * p.tq * p.dv, i, p.dv, live, g);
  const C li = live ? load_lse<C>(lse, bh * p.tq + i) : C(-INFINITY);
  const C Di = live ? load_lse<C>(Dsum, bh * p.tq + i) : C(0);
  const int64_t jend = p.causal ? (p.tk < i0 + L::R ? p.tk : i0 + L::R) : p.tk;
  for (int64_t j0 = 0; j0 < jend; j0 += BC) {
    __syncthreads();
    stage<T, DMAX>(sk, k + bh * p.tk * p.d, p.d, sv, v + bh * p.tk * p.dv, p.dv, j0, BC, p.tk);
    __syncthreads();
    const int n = static_cast<int>(p.tk - j0 < BC ? p.tk - j0 : BC);
    for (int c = 0; c < n; ++c) {
      C s = dot<E, G>(qr, sk + c * DMAX, g);
      const C dp = dot<E, G>(dor, sv + c * DMAX, g);
      if (li == C(-INFINITY)) continue;  // a dead or fully masked row
      s = apply_mask<T>(s * static_cast<C>(p.scale), p, mask, mbase, i, j0 + c);
      if (s == C(-INFINITY)) continue;
      const C ds = scalar::fast_exp(s - li) * (dp - Di) * static_cast<C>(p.scale);
#pragma unroll
      for (int e = 0; e < E; ++e) dq[e] += ds * sk[c * DMAX + e * G + g];
    }
  }
  if (!live) return;
  store_row<T, E, G>(gq + bh * p.tq * p.d, i, p.d, dq, g);
}

// The kernels: blocks of R rows, walked grid-stride in y (a grid has at most 65535 blocks there).
#define EMBER_ROW_BLOCKS(r0, rows, R) \
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * (R); r0 < (rows); r0 += static_cast<int64_t>(gridDim.y) * (R))

template <class T, int DMAX>
__global__ void __launch_bounds__(kThreads, 1)
    attention_fwd_kernel(T* out, void* lse, const T* q, const T* k, const T* v, const void* mask, AttentionParams p) {
  EMBER_ROW_BLOCKS(i0, p.tq, (RowLayout<compute_t<T>, DMAX>::R))
  attention_fwd_rows<T, DMAX>(i0, out, lse, q, k, v, mask, p);
}
template <class T, int DMAX>
__global__ void __launch_bounds__(kThreads, 1)
    attention_bwd_kv_kernel(T* gk, T* gv, const T* q, const T* k, const T* v, const T* gout, const void* lse,
                            const void* Dsum, const void* mask, AttentionParams p) {
  EMBER_ROW_BLOCKS(j0, p.tk, (RowLayout<compute_t<T>, DMAX>::R))
  attention_bwd_kv_rows<T, DMAX>(j0, gk, gv, q, k, v, gout, lse, Dsum, mask, p);
}
template <class T, int DMAX>
__global__ void __launch_bounds__(kThreads, 1)
    attention_bwd_q_kernel(T* gq, const T* q, const T* k, const T* v, const T* gout, const void* lse, const void* Dsum,
                           const void* mask, AttentionParams p) {
  EMBER_ROW_BLOCKS(i0, p.tq, (RowLayout<compute_t<T>, DMAX>::R))
  attention_bwd_q_rows<T, DMAX>(i0, gq, q, k, v, gout, lse, Dsum, mask, p);
}

// Calls f(std::integral_constant<int, DMAX>) for the smallest register width that holds both d and dv.
template <class F>
void dispatch_width(int64_t d, int64_t dv, F&& f) {
  const int64_t w = d > dv ? d : dv;
  if (w <= 32) return f(std::integral_constant<int, 32>{});
  if (w <= 64) return f(std::integral_constant<int, 64>{});
  if (w <= 128) return f(std::integral_constant<int, 128>{});
  return f(std::integral_constant<int, 256>{});
}

template <class T, int DMAX>
size_t smem_bytes() {
  return static_cast<size_t>(2 * kTileLen<compute_t<T>, DMAX> * DMAX) * sizeof(compute_t<T>);
}

// x: the (batch, head) pairs (up to 2^31 - 1), y: the blocks of rows_per_block rows, at most 65535 (the kernels
// walk the rest).
dim3 grid_for(int64_t rows, int64_t batch_heads, int rows_per_block) {
  const int64_t blocks = CEIL_DIV(rows, static_cast<int64_t>(rows_per_block));
  return dim3(static_cast<unsigned>(batch_heads), static_cast<unsigned>(blocks < 65535 ? blocks : 65535));
}

}  // namespace

void launch_attention(DType type, void* out, void* lse, const void* q, const void* k, const void* v, const void* mask,
                      const AttentionParams& p, CUstream_st* stream) {
  if (p.batch_heads == 0 || p.tq == 0) return;
  dispatch_floating(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_width(p.d, p.dv, [&](auto width) {
      constexpr int W = decltype(width)::value;
      constexpr int R = RowLayout<compute_t<T>, W>::R;
      attention_fwd_kernel<T, W><<<grid_for(p.tq, p.batch_heads, R), kThreads, smem_bytes<T, W>(), stream>>>(
          static_cast<T*>(out), lse, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), mask,
          p);
    });
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_attention_backward(DType type, void* gq, void* gk, void* gv, const void* gout, const void* q, const void* k,
                               const void* v, const void* lse, const void* dsum, const void* mask,
                               const AttentionParams& p, CUstream_st* stream) {
  if (p.batch_heads == 0 || p.tq == 0 || p.tk == 0) return;
  dispatch_floating(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_width(p.d, p.dv, [&](auto width) {
      constexpr int W = decltype(width)::value;
      constexpr int R = RowLayout<compute_t<T>, W>::R;
      attention_bwd_kv_kernel<T, W><<<grid_for(p.tk, p.batch_heads, R), kThreads, smem_bytes<T, W>(), stream>>>(
          static_cast<T*>(gk), static_cast<T*>(gv), static_cast<const T*>(q), static_cast<const T*>(k),
          static_cast<const T*>(v), static_cast<const T*>(gout), lse, dsum, mask, p);
      EMBER_CUDA_CHECK(cudaGetLastError());
      attention_bwd_q_kernel<T, W><<<grid_for(p.tq, p.batch_heads, R), kThreads, smem_bytes<T, W>(), stream>>>(
          static_cast<T*>(gq), static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
          static_cast<const T*>(gout), lse, dsum, mask, p);
    });
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
