// defines: the CPU GEMM (batched, any strides) on Eigen, and conv2d as im2col + that GEMM.
// Eigen stays inside this file and never reaches a public header.
#include <Eigen/Core>

#include "cpu_backend.h"
#include "gemm.h"
#include "parallel.h"

namespace ember::cpu {
namespace {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ColMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using Stride = Eigen::OuterStride<>;

enum class Layout { Row, Col, Pack };
// How Eigen can map the [rows, cols] matrix with element strides (rs, cs) without a copy. Row-major needs unit
// column steps and rows that do not overlap (rs >= cols: an expanded view has rs == 0); column-major the mirror.
Layout layout_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if ((cs == 1 || cols == 1) && (rs >= cols || rows == 1)) return Layout::Row;
  if ((rs == 1 || rows == 1) && (cs >= rows || cols == 1)) return Layout::Col;
  return Layout::Pack;
}

// Calls f(map) with an Eigen map of the [rows, cols] matrix at p with element strides (rs, cs): row-major or
// column-major as layout_of says (a transposed view costs nothing), else via a packed copy in `pack`.
template <class T, class F>
void with_matrix(const T* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs, T* pack, F&& f) {
  const Layout l = layout_of(rows, cols, rs, cs);
  if (l == Layout::Row) {
    f(Eigen::Map<const RowMat<T>, 0, Stride>(p, rows, cols, Stride(std::max<int64_t>(rs, cols))));
  } else if (l == Layout::Col) {
    f(Eigen::Map<const ColMat<T>, 0, Stride>(p, rows, cols, Stride(std::max<int64_t>(cs, rows))));
  } else {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) pack[i * cols + j] = p[i * rs + j * cs];
    f(Eigen::Map<const RowMat<T>>(pack, rows, cols));
  }
}

template <class T>
void gemm_batch(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  const T* A = static_cast<const T*>(a.data_ptr());
  const T* Bp = static_cast<const T*>(b.data_ptr());
  T* C = static_cast<T*>(out.data_ptr());
  const bool pack_a = layout_of(M, K, a.stride(1), a.stride(2)) == Layout::Pack;
  const bool pack_b = layout_of(K, N, b.stride(1), b.stride(2)) == Layout::Pack;
  auto one = [&](int64_t i, T* pa, T* pb) {
    Eigen::Map<RowMat<T>> c(C + i * M * N, M, N);
    if (K == 0) { c.setZero(); return; }
    with_matrix<T>(A + i * a.stride(0), M, K, a.stride(1), a.stride(2), pa, [&](const auto& am) {
      with_matrix<T>(Bp + i * b.stride(0), K, N, b.stride(1), b.stride(2), pb, [&](const auto& bm) {
        c.noalias() = am * bm;
      });
    });
  };
  const int64_t flops = M * N * K;
  if constexpr (std::is_same_v<T, float> && kHaveSgemmKernel) {
    // Our packed kernel: a batch of small products runs one product per thread, large ones thread inside.
    auto run = [&](int64_t i, int threads) {
      sgemm(M, N, K, A + i * a.stride(0), a.stride(1), a.stride(2), Bp + i * b.stride(0), b.stride(1), b.stride(2),
            C + i * M * N, N, false, threads);
    };
    if (B > 1 && flops < (1 << 21)) {
      parallel_for(0, B, std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(flops, 1)), [&](int64_t b0, int64_t b1) {
        for (int64_t i = b0; i < b1; ++i) run(i, 1);
      });
    } else {
      for (int64_t i = 0; i < B; ++i) run(i, num_threads());
    }
    return;
  }
  // Small matrices in a batch: one matrix per thread. Large ones: Eigen threads inside each GEMM.
  if (B > 1 && flops < (1 << 21)) {
    parallel_for(0, B, std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(flops, 1)), [&](int64_t b0, int64_t b1) {
      Scratch pa(pack_a ? sizeof(T) * M * K : 0), pb(pack_b ? sizeof(T) * K * N : 0);
      for (int64_t i = b0; i < b1; ++i) one(i, pa.as<T>(), pb.as<T>());
    });
  } else {
    Scratch pa(pack_a ? sizeof(T) * M * K : 0), pb(pack_b ? sizeof(T) * K * N : 0);
    for (int64_t i = 0; i < B; ++i) one(i, pa.as<T>(), pb.as<T>());
  }
}

