// defines: cublas_matmul (compute_internal.h), the cuBLAS side of CudaBackend::matmul, the per-thread cuBLAS
// handles, and what cuBLASLt's GEMMs share with it (cublas_internal.h: operand views, types, the stream's workspace).
//
// Note [Row-major GEMM on cuBLAS]: cuBLAS is column-major. A row-major [M, N] matrix with rows contiguous is,
// read column-major, its own transpose ([N, M], leading dim = row stride). So C = A @ B is computed as
// C^T = B^T @ A^T: cuBLAS gets (m, n, k) = (N, M, K), B first and A second, and writes C^T column-major,
// which is C row-major — no copies. Each operand is passed as it lies: rows contiguous -> op N with
// ld = row stride; columns contiguous (a transposed view) -> op T with ld = column stride. Only an operand
// with neither dim contiguous is copied first. Batch strides pass through (0 for a broadcast batch).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "check.h"
#include "compute_internal.h"
#include "cublas_internal.h"
#include "device_guard.h"
#include "ember/core/factory.h"
#include "ember/core/memory_plan.h"
#include "ember/core/raw_ops.h"
#include "ember/cuda/cuda.h"
#include "handle_pool.h"
#include "stream_internal.h"

namespace ember::cuda::detail {
namespace {

// One handle per (thread, device), created on first use and pooled when the thread exits (handle_pool.h).
cublasHandle_t handle_for(int device) {
  return HandlePool<cublasHandle_t>::get(device, [](cublasHandle_t* h) {
    EMBER_CUBLAS_CHECK(cublasCreate(h));
    // float16/bfloat16 GEMMs accumulate in float throughout (as the CPU backend, which upcasts them).
    EMBER_CUBLAS_CHECK(cublasSetMathMode(*h, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  });
}

}  // namespace

void check_gemm_int(const char* what, int64_t v) {
  EMBER_CHECK_DEVICE(v <= INT_MAX, "matmul: ", what, " ", v, " exceeds cuBLAS's 32-bit limit");
}

// cuBLAS's recommended workspace: 32 MiB on Hopper and later, 4 MiB before (asked once per device and thread).
size_t gemm_workspace_bytes(int device) {
  thread_local std::vector<size_t> bytes;
  if (bytes.size() <= static_cast<size_t>(device)) bytes.resize(static_cast<size_t>(device) + 1, 0);
  size_t& b = bytes[static_cast<size_t>(device)];
  if (b == 0) {
    int major = 0;
    EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    b = major >= 9 ? (size_t{32} << 20) : (size_t{4} << 20);
  }
  return b;
}

GemmOperand transposed_view(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  const int64_t need_n = cols > 1 ? cols : 1, need_t = rows > 1 ? rows : 1;
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= need_n)) return {CUBLAS_OP_N, rows == 1 ? need_n : rs, true};
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= need_t)) return {CUBLAS_OP_T, cols == 1 ? need_t : cs, true};
  return {};
}

GemmOperands gemm_operands(const Tensor& a_in, const Tensor& b_in) {
  GemmOperands g{a_in, b_in, {}, {}};
  const int64_t M = a_in.size(-2), K = a_in.size(-1), N = b_in.size(-1);
  g.ob = transposed_view(K, N, g.b.stride(-2), g.b.stride(-1));  // B^T: cuBLAS's first operand
  if (!g.ob.ok) {
    g.b = raw::contiguous(g.b);
    g.ob = transposed_view(K, N, g.b.stride(-2), g.b.stride(-1));
  }
  g.oa = transposed_view(M, K, g.a.stride(-2), g.a.stride(-1));  // A^T: the second
  if (!g.oa.ok) {
    g.a = raw::contiguous(g.a);
    g.oa = transposed_view(M, K, g.a.stride(-2), g.a.stride(-1));
  }
  return g;
}

GemmTypes gemm_types(DType dt) {
  switch (dt) {
    case kFloat32:
      return {CUDA_R_32F, allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    case kFloat64:
      return {CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case kFloat16:
      return {CUDA_R_16F, CUBLAS_COMPUTE_32F};
    case kBFloat16:
      return {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    default:
      throw InternalError(ember::detail::str("gemm_types: no cuBLAS GEMM for ", dt));
  }
}

// One cuBLAS workspace per (device, stream), kept from the stream's first GEMM on (as PyTorch's): GEMMs on one
// stream run in order and share it, GEMMs on two streams never do, whichever thread's handle queues them. It comes
// from the caching allocator (memory_allocated counts it, tagged as workspace); cuda::empty_cache() gives them back.
struct StreamWorkspaces {
  std::mutex mu;
  std::map<std::pair<int, cudaStream_t>, Tensor> by_stream;
};
StreamWorkspaces& stream_workspaces() {
  static auto* w = new StreamWorkspaces();  // never destroyed: GEMMs may run during static destruction
  return *w;
}
void* gemm_workspace(int device, cudaStream_t stream, size_t bytes) {
  StreamWorkspaces& w = stream_workspaces();
  std::lock_guard<std::mutex> lock(w.mu);
  Tensor& ws = w.by_stream[{device, stream}];
  if (!ws.defined()) {
    ws = empty({static_cast<int64_t>(bytes)}, {.dtype = kUInt8, .device = Device::cuda(device)});
    memory::tag(ws, memory::Category::kWorkspace);  // memory_history.h's counters and timeline
  }
  return ws.data_ptr();
}

void release_cublas_workspaces() {
  StreamWorkspaces& w = stream_workspaces();
  std::lock_guard<std::mutex> lock(w.mu);
  w.by_stream.clear();  // each block goes back to the cache on its stream, behind the GEMMs that used it
}

void cublas_matmul(const Tensor& out, const Tensor& a_in, const Tensor& b_in) {
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a_in.size(2);
  if (out.numel() == 0) return;
  const int device = out.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream_handle(device);
  const GemmOperands g = gemm_operands(a_in, b_in);
  const Tensor &a = g.a, &b = g.b;
  const GemmOperand &oa = g.oa, &ob = g.ob;
  for (auto [what, v] : {std::pair{"M", M}, {"N", N}, {"K", K}, {"batch", B}, {"lda", oa.ld}, {"ldb", ob.ld}})
    check_gemm_int(what, v);
  const int64_t stride_a = B > 1 ? a.stride(0) : 0, stride_b = B > 1 ? b.stride(0) : 0;

  cublasHandle_t h = handle_for(device);
  EMBER_CUBLAS_CHECK(cublasSetStream(h, stream));  // (resets the handle's workspace: set again below)
  const size_t ws_bytes = gemm_workspace_bytes(device);
  EMBER_CUBLAS_CHECK(cublasSetWorkspace(h, gemm_workspace(device, stream, ws_bytes), ws_bytes));

  const GemmTypes t = gemm_types(out.dtype());
  const double alpha_d = 1, beta_d = 0;
  const float alpha_f = 1, beta_f = 0;
  const bool dbl = out.dtype() == kFloat64;
  EMBER_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, ob.op, oa.op, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K),
      dbl ? static_cast<const void*>(&alpha_d) : &alpha_f, b.data_ptr(), t.data, static_cast<int>(ob.ld), stride_b,
      a.data_ptr(), t.data, static_cast<int>(oa.ld), stride_a, dbl ? static_cast<const void*>(&beta_d) : &beta_f,
      out.data_ptr(), t.data, static_cast<int>(N), M * N, static_cast<int>(B), t.compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace ember::cuda::detail
