// defines: the CPU pooling (max / average, NCHW) and its backward, channel by channel. Windows that tile the
// input (kernel == stride, no padding) take fast paths; 2x2 max pooling of float rows is vectorised (AVX2, or AVX-512
// in that variant); 16-bit channels are widened into per-task float buffers and rounded once (for_channels).
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <type_traits>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "cpu_backend.h"
#include "ember/internal/conv_channels_last.h"
#include "lanes.h"
#include "parallel.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

namespace {

// Windows that tile the input (kernel == stride, no padding: the usual MaxPool2d(2)). Every input element lies
// in at most one window, so these paths need no bounds per window, and the backward writes each gradient
// element once instead of zero-filling and accumulating.
bool tiles(const Pool2dParams& p) {
  return p.kernel_h == p.stride_h && p.kernel_w == p.stride_w && p.pad_h == 0 && p.pad_w == 0;
}

// A window's rows [hs, he) and columns [ws, we) in the input, clipped to it (padding reads nothing).
struct WindowRange {
  int64_t hs, he, ws, we;
};
inline WindowRange window_at(const Pool2dParams& p, int64_t oh, int64_t ow, int64_t H, int64_t W) {
  const int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
  return {std::max<int64_t>(h0, 0), std::min(h0 + p.kernel_h, H), std::max<int64_t>(w0, 0),
          std::min(w0 + p.kernel_w, W)};
}

// The position (within xc, row length W) and value m of the window's first maximum, a NaN counting as the maximum
// (the first NaN wins, so it propagates); -1 and -inf for an empty window. The forward's value and the backward's
// position both come from here, so the gradient always goes where the forward's maximum was.
template <class T>
inline int64_t first_max(const T* xc, int64_t W, const WindowRange& r, T& m) {
  int64_t best = -1;
  m = -std::numeric_limits<T>::infinity();
  for (int64_t h = r.hs; h < r.he; ++h)
    for (int64_t w = r.ws; w < r.we; ++w) {
      const T v = xc[h * W + w];
      if (best < 0 || v > m || v != v) {
        m = v;
        best = h * W + w;
        if (v != v) return best;
      }
    }
  return best;
}

#ifdef __AVX2__
// 2x2 windows of float rows, 8 at a time: the even and odd columns of two rows give the window's four
// elements a b / c d as four vectors. A last group of k < 8 windows (all of them when OW < 8, e.g.
// 14x14 -> 7x7) uses masked loads and stores of its first 2k columns, so no window is left to scalar code.
namespace avx {
using lanes::load;  // the first n (<= 8) floats (lanes.h)
using lanes::store;
// columns 2i and 2i + 1 of p, for the first k windows
inline void split(const float* p, int64_t k, __m256& even, __m256& odd) {
  const __m256 lo = load(p, 2 * k), hi = load(p + 8, 2 * k - 8);
  // _mm256_shuffle_ps works per 128-bit half ([lo 0..3 | hi 0..3]); the permute puts the halves in order
  even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
  odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
}
// the inverse of split: 2k consecutive columns from the even and odd planes
inline void merge(float* p, int64_t k, __m256 even, __m256 odd) {
  const __m256 l = _mm256_unpacklo_ps(even, odd), h = _mm256_unpackhi_ps(even, odd);
  store(p, 2 * k, _mm256_permute2f128_ps(l, h, 0x20));
  store(p + 8, 2 * k - 8, _mm256_permute2f128_ps(l, h, 0x31));
}
// a later element v takes over from the running maximum m: v > m, or v is the first NaN
inline __m256 wins(__m256 v, __m256 m) {
  return _mm256_or_ps(_mm256_cmp_ps(v, m, _CMP_GT_OQ),
                      _mm256_andnot_ps(_mm256_cmp_ps(m, m, _CMP_UNORD_Q), _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
}
}  // namespace avx

// One output row of the 2x2 max pool (x rows r0, r1). Returns the windows done (all).
[[maybe_unused]] int64_t max2x2_forward_avx2(const float* r0, const float* r1, float* o, int64_t OW) {
  for (int64_t ow = 0; ow < OW; ow += 8) {
    const int64_t k = std::min<int64_t>(8, OW - ow);
    __m256 a, b, c, d;
    avx::split(r0 + 2 * ow, k, a, b);
    avx::split(r1 + 2 * ow, k, c, d);
    const __m256 m1 = _mm256_blendv_ps(a, b, avx::wins(b, a));
    const __m256 m2 = _mm256_blendv_ps(m1, c, avx::wins(c, m1));
    avx::store(o + ow, k, _mm256_blendv_ps(m2, d, avx::wins(d, m2)));
  }
  return OW;
}

// One output row of the 2x2 max-pool backward: the three "later element wins" masks as in the forward,
// then each gradient goes to its window's winner and zeros to the other three. Returns the windows done.
[[maybe_unused]] int64_t max2x2_backward_avx2(const float* r0, const float* r1, const float* g, float* o0, float* o1,
                                              int64_t OW) {
  for (int64_t ow = 0; ow < OW; ow += 8) {
    const int64_t k = std::min<int64_t>(8, OW - ow);
    __m256 a, b, c, d;
    avx::split(r0 + 2 * ow, k, a, b);
    avx::split(r1 + 2 * ow, k, c, d);
    const __m256 gv = avx::load(g + ow, k);
    const __m256 tb = avx::wins(b, a);
    const __m256 m1 = _mm256_blendv_ps(a, b, tb);
    const __m256 tc = avx::wins(c, m1);
    const __m256 m2 = _mm256_blendv_ps(m1, c, tc);
    const __m256 td = avx::wins(d, m2);
    const __m256 later_cd = _mm256_or_ps(tc, td);
    avx::merge(o0 + 2 * ow, k, _mm256_andnot_ps(_mm256_or_ps(tb, later_cd), gv),
               _mm256_and_ps(_mm256_andnot_ps(later_cd, tb), gv));
    avx::merge(o1 + 2 * ow, k, _mm256_and_ps(_mm256_andnot_ps(td, tc), gv), _mm256_and_ps(td, gv));
  }
  return OW;
}
#endif

#ifdef __AVX512F__
// The same two rows, 16 windows at a time in the AVX-512 variant (a CNN's 28 x 28 planes: 14 windows a row in one
// step, not 8 + a masked 6), with mask registers for the "later element wins" tests and the tails.
namespace avx512 {
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : static_cast<__mmask16>((1u << n) - 1);
}
// columns 2i and 2i + 1 of p, for the first k (<= 16) windows
inline void split(const float* p, int64_t k, __m512& even, __m512& odd) {
  const __m512 lo = _mm512_maskz_loadu_ps(first_lanes(2 * k), p);
  const __m512 hi = _mm512_maskz_loadu_ps(first_lanes(2 * k - 16), p + 16);
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  even = _mm512_permutex2var_ps(lo, evens, hi);
  odd = _mm512_permutex2var_ps(lo, _mm512_add_epi32(evens, _mm512_set1_epi32(1)), hi);
}
// the inverse: 2k consecutive columns from the even and odd planes
inline void merge(float* p, int64_t k, __m512 even, __m512 odd) {
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  _mm512_mask_storeu_ps(p, first_lanes(2 * k), _mm512_permutex2var_ps(even, lo, odd));
  _mm512_mask_storeu_ps(p + 16, first_lanes(2 * k - 16),
                        _mm512_permutex2var_ps(even, _mm512_add_epi32(lo, _mm512_set1_epi32(8)), odd));
}
// a later element v takes over from the running maximum m: v > m, or v is the first NaN
inline __mmask16 wins(__m512 v, __m512 m) {
  return _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) |
         (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & ~_mm512_cmp_ps_mask(m, m, _CMP_UNORD_Q));
}
}  // namespace avx512

int64_t max2x2_forward_avx512(const float* r0, const float* r1, float* o, int64_t OW) {
  for (int64_t ow = 0; ow < OW; ow += 16) {
    const int64_t k = std::min<int64_t>(16, OW - ow);
    __m512 a, b, c, d;
    avx512::split(r0 + 2 * ow, k, a, b);
    avx512::split(r1 + 2 * ow, k, c, d);
    const __m512 m1 = _mm512_mask_blend_ps(avx512::wins(b, a), a, b);
    const __m512 m2 = _mm512_mask_blend_ps(avx512::wins(c, m1), m1, c);
    _mm512_mask_storeu_ps(o + ow, avx512::first_lanes(k), _mm512_mask_blend_ps(avx512::wins(d, m2), m2, d));
  }
  return OW;
}

int64_t max2x2_backward_avx512(const float* r0, const float* r1, const float* g, float* o0, float* o1, int64_t OW) {
  for (int64_t ow = 0; ow < OW; ow += 16) {
    const int64_t k = std::min<int64_t>(16, OW - ow);
    __m512 a, b, c, d;
    avx512::split(r0 + 2 * ow, k, a, b);
    avx512::split(r1 + 2 * ow, k, c, d);
    const __m512 gv = _mm512_maskz_loadu_ps(avx512::first_lanes(k), g + ow);
    const __mmask16 tb = avx512::wins(b, a);
    const __m512 m1 = _mm512_mask_blend_ps(tb, a, b);
    const __mmask16 tc = avx512::wins(c, m1);
    const __mmask16 td = avx512::wins(d, _mm512_mask_blend_ps(tc, m1, c));
    const __mmask16 later_cd = tc | td;
    avx512::merge(o0 + 2 * ow, k, _mm512_maskz_mov_ps(static_cast<__mmask16>(~(tb | later_cd)), gv),
                  _mm512_maskz_mov_ps(static_cast<__mmask16>(tb & ~later_cd), gv));
    avx512::merge(o1 + 2 * ow, k, _mm512_maskz_mov_ps(static_cast<__mmask16>(tc & ~td), gv),
                  _mm512_maskz_mov_ps(td, gv));
  }
  return OW;
}
#endif

template <class T>
void pool_tiles_forward(PoolKind kind, const T* xc, T* oc, int64_t W, int64_t OH, int64_t OW, int64_t kh, int64_t kw) {
  const double inv_area = 1.0 / static_cast<double>(kh * kw);
  for (int64_t oh = 0; oh < OH; ++oh) {
    const T* row = xc + oh * kh * W;
    T* o = oc + oh * OW;
    if (kind == PoolKind::Max && kh == 2 && kw == 2) {  // the common case, written out
      const T* r1 = row + W;
      int64_t ow = 0;
#if defined(__AVX512F__)
      if constexpr (std::is_same_v<T, float>) ow = max2x2_forward_avx512(row, r1, o, OW);
#elif defined(__AVX2__)
      if constexpr (std::is_same_v<T, float>) ow = max2x2_forward_avx2(row, r1, o, OW);
#endif
      for (; ow < OW; ++ow) {
        const T a = row[2 * ow], b = row[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
        const T ab = (b > a || b != b) ? b : a, cd = (d > c || d != d) ? d : c;
        o[ow] = (cd > ab || (cd != cd && ab == ab)) ? cd : ab;
      }
    } else if (kind == PoolKind::Max) {
      for (int64_t ow = 0; ow < OW; ++ow) first_max(row + ow * kw, W, WindowRange{0, kh, 0, kw}, o[ow]);
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

template <class T>
void max2x2_backward_row(const T* r0, const T* r1, const T* g, T* o0, T* o1, int64_t OW) {
  int64_t done = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) done = max2x2_backward_avx512(r0, r1, g, o0, o1, OW);
#elif defined(__AVX2__)
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
        const int64_t best = first_max(xc + w0, W, WindowRange{0, kh, 0, kw}, m);
        for (int64_t h = 0; h < kh; ++h)
          for (int64_t w = 0; w < kw; ++w) gxc[w0 + h * W + w] = h * W + w == best ? g : T(0);
      } else {
        for (int64_t h = 0; h < kh; ++h)
          for (int64_t w = 0; w < kw; ++w) gxc[w0 + h * W + w] = g * inv_area;
      }
    }
  }
}

// Any window (strides, padding): one channel's outputs, or its input gradient (zeroed, then each output's
// gradient added to where the forward read: its first maximum, or every element of an average's window).
template <class T>
void pool_general_forward(PoolKind kind, const T* xc, T* oc, int64_t H, int64_t W, int64_t OH, int64_t OW,
                          const Pool2dParams& p) {
  const double inv_area = 1.0 / static_cast<double>(p.kernel_h * p.kernel_w);
  for (int64_t oh = 0; oh < OH; ++oh)
    for (int64_t ow = 0; ow < OW; ++ow) {
      const WindowRange r = window_at(p, oh, ow, H, W);
      T& out = oc[oh * OW + ow];
      if (kind == PoolKind::Max) {
        first_max(xc, W, r, out);
        continue;
      }
      double s = 0;
      for (int64_t h = r.hs; h < r.he; ++h)
        for (int64_t w = r.ws; w < r.we; ++w) s += xc[h * W + w];
      out = static_cast<T>(s * inv_area);
    }
}
template <class T>
void pool_general_backward(PoolKind kind, const T* xc, const T* gc, T* gxc, int64_t H, int64_t W, int64_t OH,
                           int64_t OW, const Pool2dParams& p) {
  std::fill(gxc, gxc + H * W, T(0));
  const T inv_area = static_cast<T>(1.0 / static_cast<double>(p.kernel_h * p.kernel_w));
  for (int64_t oh = 0; oh < OH; ++oh)
    for (int64_t ow = 0; ow < OW; ++ow) {
      const WindowRange r = window_at(p, oh, ow, H, W);
      const T g = gc[oh * OW + ow];
      if (kind == PoolKind::Max) {
        T m;
        if (const int64_t best = first_max(xc, W, r, m); best >= 0) gxc[best] += g;
        continue;
      }
      for (int64_t h = r.hs; h < r.he; ++h)
        for (int64_t w = r.ws; w < r.we; ++w) gxc[h * W + w] += g * inv_area;
    }
}

// One channel, by the path its windows take.
template <class T>
void pool_channel(PoolKind kind, const T* xc, T* oc, int64_t H, int64_t W, int64_t OH, int64_t OW,
                  const Pool2dParams& p) {
  if (tiles(p)) pool_tiles_forward(kind, xc, oc, W, OH, OW, p.kernel_h, p.kernel_w);
  else pool_general_forward(kind, xc, oc, H, W, OH, OW, p);
}
template <class T>
void pool_channel_backward(PoolKind kind, const T* xc, const T* gc, T* gxc, int64_t H, int64_t W, int64_t OH,
                           int64_t OW, const Pool2dParams& p) {
  if (tiles(p)) pool_tiles_backward(kind, xc, gc, gxc, H, W, OH, OW, p.kernel_h, p.kernel_w);
  else pool_general_backward(kind, xc, gc, gxc, H, W, OH, OW, p);
}

// Calls f.template operator()<T>() for the element type of a floating dtype.
template <class F>
void visit_pooled(DType dt, const char* op, F&& f) {
  switch (dt) {
    case kFloat32:
      return f.template operator()<float>();
    case kFloat64:
      return f.template operator()<double>();
    case kBFloat16:
      return f.template operator()<BFloat16>();
    case kFloat16:
      return f.template operator()<Half>();
    default:
      throw InternalError(detail::str("cpu ", op, ": floating dtype expected, got ", dt));
  }
}

// An input of for_channels: the tensor and its elements per channel.
struct ChannelInput {
  Tensor t;
  int64_t size;
};

// Runs body(the inputs' channel c, the output's channel c) for the nc channels in parallel (the output has out_size
// elements a channel). float and double channels are the tensors' own memory. 16-bit channels are widened into
// float buffers of the task and the float result rounded once into the output: the float32 kernel's values, with no
// float32 copy of any tensor (memory::plan counts the caching allocator's bytes; these buffers are a channel each,
// outside it).
template <class T, class Body>
void for_channels(int64_t nc, std::initializer_list<ChannelInput> ins, const Tensor& out, int64_t out_size, Body body) {
  const std::vector<ChannelInput> in(ins);
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, in[0].size));
  parallel_for(0, nc, grain, [&](int64_t c0, int64_t c1) {
    if constexpr (std::is_floating_point_v<T>) {
      std::array<const T*, 2> ptrs{};
      for (int64_t c = c0; c < c1; ++c) {
        for (size_t k = 0; k < in.size(); ++k) ptrs[k] = static_cast<const T*>(in[k].t.data_ptr()) + c * in[k].size;
        body(ptrs, static_cast<T*>(out.data_ptr()) + c * out_size);
      }
    } else {
      std::array<std::vector<float>, 2> wide;
      std::vector<float> result(static_cast<size_t>(out_size));
      std::array<const float*, 2> ptrs{};
      for (size_t k = 0; k < in.size(); ++k) wide[k].resize(static_cast<size_t>(in[k].size));
      for (int64_t c = c0; c < c1; ++c) {
        for (size_t k = 0; k < in.size(); ++k) {
          const T* src = static_cast<const T*>(in[k].t.data_ptr()) + c * in[k].size;
          for (int64_t i = 0; i < in[k].size; ++i) wide[k][static_cast<size_t>(i)] = static_cast<float>(src[i]);
          ptrs[k] = wide[k].data();
        }
        body(ptrs, result.data());
        T* dst = static_cast<T*>(out.data_ptr()) + c * out_size;
        for (int64_t i = 0; i < out_size; ++i) dst[i] = convert<T>(result[static_cast<size_t>(i)]);
      }
    }
  });
}

}  // namespace

