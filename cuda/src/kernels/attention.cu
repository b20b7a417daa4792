// defines: the attention kernels and their launchers (launch.h): a flash-attention-style forward and a two-kernel
// backward that never materialise the [Tq, Tk] scores. Each thread owns one row (a query row in the forward and
// in the dQ kernel, a key row in the dK/dV kernel) and keeps its vectors in registers; the block walks the other
// side in tiles staged in shared memory, so every K/V (or Q/dO) element is read from global memory once per
// block. The forward's softmax is online (running max m and sum l, rescaled when the max grows); it stores the
// row's log-sum-exp, from which the backward recomputes each probability. float16/bfloat16 load into float and
// compute in float. The dQ pass is a separate kernel (rows owned by threads again) rather than atomics: no
// contention and a deterministic result.
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

constexpr int kRowsPerBlock = 64;          // threads per block = rows owned
constexpr int kTileBytes = 32 * 1024;      // shared memory for one staged tile pair

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

// --- forward: one thread per query row; K and V tiles in shared memory.
template <class T, int DMAX>
__global__ void attention_fwd_kernel(T* out, void* lse_out, const T* q, const T* k, const T* v, const void* mask,
                                     AttentionParams p) {
  using C = compute_t<T>;
  constexpr int BC = kTileLen<C, DMAX>;
  extern __shared__ __align__(16) unsigned char smem_raw[];  // read as float or double tiles
  C* sk = reinterpret_cast<C*>(smem_raw);
  C* sv = sk + BC * DMAX;
  const int64_t bh = blockIdx.x;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kRowsPerBlock, i = i0 + threadIdx.x;
  const bool live = i < p.tq;
  const T* qb = q + bh * p.tq * p.d;
  const T* kb = k + bh * p.tk * p.d;
  const T* vb = v + bh * p.tk * p.dv;
  const int64_t mbase = mask_base(p, bh);

  C qr[DMAX], acc[DMAX];
#pragma unroll
  for (int c = 0; c < DMAX; ++c) {
    qr[c] = live && c < p.d ? load_c(qb[i * p.d + c]) : C(0);
    acc[c] = 0;
  }
  C m = C(-INFINITY), l = 0;
  const int64_t jend = p.causal ? (p.tk < i0 + kRowsPerBlock ? p.tk : i0 + kRowsPerBlock) : p.tk;
  for (int64_t j0 = 0; j0 < jend; j0 += BC) {
    __syncthreads();  // the previous tile is no longer read
    stage<T, DMAX>(sk, kb, p.d, sv, vb, p.dv, j0, BC, p.tk);
    __syncthreads();
    if (!live) continue;
    const int n = static_cast<int>(p.tk - j0 < BC ? p.tk - j0 : BC);
    for (int c = 0; c < n; ++c) {
      C s = 0;
#pragma unroll
      for (int e = 0; e < DMAX; ++e) s += qr[e] * sk[c * DMAX + e];
      s = apply_mask<T>(s * static_cast<C>(p.scale), p, mask, mbase, i, j0 + c);
      if (s == C(-INFINITY)) continue;
      // online softmax: a new maximum rescales what was summed so far
      C w;
      if (s > m) {
        const C alpha = scalar::fast_exp(m - s);
        l *= alpha;
#pragma unroll
        for (int e = 0; e < DMAX; ++e) acc[e] *= alpha;
        m = s;
        w = 1;
      } else {
        w = scalar::fast_exp(s - m);
      }
      l += w;
#pragma unroll
      for (int e = 0; e < DMAX; ++e) acc[e] += w * sv[c * DMAX + e];
    }
  }
  if (!live) return;
  const C inv = l > C(0) ? C(1) / l : C(0);
  T* o = out + (bh * p.tq + i) * p.dv;
  for (int e = 0; e < DMAX && e < p.dv; ++e) o[e] = store_c<T>(acc[e] * inv);
  // lse is float32 (float64 for float64 inputs)
  const C lse = l > C(0) ? m + static_cast<C>(::log(static_cast<double>(l))) : C(-INFINITY);
  if constexpr (std::is_same<T, double>::value) static_cast<double*>(lse_out)[bh * p.tq + i] = lse;
  else static_cast<float*>(lse_out)[bh * p.tq + i] = static_cast<float>(lse);
}

