// defines: the CPU batched GEMM behind matmul (our packed kernel for float32, Eigen otherwise) and
// gemm_serial for per-image products.
// Eigen stays inside this file and never reaches a public header.
#include <Eigen/Core>

#include <vector>

#include "bf16_gemm.h"
#include "cpu_backend.h"
#include "ember/core/raw_ops.h"
#include "ember/internal/gemm_epilogue.h"
#include "gemm.h"
#include "parallel.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {
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

// `bias`: only our float32 kernel takes it (added as it stores the product); CpuBackend::matmul adds it otherwise.
template <class T>
void gemm_batch(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  const T* A = static_cast<const T*>(a.data_ptr());
  const T* Bp = static_cast<const T*>(b.data_ptr());
  T* C = static_cast<T*>(out.data_ptr());
  const bool pack_a = layout_of(M, K, a.stride(1), a.stride(2)) == Layout::Pack;
  const bool pack_b = layout_of(K, N, b.stride(1), b.stride(2)) == Layout::Pack;
  auto one = [&](int64_t i, T* pa, T* pb) {
    Eigen::Map<RowMat<T>> c(C + i * M * N, M, N);
    if (K == 0) {
      c.setZero();
      return;
    }
    with_matrix<T>(A + i * a.stride(0), M, K, a.stride(1), a.stride(2), pa, [&](const auto& am) {
      with_matrix<T>(Bp + i * b.stride(0), K, N, b.stride(1), b.stride(2), pb,
                     [&](const auto& bm) { c.noalias() = am * bm; });
    });
  };
  const int64_t flops = M * N * K;
  if constexpr (std::is_same_v<T, float> && kHaveSgemmKernel) {
    // Our packed kernel: a batch of small products runs one product per thread, large ones thread inside.
    const float* bp = bias.defined() ? static_cast<const float*>(bias.data_ptr()) : nullptr;
    auto run = [&](int64_t i, int threads) {
      sgemm(M, N, K, A + i * a.stride(0), a.stride(1), a.stride(2), Bp + i * b.stride(0), b.stride(1), b.stride(2),
            C + i * M * N, N, false, threads, bp);
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
        uint64_t acc = 0;  // unsigned: overflow wraps (defined) instead of being UB
        for (int64_t k = 0; k < K; ++k)
          acc += static_cast<uint64_t>(static_cast<int64_t>(A[i * a.stride(0) + m * a.stride(1) + k * a.stride(2)])) *
                 static_cast<uint64_t>(static_cast<int64_t>(Bp[i * b.stride(0) + k * b.stride(1) + n * b.stride(2)]));
        C[(i * M + m) * N + n] = static_cast<T>(acc);
      }
}

template <class T>
void gemm_serial_eigen(int64_t M, int64_t N, int64_t K, const T* A, int64_t a_rs, int64_t a_cs, const T* B,
                       int64_t b_rs, int64_t b_cs, T* C, int64_t ldc, bool accumulate) {
  using GStride = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
  Eigen::Map<const RowMat<T>, 0, GStride> am(A, M, K, GStride(a_rs, a_cs));
  Eigen::Map<const RowMat<T>, 0, GStride> bm(B, K, N, GStride(b_rs, b_cs));
  Eigen::Map<RowMat<T>, 0, Stride> cm(C, M, N, Stride(ldc));
  if (accumulate) cm.noalias() += am * bm;
  else cm.noalias() = am * bm;
}

}  // namespace

void gemm_serial(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* B,
                 int64_t b_rs, int64_t b_cs, float* C, int64_t ldc, bool accumulate) {
  if (!sgemm(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, ldc, accumulate, 1))
    gemm_serial_eigen(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, ldc, accumulate);
}
void gemm_serial(int64_t M, int64_t N, int64_t K, const double* A, int64_t a_rs, int64_t a_cs, const double* B,
                 int64_t b_rs, int64_t b_cs, double* C, int64_t ldc, bool accumulate) {
  gemm_serial_eigen(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, ldc, accumulate);
}

namespace {

// bfloat16 on a CPU with bf16 dot products (bf16_gemm.h): the products come from the bf16 operands themselves and
// are summed in float32 into c (the caller rounds them once to bf16, as oneDNN does), with no float32 copies of
// the operands.
void matmul_bf16(const Tensor& c, const Tensor& a, const Tensor& b) {
  const int64_t B = c.size(0), M = c.size(1), N = c.size(2), K = a.size(2);
  const auto* A = static_cast<const uint16_t*>(a.data_ptr());
  const auto* Bm = static_cast<const uint16_t*>(b.data_ptr());
  float* C = static_cast<float*>(c.data_ptr());
  auto run = [&](int64_t i, int threads) {
    bf16_gemm(M, N, K, A + i * a.stride(0), a.stride(1), a.stride(2), Bm + i * b.stride(0), b.stride(1), b.stride(2),
              C + i * M * N, N, false, threads);
  };
  const int64_t flops = M * N * K;
  if (B > 1 && flops < (1 << 21)) {  // a batch of small products: one product per thread, as gemm_batch
    parallel_for(0, B, std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(flops, 1)), [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) run(i, 1);
    });
  } else {
    for (int64_t i = 0; i < B; ++i) run(i, num_threads());
  }
}

}  // namespace

void CpuBackend::matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  // The bias rides in our float32 kernel's stores; every other path adds it afterwards, in place.
  const bool folded = bias.defined() && out.dtype() == kFloat32 && kHaveSgemmKernel;
  auto add_bias = [&](const Tensor& c, const Tensor& bc) {
    if (bias.defined() && !folded) binary(BinaryOp::Add, c, c, raw::expand(bc, c.shape()));
  };
  if (out.dtype() == kBFloat16 && a.dtype() == kBFloat16 && b.dtype() == kBFloat16 &&
      bf16_gemm_path() != Bf16Path::None) {
    Tensor c = float_buffer_like(out);
    matmul_bf16(c, a, b);
    add_bias(c, bias.defined() ? upcast(bias) : bias);  // in float32, rounded once with the product
    copy(out, c);
    return;
  }
  if (through_float32(
          out, [&](const Tensor& tmp) { matmul(tmp, upcast(a), upcast(b), bias.defined() ? upcast(bias) : bias); }))
    return;
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) gemm_batch<T>(out, a, b, folded ? bias : Tensor());
    else if constexpr (is_reduced_v<T>) throw InternalError("unreachable");
    else gemm_naive<T>(out, a, b);
  });
  add_bias(out, bias);
}

// The CPU's GEMM already stores the bias with its tiles; the GELU and bias-gradient passes follow it (memory-bound
// passes over data the GEMM has just left in cache for small layers).
void CpuBackend::gemm_epilogue(const GemmEpilogueArgs& a) { ember::detail::gemm_epilogue_composed(*this, a); }

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
