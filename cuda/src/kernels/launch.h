// defines: the plain host launchers of the CUDA kernels in this folder (llm.c style: raw pointers, sizes
// and strides in small structs, a stream), and the types they take. This header is the seam between the
// C++20 backend (cuda_backend.cpp) and the .cu files, which are C++17: it includes no CUDA header and only the
// plain C++17 ones of core — the op and dtype lists (op_list.h), the optimiser parameters (kernel_params.h)
// and the dimension walk (dim_walk.h) — so kernels take the backend's own enums and structs, not copies.
//
//   kernels::Layout layout = ...;        // coalesced dims, see cuda_backend.cpp
//   kernels::launch_copy_cast(dst, src, layout, stream);
#pragma once
#include <cstdint>

#include "ember/core/kernel_params.h"
#include "ember/core/op_list.h"
#include "ember/internal/dim_walk.h"

struct CUstream_st;

namespace ember::cuda::kernels {

// Most dims a kernel takes after adjacent dims have been merged (a contiguous tensor has one).
constexpr int kMaxDims = 16;

// The index space every operand of a launch shares: `ndim` sizes, walked in row-major order.
struct Layout {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {};
};

// One tensor: the address of its element 0, its element type, and its strides (in elements) over the
// Layout's dims. A stride may be 0 (a broadcast input).
struct Operand {
  void* data = nullptr;
  DType type = DType::kFloat32;
  int64_t strides[kMaxDims] = {};
};

// dst[i] = convert(src[i]) for every index i of `layout` (any dtypes, any strides; CPU conversion rules:
// float -> int saturates and maps NaN to 0, x -> bool is x != 0). dst must not partly overlap src.
void launch_copy_cast(const Operand& dst, const Operand& src, const Layout& layout, CUstream_st* stream);

// dst[i] = value converted to dst's type, for every index i of `layout`.
void launch_fill(const Operand& dst, double value, const Layout& layout, CUstream_st* stream);
// out (contiguous, n elements of `type`) [i] = fma(i, step, start) in double, converted (backend.h's arange).
void launch_arange(DType type, void* out, int64_t n, double start, double step, CUstream_st* stream);

// --- elementwise.cu. float16/bfloat16 compute in float; the per-element math is scalar_math.h's, the CPU's.

// out[i] = op(x[i]); out and x of one type (a floating one for the transcendental ops); out may be x.
void launch_unary(UnaryOp op, const Operand& out, const Operand& x, const Layout& layout, CUstream_st* stream);
// out[i] = clamp(x[i], lo, hi) with lo/hi converted to the compute type (NaN passes through); not bool.
void launch_clamp(const Operand& out, const Operand& x, double lo, double hi, const Layout& layout,
                  CUstream_st* stream);
// out[i] = a[i] op b[i]; a and b of one type; out of that type, or Bool for comparisons; out may be a.
void launch_binary(BinaryOp op, const Operand& out, const Operand& a, const Operand& b, const Layout& layout,
                   CUstream_st* stream);
// out[i] = cond[i] ? a[i] : b[i]; cond Bool, a/b/out of one type.
void launch_where(const Operand& out, const Operand& cond, const Operand& a, const Operand& b, const Layout& layout,
                  CUstream_st* stream);

// --- reduce.cu
// A strided walk over some dims of a tensor (outermost first; strides in elements), as the CPU's.
using Walk = DimWalk<kMaxDims>;
// Bytes of scratch launch_reduce needs for these walks (0: none); the caller allocates it on the stream's device.
// Depends on the sizes only, so the summation order is the same on every run.
int64_t reduce_workspace_bytes(ReduceOp op, const Walk& kept, const Walk& red);
// out[j] (contiguous, j in `kept` order) = op over `red` of x at kept.offset(j) + red.offset(i).
// Sum/Prod give x's type for floats and Int64 for integers, Max/Min x's type, Arg* Int64 (first extreme,
// NaN counts as the extreme). requires: nred >= 1 (the caller fills empty reductions), nout >= 1.
void launch_reduce(ReduceOp op, const Operand& out, const Operand& x, const Walk& kept, const Walk& red,
                   void* workspace, CUstream_st* stream);

// --- softmax.cu: x and out contiguous [outer, D, inner]; softmax or log-softmax over D (floating types).
void launch_softmax(DType type, void* out, const void* x, int64_t outer, int64_t D, int64_t inner, bool log,
                    CUstream_st* stream);

// --- cross_entropy.cu: cross_entropy from class indices (backend.h's class_cross_entropy): logits and dlogits
// contiguous [rows, cols] of `type` (floating); targets contiguous int64 [rows]; loss [rows], stats [rows, 2], scale
// (one value, scale_stride 0, or [rows], scale_stride 1) in the compute type (float, double for Float64).
void launch_class_cross_entropy(DType type, void* loss, void* stats, const void* logits, const int64_t* targets,
                                int64_t rows, int64_t cols, CUstream_st* stream);
void launch_class_cross_entropy_backward(DType type, void* dlogits, const void* logits, const int64_t* targets,
                                         const void* stats, const void* scale, int64_t scale_stride, int64_t rows,
                                         int64_t cols, CUstream_st* stream);

// --- cumsum.cu: x and out contiguous [outer, n, inner], of one type (a floating one or Int64); out = the running
// sum over n, from the end when reverse. Floating sums accumulate in double, Int64 ones wrap (as the CPU's).
void launch_cumsum(DType type, void* out, const void* x, int64_t outer, int64_t n, int64_t inner, bool reverse,
                   CUstream_st* stream);

// --- attention.cu: q [BH, Tq, d], k [BH, Tk, d], v [BH, Tk, dv], out [BH, Tq, dv] contiguous, one floating type
// (16-bit floats compute in float); lse and dsum [BH, Tq] float32 (float64 for float64); mask as AttentionParams
// says (kernel_params.h), null when none. d and dv at most 256.
void launch_attention(DType type, void* out, void* lse, const void* q, const void* k, const void* v, const void* mask,
                      const AttentionParams& p, CUstream_st* stream);
// gq, gk, gv (every element written) from gout and dsum[i] = sum(gout[i] * out[i]).
void launch_attention_backward(DType type, void* gq, void* gk, void* gv, const void* gout, const void* q, const void* k,
                               const void* v, const void* lse, const void* dsum, const void* mask,
                               const AttentionParams& p, CUstream_st* stream);

// --- sort.cu: x contiguous [rows, n] of any type; out (contiguous [rows, n]) = the indices that sort each row,
// stable, NaN last (first when descending), as the CPU's. Rows longer than 2048 (CUB's radix sort) need a
// workspace of argsort_workspace_bytes(type, rows, n) bytes on the stream's device (0: none, workspace may be null);
// it asks CUB, so the device must be current.
int64_t argsort_workspace_bytes(DType type, int64_t rows, int64_t n);
void launch_argsort(DType type, int64_t* out, const void* x, int64_t rows, int64_t n, bool descending, void* workspace,
                    int64_t workspace_bytes, CUstream_st* stream);

// --- index.cu (x, out, src contiguous; idx int64, values checked by check_range, possibly not yet: see backend.h)
// out[o, i, k] = x[o, idx[i], k] for x [outer, D, inner], out [outer, n, inner]; elements of `itemsize` bytes;
// 0 where idx[i] is outside [0, D).
void launch_index_select(void* out, const void* x, const int64_t* idx, int64_t outer, int64_t D, int64_t n,
                         int64_t inner, int itemsize, CUstream_st* stream);
// out[o, idx[i], k] += src[o, i, k] with atomics (Float32, Float64, Int32, Int64 only); skips idx[i] outside [0, D).
void launch_index_add(DType type, void* out, const void* src, const int64_t* idx, int64_t outer, int64_t D, int64_t n,
                      int64_t inner, CUstream_st* stream);
// A failed index check, written by check_range_kernel into host memory the GPU writes directly (mapped pinned).
struct RangeCheckRecord {
  int64_t min = 0, max = 0;
  uint32_t check = 0;   // which queued check (host_wait.cpp's registry)
  int32_t claimed = 0;  // set (atomically, among the GPU's threads) by the failing check that records itself
  int32_t failed = 0;   // written last, once the fields above are visible to the host
};
// If minmax[0] < lo or minmax[1] >= hi, and no failure is recorded yet: records this one in *record. One thread;
// queued on `stream`, nothing waits for it.
void launch_check_range(const int64_t* minmax, int64_t lo, int64_t hi, uint32_t check, RangeCheckRecord* record,
                        CUstream_st* stream);

// --- norm.cu: the batch-norm passes of backend.h (batch_norm_*) over x viewed as [N, C, S] (contiguous; any float
// type, y, dy, dx of x's; per-channel arrays [C] of the compute type: float for 16-bit x, else x's type; w may be
// null: 1, b null: 0); sums accumulate in double and the per-channel coefficients come from scalar_fused.h, as on
// the CPU. The two sums take `workspace`: batch_norm_workspace_bytes(n, c, s) bytes (kernel_params.h), or null when
// that is 0.
struct NcsShape {
  int64_t n = 0, c = 0, s = 0;
};
void launch_batch_norm_stats(DType type, void* mean, void* var, const void* x, const NcsShape& d, void* workspace,
                             CUstream_st* stream);
// relu: y = relu(y) in the same pass.
void launch_batch_norm_elemt(DType type, void* y, const void* x, const void* mean, const void* invstd, const void* w,
                             const void* b, bool relu, const NcsShape& d, CUstream_st* stream);
// relu_y (batch_norm_relu's output) not null: dy counts as 0 wherever relu_y is not > 0, in both passes.
void launch_batch_norm_backward_reduce(DType type, void* sum_dy, void* sum_dy_xmu, const void* dy, const void* x,
                                       const void* mean, const void* relu_y, const NcsShape& d, void* workspace,
                                       CUstream_st* stream);
// sum_dy and sum_dy_xmu null: fixed running statistics.
void launch_batch_norm_backward_elemt(DType type, void* dx, const void* dy, const void* x, const void* mean,
                                      const void* invstd, const void* w, const void* sum_dy, const void* sum_dy_xmu,
                                      int64_t count, const void* relu_y, const NcsShape& d, CUstream_st* stream);

// --- layer_norm.cu: backend.h's row_norm / row_norm_backward over the rows of x [norm.rows, norm.cols]
// (contiguous, float32 or float64; w, b [cols] or null: 1 and 0; mean, rstd [rows]); sums in double. dx, dw, db
// may each be null.
void launch_row_norm(DType type, const RowNorm& norm, void* y, void* mean, void* rstd, const void* x, const void* w,
                     const void* b, CUstream_st* stream);
// workspace: row_norm_grad_workspace_bytes(rows, cols) bytes (kernel_params.h) when dw or db is wanted.
void launch_row_norm_backward(DType type, const RowNorm& norm, void* dx, void* dw, void* db, const void* dy,
                              const void* x, const void* mean, const void* rstd, const void* w, void* workspace,
                              CUstream_st* stream);

// --- random.cu: out contiguous, n elements; element i from Philox4x32-10 block (offset + i / 4), lane i % 4,
// keyed by seed (as the CPU backend; ember/internal/philox.h).
void launch_random(RandomKind kind, DType type, void* out, int64_t n, double lo, double hi, uint64_t seed,
                   uint64_t offset, CUstream_st* stream);

// --- pool.cu: NCHW, contiguous x/gy; floating types. Max picks the first maximum of a window (NaN wins);
// avg divides by the full window.
struct PoolShape {
  int64_t nc = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  int64_t c = 1;                // channels (nc = N * c)
  bool channels_last = false;  // every tensor NHWC-ordered (contiguous in channels-last), else NCHW-contiguous
};
void launch_pool2d(bool max, DType type, void* out, const void* x, const PoolShape& s, CUstream_st* stream);
// gx (every element written) = gradient of launch_pool2d.
void launch_pool2d_backward(bool max, DType type, void* gx, const void* gy, const void* x, const PoolShape& s,
                            CUstream_st* stream);

// --- optim.cu: multi-tensor launches (PyTorch's multi_tensor_apply). A TensorBatch holds up to kBatchTensors
// contiguous tensors of one dtype, each given by up to kBatchLists pointers (e.g. param, grad, exp_avg, exp_avg_sq)
// of numel elements; block b takes elements [block_chunk[b] * kBatchChunk, + kBatchChunk) of tensor
// block_tensor[b]. So a launch updates many small tensors, and a large one spreads over many blocks (and
// launches). Passed by value as kernel parameters: with the coefficients, under the 4 KiB every CUDA version takes.
constexpr int kBatchLists = 4;
constexpr int kBatchTensors = 36;
constexpr int kBatchBlocks = 320;
constexpr int64_t kBatchChunk = 65536;
struct TensorBatch {
  void* ptr[kBatchLists][kBatchTensors];
  int64_t numel[kBatchTensors];
  unsigned char block_tensor[kBatchBlocks];
  int32_t block_chunk[kBatchBlocks];
};
static_assert(sizeof(TensorBatch) + 256 <= 4096, "a TensorBatch and its coefficients must fit in 4 KiB");
// The fused optimiser updates over a batch, scalar_fused.h's update (the CPU's), one hyperparameter set for all:
// float32 / float64 parameters with state of their dtype, float16 / bfloat16 parameters with float32 state.
// SGD's lists: param, grad, momentum buffer (null pointers without momentum); Adam's: param, grad, exp_avg,
// exp_avg_sq.
void launch_sgd(DType type, const TensorBatch& batch, int blocks, const SgdParams& a, CUstream_st* stream);
void launch_adam(DType type, const TensorBatch& batch, int blocks, const AdamParams& a, CUstream_st* stream);
// GradScaler's unscale of a batch (list 0: the gradients, in place); *found_inf = 1 on inf or NaN.
void launch_amp_unscale(DType type, const TensorBatch& batch, int blocks, float* found_inf, double inv_scale,
                        CUstream_st* stream);

// --- matmul_int.cu: out[b] = a[b] @ b[b] for integer types (wrapping), any strides (cuBLAS has no integer
// GEMM that matches); sa/sb are {batch, row, col} strides in elements, out is contiguous.
void launch_matmul_int(DType type, void* out, const void* a, const void* b, int64_t batch, int64_t m, int64_t n,
                       int64_t k, const int64_t sa[3], const int64_t sb[3], CUstream_st* stream);

}  // namespace ember::cuda::kernels
