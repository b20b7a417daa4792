// defines: cublaslt_gemm_epilogue and cublaslt_matmul_bias (compute_internal.h): a linear layer's GEMM through
// cuBLASLt with its epilogue — the bias, bias + GELU (keeping GELU's input), GELU's derivative with the bias
// gradient, or the bias gradient of a weight gradient — in one call, where the plain cuBLAS GEMM would need one to
// three more passes over the output. Operands map to cuBLAS as in cublas.cpp (Note [Row-major GEMM on cuBLAS]):
// cuBLAS computes out^T = b^T a^T, so our b is its A, our a its B, and our out's columns N its rows m. The three
// layouts used here are those NVIDIA's apex fused_dense runs (forward GELU_AUX_BIAS with its A transposed,
// DGELU_BGRAD with both plain, BGRADB with its B transposed); another layout cuBLASLt refuses falls back. The
// heuristic's choice is kept per problem (shape, layouts, epilogue, the operands' alignments): asked once.
#include <cublasLt.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "check.h"
#include "compute_internal.h"
#include "cublas_internal.h"
#include "device_guard.h"
#include "handle_pool.h"
#include "stream_internal.h"

namespace ember::cuda::detail {
namespace {

cublasLtHandle_t lt_handle_for(int device) {
  return HandlePool<cublasLtHandle_t>::get(device, [](cublasLtHandle_t* h) { EMBER_CUBLAS_CHECK(cublasLtCreate(h)); });
}

// Owners of cuBLASLt's descriptors (destroyed with the call that made them).
struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { cublasLtMatrixLayoutDestroy(l); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

template <class T>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}
template <class T>
void set(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& v) {
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof(v)));
}

// A column-major rows x cols matrix with leading dim ld, as cuBLASLt stores it before its op.
Layout layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  EMBER_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&l, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  return Layout(l);
}

// The largest power of two up to 256 dividing the address: cuBLASLt's heuristics otherwise assume 256-byte
// aligned operands and may pick a kernel a view's pointer does not suit.
uint32_t alignment_of(const void* p) {
  if (!p) return 0;  // no such operand
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

struct Epilogue {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;  // BIAS (read) or the bias gradient (BGRAD: written)
  const void* aux = nullptr;   // GELU's input: written by GELU_AUX, read by DGELU
};

// EMBER_CUBLASLT: "0" never uses cuBLASLt (cuBLAS and the composed steps, as before it); "require" throws where
// cuBLASLt refuses a case the rule gave it, instead of falling back (the GPU check runs the epilogue tests so, to
// show the epilogues really ran); anything else, or unset, uses it with the fallback.
enum class LtMode { Off, On, Required };
LtMode lt_mode() {
  static const LtMode mode = [] {
    const char* e = std::getenv("EMBER_CUBLASLT");
    if (!e) return LtMode::On;
    const std::string v(e);
    return v == "0" ? LtMode::Off : v == "require" ? LtMode::Required : LtMode::On;
  }();
  return mode;
}

// false (the caller composes the steps), or under EMBER_CUBLASLT=require a DeviceError naming the case.
bool refused(const char* why, cublasStatus_t st, const Tensor& out, const Tensor& a, const Tensor& b,
             const Epilogue& e) {
  EMBER_CHECK_DEVICE(lt_mode() != LtMode::Required, "cuBLASLt (EMBER_CUBLASLT=require): ", why, " for epilogue ",
                     static_cast<int>(e.kind), ", out ", out.dtype(), out.shape(), ", a ", a.shape(), " strides ",
                     a.strides(), ", b ", b.shape(), " strides ", b.strides(), " (", cublasGetStatusString(st), ")");
  return false;
}

// The operation: types, ops and the epilogue with its pointers (set per call: the descriptor is not shared).
MatmulDesc make_desc(const GemmTypes& t, const GemmOperands& g, const Epilogue& e, int64_t n) {
  cublasLtMatmulDesc_t d = nullptr;
  EMBER_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d, t.compute, CUDA_R_32F));
  MatmulDesc desc(d);
  set(d, CUBLASLT_MATMUL_DESC_TRANSA, g.ob.op);
  set(d, CUBLASLT_MATMUL_DESC_TRANSB, g.oa.op);
  set(d, CUBLASLT_MATMUL_DESC_EPILOGUE, e.kind);
  if (e.bias) set(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, e.bias);
  if (e.aux) {
    set(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, e.aux);
    set(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, n);  // aux is [M, N] row-major: N x M column-major
  }
  return desc;
}

// What the heuristic's choice depends on: the problem, and the pointers only through their alignments.
struct AlgoKey {
  int device = 0;
  cudaDataType_t data{};
  cublasComputeType_t compute{};
  cublasLtEpilogue_t epilogue{};
  cublasOperation_t opa{}, opb{};
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0;
  std::array<uint32_t, 5> align{};  // A, B, C/D, bias, aux
  auto operator<=>(const AlgoKey&) const = default;
};

