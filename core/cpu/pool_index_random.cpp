// defines: the CPU pooling (max / average, NCHW) and its backward, index_select / index_add, and
// Philox-based random fills.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#ifdef __AVX2__
#include <immintrin.h>
#endif
#include <limits>
#include <type_traits>

#include "cpu_backend.h"
#include "parallel.h"

namespace ember::cpu {

namespace {

// Windows that tile the input (kernel == stride, no padding: the usual MaxPool2d(2)). Every input element lies
// in at most one window, so these paths need no bounds per window, and the backward writes each gradient
// element once instead of zero-filling and accumulating.
bool tiles(const Pool2dParams& p) {
  return p.kernel_h == p.stride_h && p.kernel_w == p.stride_w && p.pad_h == 0 && p.pad_w == 0;
}

// The position (within xc, row length W) and value of the first maximum of the kh x kw window at w0, where a
// NaN counts as the maximum (so it propagates), as the general path below decides it.
template <class T>
inline int64_t first_max(const T* xc, int64_t W, int64_t kh, int64_t kw, T& m) {
  int64_t best = 0;
  m = xc[0];
  for (int64_t h = 0; h < kh; ++h)
    for (int64_t w = 0; w < kw; ++w) {
      const T v = xc[h * W + w];
      if (v > m || (v != v && m == m)) { m = v; best = h * W + w; }
    }
  return best;
}

template <class T>
void pool_tiles_forward(PoolKind kind, const T* xc, T* oc, int64_t W, int64_t OH, int64_t OW, int64_t kh, int64_t kw) {
  const double inv_area = 1.0 / static_cast<double>(kh * kw);
  for (int64_t oh = 0; oh < OH; ++oh) {
    const T* row = xc + oh * kh * W;
    T* o = oc + oh * OW;
    if (kind == PoolKind::Max && kh == 2 && kw == 2) {  // the common case, written out so it vectorises
      const T* r1 = row + W;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const T a = row[2 * ow], b = row[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
        const T ab = (b > a || b != b) ? b : a, cd = (d > c || d != d) ? d : c;
        o[ow] = (cd > ab || (cd != cd && ab == ab)) ? cd : ab;
      }
    } else if (kind == PoolKind::Max) {
      for (int64_t ow = 0; ow < OW; ++ow) first_max(row + ow * kw, W, kh, kw, o[ow]);
    } else {
      for (int64_t ow = 0; ow < OW; ++ow) {
        double s = 0;
        for (int64_t h = 0; h < kh; ++h)
          for (int64_t w = 0; w < kw; ++w) s += row[h * W + ow * kw + w];
        o[ow] = static_cast<T>(s * inv_area);
      }
    }
  }
}

// One output row of the 2x2 max-pool backward: for window ow (x rows r0/r1, columns 2ow and 2ow+1) the
// gradient g[ow] goes to the first maximum (a NaN counts as the maximum), zeros to the other three.
// x where keep, else exactly 0, by masking the bits: a select the compiler cannot turn into a branch (which
// element of a window wins is data, not predictable) and, unlike g * keep, exact for NaN and infinite g.
template <class T>
inline T keep_or_zero(bool keep, T x) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  return std::bit_cast<T>(static_cast<U>(std::bit_cast<U>(x) & (U{0} - static_cast<U>(keep))));
}

template <class T>
inline T pick(bool first, T x, T y) {  // first ? x : y, by the same bit masking
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const U m = U{0} - static_cast<U>(first);
  return std::bit_cast<T>(static_cast<U>((std::bit_cast<U>(x) & m) | (std::bit_cast<U>(y) & ~m)));
}

template <class T>
void max2x2_backward_scalar(const T* r0, const T* r1, const T* g, T* o0, T* o1, int64_t ow, int64_t OW) {
  for (; ow < OW; ++ow) {
    const T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
    // a later element wins over the running maximum when greater, or when it is the first NaN
    // (bitwise | and & on purpose: short-circuit operators would compile to branches)
    const bool tb = (b > a) | ((b != b) & (a == a));
    const T m1 = pick(tb, b, a);
    const bool tc = (c > m1) | ((c != c) & (m1 == m1));
    const T m2 = pick(tc, c, m1);
    const bool td = (d > m2) | ((d != d) & (m2 == m2));
    o0[2 * ow] = keep_or_zero(!(tb | tc | td), g[ow]);
    o0[2 * ow + 1] = keep_or_zero(tb & !(tc | td), g[ow]);
    o1[2 * ow] = keep_or_zero(tc & !td, g[ow]);
    o1[2 * ow + 1] = keep_or_zero(td, g[ow]);
  }
}

#ifdef __AVX2__
// The same for float, 8 windows at a time: even/odd columns are split apart, the three "later element wins"
// masks computed as above, and the four gradient planes interleaved back. Returns the windows done.
int64_t max2x2_backward_avx2(const float* r0, const float* r1, const float* g, float* o0, float* o1, int64_t OW) {
  // k = 8 windows use whole vectors; a last group of k < 8 (all of them when OW < 8, e.g. 14x14 -> 7x7) uses
  // masked loads and stores of the first 2k columns, so no window is left to a scalar loop.
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const auto first = [&](int64_t n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lane); };
  // Lane order after _mm256_shuffle_ps(lo, hi, ...) is [lo 0..3 | hi 0..3] per 128-bit half; this fixes it.
  const auto split = [&](const float* p, int64_t k, __m256& even, __m256& odd) {
    const __m256 lo = k == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, first(2 * k));
    const __m256 hi = k == 8 ? _mm256_loadu_ps(p + 8) : _mm256_maskload_ps(p + 8, first(2 * k - 8));
    even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
    odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
  };
  // later v wins over the running maximum m: v > m, or v is the first NaN
  const auto wins = [](__m256 v, __m256 m) {
    return _mm256_or_ps(_mm256_cmp_ps(v, m, _CMP_GT_OQ),
                        _mm256_andnot_ps(_mm256_cmp_ps(m, m, _CMP_UNORD_Q), _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  };
  // interleave even/odd planes back into 2k consecutive columns
  const auto store = [&](float* p, int64_t k, __m256 even, __m256 odd) {
    const __m256 l = _mm256_unpacklo_ps(even, odd), h = _mm256_unpackhi_ps(even, odd);
    const __m256 lo = _mm256_permute2f128_ps(l, h, 0x20), hi = _mm256_permute2f128_ps(l, h, 0x31);
    if (k == 8) {
      _mm256_storeu_ps(p, lo);
      _mm256_storeu_ps(p + 8, hi);
    } else {
      _mm256_maskstore_ps(p, first(2 * k), lo);
      _mm256_maskstore_ps(p + 8, first(2 * k - 8), hi);
    }
  };
  for (int64_t ow = 0; ow < OW; ow += 8) {
    const int64_t k = std::min<int64_t>(8, OW - ow);
    __m256 a, b, c, d;
    split(r0 + 2 * ow, k, a, b);
    split(r1 + 2 * ow, k, c, d);
    const __m256 gv = k == 8 ? _mm256_loadu_ps(g + ow) : _mm256_maskload_ps(g + ow, first(k));
    const __m256 tb = wins(b, a);
    const __m256 m1 = _mm256_blendv_ps(a, b, tb);
    const __m256 tc = wins(c, m1);
    const __m256 m2 = _mm256_blendv_ps(m1, c, tc);
    const __m256 td = wins(d, m2);
    const __m256 later_cd = _mm256_or_ps(tc, td);
    const __m256 ga = _mm256_andnot_ps(_mm256_or_ps(tb, later_cd), gv);
    const __m256 gb = _mm256_and_ps(_mm256_andnot_ps(later_cd, tb), gv);
    const __m256 gc = _mm256_and_ps(_mm256_andnot_ps(td, tc), gv);
    const __m256 gd = _mm256_and_ps(td, gv);
    store(o0 + 2 * ow, k, ga, gb);
    store(o1 + 2 * ow, k, gc, gd);
  }
  return OW;
}
#endif

template <class T>
void max2x2_backward_row(const T* r0, const T* r1, const T* g, T* o0, T* o1, int64_t OW) {
  int64_t done = 0;
#ifdef __AVX2__
  if constexpr (std::is_same_v<T, float>) done = max2x2_backward_avx2(r0, r1, g, o0, o1, OW);
#endif
  max2x2_backward_scalar(r0, r1, g, o0, o1, done, OW);
}

template <class T>
void pool_tiles_backward(PoolKind kind, const T* xc, const T* gc, T* gxc, int64_t H, int64_t W, int64_t OH, int64_t OW,
                         int64_t kh, int64_t kw) {
  // Rows and columns past the last whole window get no gradient.
  if (OH * kh != H || OW * kw != W) std::fill(gxc, gxc + H * W, T(0));
  const T inv_area = static_cast<T>(1.0 / static_cast<double>(kh * kw));
  for (int64_t oh = 0; oh < OH; ++oh) {
    const int64_t base = oh * kh * W;
    if (kind == PoolKind::Max && kh == 2 && kw == 2) {
      max2x2_backward_row(xc + base, xc + base + W, gc + oh * OW, gxc + base, gxc + base + W, OW);
      continue;
    }
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t w0 = base + ow * kw;
      const T g = gc[oh * OW + ow];
      if (kind == PoolKind::Max) {
        T m;
        const int64_t best = first_max(xc + w0, W, kh, kw, m);
        for (int64_t h = 0; h < kh; ++h)
          for (int64_t w = 0; w < kw; ++w) gxc[w0 + h * W + w] = h * W + w == best ? g : T(0);
      } else {
        for (int64_t h = 0; h < kh; ++h)
          for (int64_t w = 0; w < kw; ++w) gxc[w0 + h * W + w] = g * inv_area;
      }
    }
  }
}

}  // namespace