void CpuBackend::pool2d(PoolKind kind, const Tensor& out, const Tensor& x_in, const Pool2dParams& p) {
  if (detail::pool2d_channels_last(*this, kind, out, x_in, p)) return;  // on NCHW copies
  const Tensor x = raw::contiguous(x_in);
  const int64_t H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  visit_pooled(out.dtype(), "pool2d", [&]<class T>() {
    for_channels<T>(x.size(0) * x.size(1), {{x, H * W}}, out, OH * OW,
                    [&](const auto& in, auto* oc) { pool_channel(kind, in[0], oc, H, W, OH, OW, p); });
  });
}

void CpuBackend::pool2d_backward(PoolKind kind, const Tensor& gx, const Tensor& gy_in, const Tensor& x_in,
                                 const Pool2dParams& p) {
  if (detail::pool2d_backward_channels_last(*this, kind, gx, gy_in, x_in, p)) return;  // on NCHW copies
  const Tensor x = raw::contiguous(x_in), gy = raw::contiguous(gy_in);
  const int64_t H = x.size(2), W = x.size(3), OH = gy.size(2), OW = gy.size(3);
  visit_pooled(gx.dtype(), "pool2d_backward", [&]<class T>() {
    for_channels<T>(x.size(0) * x.size(1), {{x, H * W}, {gy, OH * OW}}, gx, H * W, [&](const auto& in, auto* gxc) {
      pool_channel_backward(kind, in[0], in[1], gxc, H, W, OH, OW, p);
    });
  });
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
