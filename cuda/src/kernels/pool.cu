// defines: max / average pooling kernels, forward and backward, NCHW or channels-last (NHWC), and their launchers
// (launch.h). Our own
// kernels rather than cuDNN's, to keep core/cpu/pool.cpp's exact semantics: max routes the
// gradient to the FIRST maximum of its window (NaN counts as the maximum), avg divides by the full window
// (padding counted). The backward is a gather — one thread per input element sums the gradients of the
// windows that contain it, in the CPU's window order — so it needs no atomics and is deterministic. Threads walk the
// output (gx) in its memory order, so in NHWC neighbouring threads take neighbouring channels of a pixel and every
// read of a window is coalesced.
#include <cstdint>

#include "common.cuh"

namespace ember::cuda::kernels {
namespace {

struct Window {
  int64_t hs, he, ws, we;
};
__device__ inline Window window(const PoolShape& s, int64_t oh, int64_t ow) {
  const int64_t h0 = oh * s.sh - s.ph, w0 = ow * s.sw - s.pw;
  return {h0 > 0 ? h0 : 0, h0 + s.kh < s.h ? h0 + s.kh : s.h, w0 > 0 ? w0 : 0, w0 + s.kw < s.w ? w0 + s.kw : s.w};
}

// Element e of an [N, C, pixels] tensor in the shape's layout: its plane (n, c) and pixel.
struct PlanePixel {
  int64_t n, c, pixel;
};
__device__ inline PlanePixel locate(int64_t e, int64_t pixels, const PoolShape& s) {
  if (s.channels_last) {
    const int64_t rest = e / s.c;
    return {rest / pixels, e % s.c, rest % pixels};
  }
  const int64_t nc = e / pixels;
  return {nc / s.c, nc % s.c, e % pixels};
}
// Pixel 0 of plane (n, c) of a tensor of `pixels` pixels a plane, and the step from one pixel to the next.
__device__ inline int64_t plane_base(const PlanePixel& at, int64_t pixels, const PoolShape& s) {
  return s.channels_last ? at.n * pixels * s.c + at.c : (at.n * s.c + at.c) * pixels;
}
__device__ inline int64_t pixel_step(const PoolShape& s) { return s.channels_last ? s.c : 1; }

// The position (h * W + w) of the first maximum of a window of one plane, as the CPU backward picks it;
// -1 for an empty window. xc: the plane's pixel 0, its pixels `step` apart.
template <class T>
__device__ inline int64_t first_max(const T* xc, int64_t step, const PoolShape& s, const Window& win) {
  using C = compute_t<T>;
  int64_t best = -1;
  C m = -static_cast<C>(INFINITY);
  for (int64_t h = win.hs; h < win.he && !(best >= 0 && is_nan(m)); ++h)
    for (int64_t w = win.ws; w < win.we; ++w) {
      const C v = load_c(xc[(h * s.w + w) * step]);
      if (best < 0 || v > m || is_nan(v)) {
        m = v;
        best = h * s.w + w;
      }
      if (is_nan(m)) break;
    }
  return best;
}

template <class T>
__global__ void pool_kernel(bool max, T* out, const T* x, PoolShape s) {
  using C = compute_t<T>;
  const double inv_area = 1.0 / static_cast<double>(s.kh * s.kw);
  const int64_t step = pixel_step(s);
  EMBER_KERNEL_LOOP(e, s.nc * s.oh * s.ow) {
    const PlanePixel at = locate(e, s.oh * s.ow, s);
    const int64_t oh = at.pixel / s.ow, ow = at.pixel % s.ow;
    const T* xc = x + plane_base(at, s.h * s.w, s);
    const Window win = window(s, oh, ow);
    if (max) {
      C m = -static_cast<C>(INFINITY);
      for (int64_t h = win.hs; h < win.he; ++h)
        for (int64_t w = win.ws; w < win.we; ++w) {
          const C v = load_c(xc[(h * s.w + w) * step]);
          if (v > m || is_nan(v)) m = v;
          if (is_nan(m)) break;
        }
      out[e] = store_c<T>(m);
    } else {
      double sum = 0;
      for (int64_t h = win.hs; h < win.he; ++h)
        for (int64_t w = win.ws; w < win.we; ++w) sum += static_cast<double>(load_c(xc[(h * s.w + w) * step]));
      out[e] = store_c<T>(static_cast<C>(sum * inv_area));
    }
  }
}

template <class T>
__global__ void pool_backward_kernel(bool max, T* gx, const T* gy, const T* x, PoolShape s) {
  using C = compute_t<T>;
  const C inv_area = static_cast<C>(1.0 / static_cast<double>(s.kh * s.kw));
  const int64_t step = pixel_step(s);
  EMBER_KERNEL_LOOP(e, s.nc * s.h * s.w) {
    const PlanePixel at = locate(e, s.h * s.w, s);
    const int64_t h = at.pixel / s.w, w = at.pixel % s.w;
    // The windows containing (h, w): oh * sh - ph <= h < oh * sh - ph + kh, likewise for ow.
    const int64_t th = h + s.ph - s.kh, tw = w + s.pw - s.kw;
    const int64_t oh_lo = th < 0 ? 0 : th / s.sh + 1, ow_lo = tw < 0 ? 0 : tw / s.sw + 1;
    const int64_t oh_hi = min((h + s.ph) / s.sh, s.oh - 1), ow_hi = min((w + s.pw) / s.sw, s.ow - 1);
    const T* xc = x + plane_base(at, s.h * s.w, s);
    const T* gc = gy + plane_base(at, s.oh * s.ow, s);
    C acc = C(0);
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh)
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        const C g = load_c(gc[(oh * s.ow + ow) * step]);
        if (max) {
          if (first_max(xc, step, s, window(s, oh, ow)) == at.pixel) acc += g;
        } else {
          acc += g * inv_area;
        }
      }
    gx[e] = store_c<T>(acc);
  }
}

}  // namespace

void launch_pool2d(bool max, DType type, void* out, const void* x, const PoolShape& s, CUstream_st* stream) {
  const int64_t n = s.nc * s.oh * s.ow;
  if (n == 0) return;
  dispatch_floating(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    pool_kernel<T><<<grid_size(n), kBlockSize, 0, stream>>>(max, static_cast<T*>(out), static_cast<const T*>(x), s);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

void launch_pool2d_backward(bool max, DType type, void* gx, const void* gy, const void* x, const PoolShape& s,
                            CUstream_st* stream) {
  const int64_t n = s.nc * s.h * s.w;
  if (n == 0) return;
  dispatch_floating(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    pool_backward_kernel<T><<<grid_size(n), kBlockSize, 0, stream>>>(
        max, static_cast<T*>(gx), static_cast<const T*>(gy), static_cast<const T*>(x), s);
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