void CpuBackend::pool2d(PoolKind kind, const Tensor& out, const Tensor& x_in, const Pool2dParams& p) {
  if (is_reduced_float(out.dtype())) {
    Tensor tmp = float_buffer_like(out);
    pool2d(kind, tmp, upcast(x_in), p);
    copy(out, tmp);
    return;
  }
  Tensor x = raw::contiguous(x_in);
  const int64_t NC = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (!std::is_floating_point_v<T>) {
      throw InternalError("cpu pool2d: floating dtype expected");
    } else {
      const T* xp = static_cast<const T*>(x.data_ptr());
      T* op = static_cast<T*>(out.data_ptr());
      const double inv_area = 1.0 / static_cast<double>(p.kernel_h * p.kernel_w);
      parallel_for(0, NC, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, H * W)), [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          const T* xc = xp + c * H * W;
          T* oc = op + c * OH * OW;
          if (tiles(p)) {
            pool_tiles_forward(kind, xc, oc, W, OH, OW, p.kernel_h, p.kernel_w);
            continue;
          }
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
              const int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
              const int64_t hs = std::max<int64_t>(h0, 0), he = std::min(h0 + p.kernel_h, H);
              const int64_t ws = std::max<int64_t>(w0, 0), we = std::min(w0 + p.kernel_w, W);
              if (kind == PoolKind::Max) {
                T m = -std::numeric_limits<T>::infinity();
                for (int64_t h = hs; h < he; ++h)
                  for (int64_t w = ws; w < we; ++w) {
                    T v = xc[h * W + w];
                    if (v > m || std::isnan(v)) m = v;
                    if (std::isnan(m)) break;
                  }
                oc[oh * OW + ow] = m;
              } else {
                double s = 0;
                for (int64_t h = hs; h < he; ++h)
                  for (int64_t w = ws; w < we; ++w) s += xc[h * W + w];
                oc[oh * OW + ow] = static_cast<T>(s * inv_area);
              }
            }
        }
      });
    }
  });
}

