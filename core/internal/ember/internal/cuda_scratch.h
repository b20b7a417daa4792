// defines: the scratch bytes the CUDA kernels take from the caching allocator besides their outputs, written once
// for the kernels (cuda/src/kernels/reduce.cu, sort.cu) and for memory::plan, which allocates the same on a CUDA
// plan (core/src/memory_plan.cpp): a split reduction's per-chunk partials and a long row's argsort buffer. Plain
// C++17, host only; private to core/ and cuda/.
#pragma once
#include <climits>
#include <cstdint>

#include "ember/core/op_list.h"
#include "ember/internal/dim_walk.h"

namespace ember::detail {

// --- reductions (reduce.cu): of x along `red` for each output in `kept`
constexpr int kCudaReduceMaxDims = 16;              // a walk's dims (launch.h's kMaxDims)
constexpr int64_t kCudaReduceThreadPerOutput = 64;  // at most this many elements: one thread per output
constexpr int64_t kCudaReduceChunk = 4096;          // elements per block before a reduction is split into chunks
constexpr int64_t kCudaReduceMaxTasks = 1024;       // chunks are added until this many blocks (outputs x chunks)
constexpr int64_t kCudaReduceBlock = 256;           // threads per block (common.cuh's kBlockSize)

// The three shapes of launch.
enum class CudaReducePlan { ThreadPerOutput, Column, BlockPerOutput };
template <int N>
CudaReducePlan cuda_reduce_plan(ReduceOp op, const DimWalk<N>& kept, const DimWalk<N>& red) {
  if (red.numel <= kCudaReduceThreadPerOutput) return CudaReducePlan::ThreadPerOutput;
  if (!is_index_reduction(op) && kept.contiguous()) return CudaReducePlan::Column;
  return CudaReducePlan::BlockPerOutput;
}
// Chunks of the reduced elements, for enough blocks to fill the GPU (kCudaReduceMaxTasks) without chunks below
// kCudaReduceChunk elements (block per output) or 64 (column: a chunk is one thread's serial loop). Sizes only, so
// the summation order is the same on every run.
template <int N>
int64_t cuda_reduce_chunks(ReduceOp op, const DimWalk<N>& kept, const DimWalk<N>& red) {
  const int64_t nout = kept.numel, nred = red.numel;
  switch (cuda_reduce_plan(op, kept, red)) {
    case CudaReducePlan::ThreadPerOutput:
      return 1;
    case CudaReducePlan::Column: {
      const int64_t blocks_x = (nout + kCudaReduceBlock - 1) / kCudaReduceBlock;
      const int64_t by_size = (nred + 63) / 64,
                    by_tasks = blocks_x >= kCudaReduceMaxTasks ? 1 : kCudaReduceMaxTasks / blocks_x;
      const int64_t chunks = by_size < by_tasks ? by_size : by_tasks;
      return chunks < 65535 ? chunks : 65535;  // gridDim.y
    }
    case CudaReducePlan::BlockPerOutput: {
      if (is_index_reduction(op) || nout >= kCudaReduceMaxTasks) return 1;
      const int64_t by_size = (nred + kCudaReduceChunk - 1) / kCudaReduceChunk, by_tasks = kCudaReduceMaxTasks / nout;
      return by_size < by_tasks ? by_size : by_tasks;
    }
  }
  return 1;
}
// The partials of a split reduction: every accumulator is at most 8 bytes.
template <int N>
int64_t cuda_reduce_workspace_bytes(ReduceOp op, const DimWalk<N>& kept, const DimWalk<N>& red) {
  const int64_t chunks = cuda_reduce_chunks(op, kept, red);
  return chunks > 1 ? kept.numel * chunks * 8 : 0;
}

// --- argsort (sort.cu): rows of up to kCudaSortSharedMax elements sort in shared memory, with no workspace. Longer
// rows sort as (key, index) pairs with CUB's radix sort in a workspace of: two key buffers (key_bytes an element), a
// second index buffer (the first is the output), the row offsets (segmented sorts only), and CUB's temporary
// storage. Rows of at least kCudaSortOneSweepRow elements, up to kCudaSortOneSweepRows of them, sort one after
// another with CUB's onesweep sort, which spreads a row over the whole GPU; otherwise one segmented sort takes all
// the rows (a block a row), in groups of under 2^31 elements. CUB's storage depends on the GPU's tuning, so the
// plan takes cuda_radix_temp_bound, and sort.cu allocates the larger of that bound and what CUB asks: the plan is
// exact wherever the bound holds. The bound: a segmented sort given both double buffers keeps only alignment
// slack; a onesweep sort keeps per portion (at least 2^27 elements) and pass (at most one per key bit) a 256-digit
// histogram of 8-byte counts, a 256-digit lookback per tile of a portion (tiles of at least 1024 elements), and a
// counter per portion and pass, each of CUB's five allocations aligned to 256 bytes.
constexpr int64_t kCudaSortSharedMax = 2048;
constexpr int64_t kCudaSortOneSweepRow = int64_t{1} << 16;
constexpr int64_t kCudaSortOneSweepRows = 64;
constexpr int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}
constexpr bool cuda_argsort_one_sweep(int64_t rows, int64_t n) {
  return rows == 1 || n > INT32_MAX || (n >= kCudaSortOneSweepRow && rows <= kCudaSortOneSweepRows);
}
constexpr int64_t cuda_align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }
constexpr int64_t cuda_radix_temp_bound(int64_t rows, int64_t n, int64_t key_bytes) {
  if (!cuda_argsort_one_sweep(rows, n)) return 64 * 1024;
  const int64_t portions = (n + (int64_t{1} << 27) - 1) >> 27, passes = key_bytes * 8;
  const int64_t in_portion = n < (int64_t{1} << 28) ? n : (int64_t{1} << 28);
  return 5 * 256 + portions * passes * 256 * 8 + (in_portion + 1023) / 1024 * 256 * 8 + portions * passes * 8;
}
constexpr int64_t cuda_argsort_radix_bytes(int64_t rows, int64_t n, int64_t key_bytes) {
  const int64_t items = rows * n, offsets = cuda_argsort_one_sweep(rows, n) ? 0 : cuda_align256((rows + 1) * 8);
  return 2 * cuda_align256(items * key_bytes) + cuda_align256(items * 8) + offsets;
}
// key_bytes: the dtype's element size (the radix keys are unsigned integers of that width).
constexpr int64_t cuda_argsort_workspace_bytes(int64_t rows, int64_t n, int64_t key_bytes) {
  if (n <= kCudaSortSharedMax) return 0;
  return cuda_argsort_radix_bytes(rows, n, key_bytes) + cuda_radix_temp_bound(rows, n, key_bytes);
}

}  // namespace ember::detail