template <class C>
__device__ inline C load_lse(const void* lse, int64_t at) {
  if constexpr (std::is_same<C, double>::value) return static_cast<const double*>(lse)[at];
  else return static_cast<const float*>(lse)[at];
}

// --- backward, dK and dV: one thread per key row j; Q and dO tiles in shared memory, lse and D per query row.
//   p = exp(s - lse_i), dv_j += p dO_i, ds = p (dO_i . v_j - D_i) scale, dk_j += ds q_i
template <class T, int DMAX>
__global__ void attention_bwd_kv_kernel(T* gk, T* gv, const T* q, const T* k, const T* v, const T* gout,
                                        const void* lse, const void* Dsum, const void* mask, AttentionParams p) {
  using C = compute_t<T>;
  constexpr int BR = kTileLen<C, DMAX>;
  extern __shared__ __align__(16) unsigned char smem_raw[];  // read as float or double tiles
  C* sq = reinterpret_cast<C*>(smem_raw);
  C* sdo = sq + BR * DMAX;
  const int64_t bh = blockIdx.x;
  const int64_t j0 = static_cast<int64_t>(blockIdx.y) * kRowsPerBlock, j = j0 + threadIdx.x;
  const bool live = j < p.tk;
  const T* qb = q + bh * p.tq * p.d;
  const T* gob = gout + bh * p.tq * p.dv;
  const int64_t mbase = mask_base(p, bh);

  C kr[DMAX], vr[DMAX], dk[DMAX], dv[DMAX];
#pragma unroll
  for (int c = 0; c < DMAX; ++c) {
    kr[c] = live && c < p.d ? load_c(k[(bh * p.tk + j) * p.d + c]) : C(0);
    vr[c] = live && c < p.dv ? load_c(v[(bh * p.tk + j) * p.dv + c]) : C(0);
    dk[c] = dv[c] = 0;
  }
  // under the causal rule, queries before j0 see none of this block's keys
  for (int64_t r0 = p.causal ? j0 : 0; r0 < p.tq; r0 += BR) {
    __syncthreads();
    stage<T, DMAX>(sq, qb, p.d, sdo, gob, p.dv, r0, BR, p.tq);
    __syncthreads();
    if (!live) continue;
    const int n = static_cast<int>(p.tq - r0 < BR ? p.tq - r0 : BR);
    for (int r = 0; r < n; ++r) {
      const int64_t i = r0 + r;
      const C li = load_lse<C>(lse, bh * p.tq + i);
      if (li == C(-INFINITY)) continue;  // a fully masked row: no gradient
      C s = 0, dp = 0;
#pragma unroll
      for (int e = 0; e < DMAX; ++e) {
        s += sq[r * DMAX + e] * kr[e];
        dp += sdo[r * DMAX + e] * vr[e];
      }
      s = apply_mask<T>(s * static_cast<C>(p.scale), p, mask, mbase, i, j);
      if (s == C(-INFINITY)) continue;
      const C pr = scalar::fast_exp(s - li);
      const C ds = pr * (dp - load_lse<C>(Dsum, bh * p.tq + i)) * static_cast<C>(p.scale);
#pragma unroll
      for (int e = 0; e < DMAX; ++e) {
        dv[e] += pr * sdo[r * DMAX + e];
        dk[e] += ds * sq[r * DMAX + e];
      }
    }
  }
  if (!live) return;
  for (int e = 0; e < DMAX && e < p.d; ++e) gk[(bh * p.tk + j) * p.d + e] = store_c<T>(dk[e]);
  for (int e = 0; e < DMAX && e < p.dv; ++e) gv[(bh * p.tk + j) * p.dv + e] = store_c<T>(dv[e]);
}