// Integer matmul (rare; no BLAS path): a plain triple loop in int64 accumulators.
template <class T>
void gemm_naive(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  const T* A = static_cast<const T*>(a.data_ptr());
  const T* Bp = static_cast<const T*>(b.data_ptr());
  T* C = static_cast<T*>(out.data_ptr());
  for (int64_t i = 0; i < B; ++i)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += static_cast<int64_t>(A[i * a.stride(0) + m * a.stride(1) + k * a.stride(2)]) *
                 static_cast<int64_t>(Bp[i * b.stride(0) + k * b.stride(1) + n * b.stride(2)]);
        C[(i * M + m) * N + n] = static_cast<T>(acc);
      }
}

}  // namespace

Scratch::Scratch(size_t nbytes) : ptr_(cpu_allocator().allocate(nbytes)), n_(nbytes) {}
Scratch::~Scratch() { cpu_allocator().deallocate(ptr_, n_); }

void CpuBackend::matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (is_reduced_float(out.dtype())) {
    Tensor tmp = float_buffer_like(out);
    matmul(tmp, upcast(a), upcast(b));
    copy(out, tmp);
    return;
  }
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) gemm_batch<T>(out, a, b);
    else if constexpr (is_reduced_v<T>) throw InternalError("unreachable");
    else gemm_naive<T>(out, a, b);
  });
}

void CpuBackend::conv2d(const Tensor& out, const Tensor& x_in, const Tensor& w_in, const Tensor& bias,
                        const Conv2dParams& p) {
  if (is_reduced_float(out.dtype())) {
    Tensor tmp = float_buffer_like(out);
    conv2d(tmp, upcast(x_in), upcast(w_in), bias.defined() ? upcast(bias) : bias, p);
    copy(out, tmp);
    return;
  }
  Tensor x = raw::contiguous(x_in), w = raw::contiguous(w_in), b = bias.defined() ? raw::contiguous(bias) : bias;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OC = w.size(0), KH = w.size(2), KW = w.size(3), OH = out.size(2), OW = out.size(3);
  const int64_t CKK = C * KH * KW, OHW = OH * OW;
  if (out.numel() == 0) return;
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (!std::is_floating_point_v<T>) {
      throw InternalError("cpu conv2d: floating dtype expected");
    } else {
      const T* xp = static_cast<const T*>(x.data_ptr());
      const T* bp = b.defined() ? static_cast<const T*>(b.data_ptr()) : nullptr;
      T* op = static_cast<T*>(out.data_ptr());
      Eigen::Map<const RowMat<T>> wm(static_cast<const T*>(w.data_ptr()), OC, CKK);
      // im2col: col[(c, kh, kw), (oh, ow)] = x[c, oh*s - pad + kh, ow*s - pad + kw] (0 outside), then
      // out[n] = W[OC, CKK] @ col[CKK, OH*OW] (+ bias per output channel).
      auto image = [&](int64_t n, T* col) {
        const T* xn = xp + n * C * H * W;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
              T* row = col + ((c * KH + kh) * KW + kw) * OHW;
              for (int64_t oh = 0; oh < OH; ++oh) {
                const int64_t ih = oh * p.stride_h - p.pad_h + kh;
                T* r = row + oh * OW;
                if (ih < 0 || ih >= H) { std::fill(r, r + OW, T(0)); continue; }
                const T* xr = xn + (c * H + ih) * W;
                for (int64_t ow = 0; ow < OW; ++ow) {
                  const int64_t iw = ow * p.stride_w - p.pad_w + kw;
                  r[ow] = (iw >= 0 && iw < W) ? xr[iw] : T(0);
                }
              }
            }
        Eigen::Map<RowMat<T>> om(op + n * OC * OHW, OC, OHW);
        if constexpr (std::is_same_v<T, float> && kHaveSgemmKernel)
          sgemm(OC, OHW, CKK, w.data<float>(), CKK, 1, col, OHW, 1, om.data(), OHW, false, 1);
        else
          om.noalias() = wm * Eigen::Map<const RowMat<T>>(col, CKK, OHW);
        if (bp) om.colwise() += Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(bp, OC);
      };
      // One image per thread (each with its own column buffer) when the batch can feed the threads.
      parallel_for(0, N, 1, [&](int64_t n0, int64_t n1) {
        Scratch col(sizeof(T) * static_cast<size_t>(CKK * OHW));
        for (int64_t n = n0; n < n1; ++n) image(n, col.as<T>());
      });
    }
  });
}

}  // namespace ember::cpu