void CpuBackend::pool2d_backward(PoolKind kind, const Tensor& gx, const Tensor& gy_in, const Tensor& x_in,
                                 const Pool2dParams& p) {
  if (is_reduced_float(gx.dtype())) {
    Tensor tmp = float_buffer_like(gx);
    pool2d_backward(kind, tmp, upcast(gy_in), upcast(x_in), p);
    copy(gx, tmp);
    return;
  }
  Tensor x = raw::contiguous(x_in), gy = raw::contiguous(gy_in);
  const int64_t NC = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), OH = gy.size(2), OW = gy.size(3);
  visit_dtype(gx.dtype(), [&]<class T>() {
    if constexpr (!std::is_floating_point_v<T>) {
      throw InternalError("cpu pool2d_backward: floating dtype expected");
    } else {
      const T* xp = static_cast<const T*>(x.data_ptr());
      const T* gyp = static_cast<const T*>(gy.data_ptr());
      T* gxp = static_cast<T*>(gx.data_ptr());
      const T inv_area = static_cast<T>(1.0 / static_cast<double>(p.kernel_h * p.kernel_w));
      parallel_for(0, NC, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, H * W)), [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          const T* xc = xp + c * H * W;
          const T* gc = gyp + c * OH * OW;
          T* gxc = gxp + c * H * W;
          if (tiles(p)) {
            pool_tiles_backward(kind, xc, gc, gxc, H, W, OH, OW, p.kernel_h, p.kernel_w);
            continue;
          }
          std::fill(gxc, gxc + H * W, T(0));
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
              const int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
              const int64_t hs = std::max<int64_t>(h0, 0), he = std::min(h0 + p.kernel_h, H);
              const int64_t ws = std::max<int64_t>(w0, 0), we = std::min(w0 + p.kernel_w, W);
              const T g = gc[oh * OW + ow];
              if (kind == PoolKind::Max) {  // the same first maximum the forward picked
                int64_t best = -1;
                T m = -std::numeric_limits<T>::infinity();
                for (int64_t h = hs; h < he && !(best >= 0 && std::isnan(m)); ++h)
                  for (int64_t w = ws; w < we; ++w) {
                    const T v = xc[h * W + w];
                    if (best < 0 || v > m || std::isnan(v)) { m = v; best = h * W + w; }
                    if (std::isnan(m)) break;
                  }
                if (best >= 0) gxc[best] += g;
              } else {
                for (int64_t h = hs; h < he; ++h)
                  for (int64_t w = ws; w < we; ++w) gxc[h * W + w] += g * inv_area;
              }
            }
        }
      });
    }
  });
}