// --- backward, dQ: one thread per query row i; K and V tiles in shared memory.
//   dq_i += ds k_j with ds as above
template <class T, int DMAX>
__global__ void attention_bwd_q_kernel(T* gq, const T* q, const T* k, const T* v, const T* gout, const void* lse,
                                       const void* Dsum, const void* mask, AttentionParams p) {
  using C = compute_t<T>;
  constexpr int BC = kTileLen<C, DMAX>;
  extern __shared__ __align__(16) unsigned char smem_raw[];  // read as float or double tiles
  C* sk = reinterpret_cast<C*>(smem_raw);
  C* sv = sk + BC * DMAX;
  const int64_t bh = blockIdx.x;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kRowsPerBlock, i = i0 + threadIdx.x;
  const bool live = i < p.tq;
  const int64_t mbase = mask_base(p, bh);

  C qr[DMAX], dor[DMAX], dq[DMAX];
#pragma unroll
  for (int c = 0; c < DMAX; ++c) {
    qr[c] = live && c < p.d ? load_c(q[(bh * p.tq + i) * p.d + c]) : C(0);
    dor[c] = live && c < p.dv ? load_c(gout[(bh * p.tq + i) * p.dv + c]) : C(0);
    dq[c] = 0;
  }
  const C li = live ? load_lse<C>(lse, bh * p.tq + i) : C(-INFINITY);
  const C Di = live ? load_lse<C>(Dsum, bh * p.tq + i) : C(0);
  const int64_t jend = p.causal ? (p.tk < i0 + kRowsPerBlock ? p.tk : i0 + kRowsPerBlock) : p.tk;
  for (int64_t j0 = 0; j0 < jend; j0 += BC) {
    __syncthreads();
    stage<T, DMAX>(sk, k + bh * p.tk * p.d, p.d, sv, v + bh * p.tk * p.dv, p.dv, j0, BC, p.tk);
    __syncthreads();
    if (!live || li == C(-INFINITY)) continue;
    const int n = static_cast<int>(p.tk - j0 < BC ? p.tk - j0 : BC);
    for (int c = 0; c < n; ++c) {
      C s = 0, dp = 0;
#pragma unroll
      for (int e = 0; e < DMAX; ++e) {
        s += qr[e] * sk[c * DMAX + e];
        dp += dor[e] * sv[c * DMAX + e];
      }
      s = apply_mask<T>(s * static_cast<C>(p.scale), p, mask, mbase, i, j0 + c);
      if (s == C(-INFINITY)) continue;
      const C ds = scalar::fast_exp(s - li) * (dp - Di) * static_cast<C>(p.scale);
#pragma unroll
      for (int e = 0; e < DMAX; ++e) dq[e] += ds * sk[c * DMAX + e];
    }
  }
  if (!live) return;
  for (int e = 0; e < DMAX && e < p.d; ++e) gq[(bh * p.tq + i) * p.d + e] = store_c<T>(dq[e]);
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

// x: the (batch, head) pairs (up to 2^31 - 1), y: the row blocks (up to 65535, i.e. T up to 4 million).
dim3 grid_for(int64_t rows, int64_t batch_heads) {
  return dim3(static_cast<unsigned>(batch_heads),
              static_cast<unsigned>(CEIL_DIV(rows, static_cast<int64_t>(kRowsPerBlock))));
}

}  // namespace

void launch_attention(DType type, void* out, void* lse, const void* q, const void* k, const void* v,
                      const void* mask, const AttentionParams& p, CUstream_st* stream) {
  if (p.batch_heads == 0 || p.tq == 0) return;
  dispatch_floating(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_width(p.d, p.dv, [&](auto width) {
      constexpr int W = decltype(width)::value;
      attention_fwd_kernel<T, W><<<grid_for(p.tq, p.batch_heads), kRowsPerBlock, smem_bytes<T, W>(), stream>>>(
          static_cast<T*>(out), lse, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
          mask, p);
    });
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_attention_backward(DType type, void* gq, void* gk, void* gv, const void* gout, const void* q,
                               const void* k, const void* v, const void* lse, const void* dsum, const void* mask,
                               const AttentionParams& p, CUstream_st* stream) {
  if (p.batch_heads == 0 || p.tq == 0 || p.tk == 0) return;
  dispatch_floating(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_width(p.d, p.dv, [&](auto width) {
      constexpr int W = decltype(width)::value;
      attention_bwd_kv_kernel<T, W><<<grid_for(p.tk, p.batch_heads), kRowsPerBlock, smem_bytes<T, W>(), stream>>>(
          static_cast<T*>(gk), static_cast<T*>(gv), static_cast<const T*>(q), static_cast<const T*>(k),
          static_cast<const T*>(v), static_cast<const T*>(gout), lse, dsum, mask, p);
      EMBER_CUDA_CHECK(cudaGetLastError());
      attention_bwd_q_kernel<T, W><<<grid_for(p.tq, p.batch_heads), kRowsPerBlock, smem_bytes<T, W>(), stream>>>(
          static_cast<T*>(gq), static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
          static_cast<const T*>(gout), lse, dsum, mask, p);
    });
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