// cuBLASLt's heuristic answer for a key, asked once per key and kept (nullopt: no algorithm; st says why).
std::optional<cublasLtMatmulAlgo_t> algo_for(const AlgoKey& key, cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                                             const Layout& la, const Layout& lb, const Layout& lc, uint64_t ws_bytes,
                                             cublasStatus_t& st) {
  static std::mutex mu;
  static std::map<AlgoKey, std::pair<std::optional<cublasLtMatmulAlgo_t>, cublasStatus_t>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) {
    cublasLtMatmulPreference_t p = nullptr;
    EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p));
    const Preference pref(p);
    set(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws_bytes);
    // Split-K partial sums in the compute type only: INPLACE and OUTPUT_TYPE reduce in the 16-bit output type,
    // which the cuBLAS handle's math mode (DISALLOW_REDUCED_PRECISION_REDUCTION) rules out for cuBLAS's GEMMs too.
    set(p, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
    set(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align[0]);
    set(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align[1]);
    set(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align[2]);
    set(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align[2]);
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(h, desc, la.get(), lb.get(), lc.get(), lc.get(), p, 1, &r,
                                                            &found);
    std::optional<cublasLtMatmulAlgo_t> algo;
    if (s == CUBLAS_STATUS_SUCCESS && found > 0) algo = r.algo;
    it = cache.emplace(key, std::pair{algo, s}).first;
  }
  st = it->second.second;
  return it->second.first;
}

// out[M, N] = a[M, K] @ b[K, N] (2-D) with the epilogue; false, with nothing run, when cuBLASLt has no algorithm.
bool lt_matmul(const Tensor& out, const Tensor& a_in, const Tensor& b_in, const Epilogue& e) {
  if (lt_mode() == LtMode::Off) return false;
  const int64_t M = out.size(0), N = out.size(1), K = a_in.size(1);
  const int device = out.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream_handle(device);
  const GemmOperands g = gemm_operands(a_in, b_in);
  for (auto [what, v] : {std::pair{"M", M}, {"N", N}, {"K", K}, {"lda", g.oa.ld}, {"ldb", g.ob.ld}})
    check_gemm_int(what, v);
  const GemmTypes t = gemm_types(out.dtype());
  const MatmulDesc desc = make_desc(t, g, e, N);
  // cuBLAS's A = b^T (N x K after its op), B = a^T (K x M), C = D = out^T (N x M, ld N).
  const Layout la = g.ob.op == CUBLAS_OP_N ? layout(t.data, N, K, g.ob.ld) : layout(t.data, K, N, g.ob.ld);
  const Layout lb = g.oa.op == CUBLAS_OP_N ? layout(t.data, K, M, g.oa.ld) : layout(t.data, M, K, g.oa.ld);
  const Layout lc = layout(t.data, N, M, N);
  const AlgoKey key{device, t.data, t.compute, e.kind, g.ob.op, g.oa.op, M, N, K, g.ob.ld, g.oa.ld,
                    {alignment_of(g.b.data_ptr()), alignment_of(g.a.data_ptr()), alignment_of(out.data_ptr()),
                     alignment_of(e.bias), alignment_of(e.aux)}};
  const uint64_t ws_bytes = gemm_workspace_bytes(device);
  cublasLtHandle_t h = lt_handle_for(device);
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  const std::optional<cublasLtMatmulAlgo_t> algo = algo_for(key, h, desc.get(), la, lb, lc, ws_bytes, st);
  if (!algo) return refused("no algorithm", st, out, a_in, b_in, e);
  const float alpha = 1, beta = 0;
  const cublasStatus_t run = cublasLtMatmul(h, desc.get(), &alpha, g.b.data_ptr(), la.get(), g.a.data_ptr(), lb.get(),
                                            &beta, out.data_ptr(), lc.get(), out.data_ptr(), lc.get(), &*algo,
                                            gemm_workspace(device, stream, ws_bytes), ws_bytes, stream);
  if (run != CUBLAS_STATUS_SUCCESS) return refused("the call failed", run, out, a_in, b_in, e);
  return true;
}

Epilogue epilogue_of(const GemmEpilogueArgs& a) {
  const void* bias_grad = a.bias_grad.defined() ? a.bias_grad.data_ptr() : nullptr;
  switch (a.epilogue) {
    case GemmEpilogue::BiasGelu:
      return {a.bias.defined() ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX,
              a.bias.defined() ? a.bias.data_ptr() : nullptr, a.aux.data_ptr()};
    case GemmEpilogue::DGelu:
      return {bias_grad ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU, bias_grad, a.aux.data_ptr()};
    case GemmEpilogue::BGradA:  // our a is cuBLAS's B: its sums over k are BGRADB's
      return {bias_grad ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT, bias_grad, nullptr};
  }
  return {};
}

}  // namespace

bool cublaslt_gemm_epilogue(const GemmEpilogueArgs& a) { return lt_matmul(a.out, a.a, a.b, epilogue_of(a)); }

bool cublaslt_matmul_bias(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  return lt_matmul(out, a, b, {CUBLASLT_EPILOGUE_BIAS, bias.data_ptr(), nullptr});
}

}  // namespace ember::cuda::detail