void CpuBackend::index_add(const Tensor& out, int64_t dim, const Tensor& index_in, const Tensor& src_in) {
  if (is_reduced_float(out.dtype())) {
    Tensor tmp = raw::cast(out, kFloat32);
    index_add(tmp, dim, index_in, upcast(src_in));
    copy(out, tmp);
    return;
  }
  Tensor src = raw::contiguous(src_in), index = raw::contiguous(index_in);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.size(d);
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.size(d);
  const int64_t D = out.size(dim), n = index.numel();
  const int64_t* idx = static_cast<const int64_t*>(index.data_ptr());
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (is_reduced_v<T>) {
      throw InternalError("unreachable");
    } else {
      T* op = static_cast<T*>(out.data_ptr());
      const T* sp = static_cast<const T*>(src.data_ptr());
      // Parallel over the outer dims only: repeated indices within one outer slice add up in order.
      parallel_for(0, outer, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, n * inner)), [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o)
          for (int64_t i = 0; i < n; ++i) {
            T* dst = op + (o * D + idx[i]) * inner;
            const T* s = sp + (o * n + i) * inner;
            for (int64_t k = 0; k < inner; ++k) dst[k] = static_cast<T>(dst[k] + s[k]);
          }
      });
    }
  });
}

void CpuBackend::index_select(const Tensor& out, const Tensor& x_in, int64_t dim, const Tensor& index_in) {
  Tensor x = raw::contiguous(x_in), index = raw::contiguous(index_in);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t D = x.size(dim), n = index.numel();
  const size_t row = static_cast<size_t>(inner) * x.itemsize();
  const char* xp = static_cast<const char*>(x.data_ptr());
  char* op = static_cast<char*>(out.data_ptr());
  const int64_t* idx = static_cast<const int64_t*>(index.data_ptr());
  if (out.numel() == 0) return;
  parallel_for(0, outer * n, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / n, i = r % n;
      std::memcpy(op + static_cast<size_t>(r) * row, xp + static_cast<size_t>(o * D + idx[i]) * row, row);
    }
  });
}

// --- Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11)
namespace {
struct Philox {
  uint32_t out[4];
  Philox(uint64_t seed, uint64_t counter) {
    uint32_t c[4] = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0};
    uint32_t k[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
    for (int r = 0; r < 10; ++r) {
      const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
      const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0];
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1];
      c[0] = n0; c[1] = static_cast<uint32_t>(p1); c[2] = n2; c[3] = static_cast<uint32_t>(p0);
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    for (int i = 0; i < 4; ++i) out[i] = c[i];
  }
};
inline double u01(uint32_t u) { return static_cast<double>(u) * (1.0 / 4294967296.0); }  // [0, 1)
}  // namespace

void CpuBackend::random(RandomKind kind, const Tensor& out, double lo, double hi, PhiloxState st) {
  const int64_t n = out.numel();
  const int64_t blocks = (n + 3) / 4;
  visit_dtype(out.dtype(), [&]<class T>() {
    T* o = static_cast<T*>(out.data_ptr());
    // Element i comes from block (offset + i / 4), lane i % 4, whatever thread computes it.
    parallel_for(0, blocks, 2048, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        Philox ph(st.seed, st.offset + static_cast<uint64_t>(blk));
        double v[4];
        if (kind == RandomKind::Normal) {  // Box-Muller on lanes (0, 1) and (2, 3)
          for (int j = 0; j < 4; j += 2) {
            const double r = std::sqrt(-2.0 * std::log(1.0 - u01(ph.out[j])));  // 1 - u in (0, 1]
            const double th = 2.0 * M_PI * u01(ph.out[j + 1]);
            v[j] = lo + hi * r * std::cos(th);
            v[j + 1] = lo + hi * r * std::sin(th);
          }
        } else if (kind == RandomKind::Int) {
          const uint64_t range = static_cast<uint64_t>(hi - lo);
          for (int j = 0; j < 4; ++j) v[j] = lo + static_cast<double>((static_cast<uint64_t>(ph.out[j]) * range) >> 32);
        } else {
          for (int j = 0; j < 4; ++j) {
            double u = lo + (hi - lo) * u01(ph.out[j]);
            // keep the interval half-open after rounding to T
            if constexpr (std::is_same_v<T, float> || is_reduced_v<T>) {
              if (static_cast<double>(static_cast<float>(convert<T>(u))) >= hi) u = lo;
            }
            v[j] = u;
          }
        }
        for (int j = 0; j < 4; ++j) {
          const int64_t i = blk * 4 + j;
          if (i < n) o[i] = convert<T>(v[j]);
        }
      }
    });
  });
}

}  // namespace ember::cpu
