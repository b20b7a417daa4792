// defines: the reduction kernels and launch_reduce / reduce_workspace_bytes (launch.h): sum, prod, max, min
// over any set of dims, argmax / argmin over one. Accumulators as core/cpu/reduce.cpp: double for floating
// sums and products, uint64 (wrapping) for integer ones, the compute type for max/min. Every summation
// order depends on the sizes only (fixed chunks, fixed tree, partials combined in order), so results are
// bitwise the same on every run.
//   - nred <= 64: one thread per output walks its elements in order;
//   - kept dims contiguous (a column reduction): one thread per (output, chunk), adjacent threads on adjacent
//     outputs, so reads are coalesced; with several chunks a second kernel combines them in chunk order;
//   - otherwise one block per (output, chunk) reduces in a shared-memory tree, chunks combined likewise.
#include <cstdint>

#include "common.cuh"
#include "ember/internal/cuda_scratch.h"

namespace ember::cuda::kernels {
namespace {

// The launch shapes and chunk counts, shared with memory::plan (ember/internal/cuda_scratch.h).
namespace shared = ::ember::detail;
constexpr int64_t kThreadPerOutputMax = shared::kCudaReduceThreadPerOutput;
static_assert(shared::kCudaReduceMaxDims == kMaxDims && shared::kCudaReduceBlock == kBlockSize);
using Plan = shared::CudaReducePlan;
inline Plan plan_for(ReduceOp op, const Walk& kept, const Walk& red) { return shared::cuda_reduce_plan(op, kept, red); }
inline int64_t num_chunks(ReduceOp op, const Walk& kept, const Walk& red) {
  return shared::cuda_reduce_chunks(op, kept, red);
}

// The accumulator math is scalar::ReduceMath (scalar_math.h), the CPU's; this adds the output type.
template <class T, ReduceOp Op>
struct Reducer {
  using C = compute_t<T>;
  using Math = scalar::ReduceMath<Op, C>;
  using A = typename Math::Acc;
  // Sum and prod of integers give int64 (wrapped), of floats the input type; max and min the input type.
  using R = typename std::conditional<Math::kSumLike && !std::is_floating_point<C>::value, int64_t, T>::type;

  __device__ static A init() { return Math::init(); }
  __device__ static A combine(A acc, A v) { return Math::combine(acc, v); }
  __device__ static A step(A acc, T v) { return Math::step(acc, load_c(v)); }
  __device__ static R finish(A acc) {
    if constexpr (Math::kSumLike && !std::is_floating_point<C>::value) return static_cast<int64_t>(acc);
    else if constexpr (is_reduced_v<T>) return scalar::ReducedFloat<T>::from_float(static_cast<float>(acc));
    else return static_cast<T>(acc);
  }
};

template <class T, ReduceOp Op>
__global__ void reduce_thread_kernel(typename Reducer<T, Op>::R* out, const T* x, Walk kept, Walk red) {
  using Red = Reducer<T, Op>;
  EMBER_KERNEL_LOOP(j, kept.numel) {
    const T* base = x + kept.offset(j);
    typename Red::A acc = Red::init();
    for (int64_t i = 0; i < red.numel; ++i) acc = Red::step(acc, base[red.offset(i)]);
    out[j] = Red::finish(acc);
  }
}

// Tasks are (output j, chunk c), j-major. partial is null when chunks == 1 (the block writes out[j]).
template <class T, ReduceOp Op>
__global__ void reduce_block_kernel(typename Reducer<T, Op>::R* out, typename Reducer<T, Op>::A* partial, const T* x,
                                    Walk kept, Walk red, int64_t chunks, int64_t chunk_len) {
  using Red = Reducer<T, Op>;
  using A = typename Red::A;
  __shared__ A buf[kBlockSize];
  const int64_t ntasks = kept.numel * chunks;
  for (int64_t task = blockIdx.x; task < ntasks; task += gridDim.x) {
    const int64_t j = task / chunks, c = task % chunks;
    const int64_t begin = c * chunk_len, end = min(red.numel, begin + chunk_len);
    const T* base = x + kept.offset(j);
    A acc = Red::init();
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc = Red::step(acc, base[red.offset(i)]);
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
      if (static_cast<int>(threadIdx.x) < s) buf[threadIdx.x] = Red::combine(buf[threadIdx.x], buf[threadIdx.x + s]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (partial) partial[task] = buf[0];
      else out[j] = Red::finish(buf[0]);
    }
    __syncthreads();  // buf is reused by the next task
  }
}

template <class T, ReduceOp Op>
__global__ void reduce_finish_kernel(typename Reducer<T, Op>::R* out, const typename Reducer<T, Op>::A* partial,
                                     int64_t nout, int64_t chunks) {
  using Red = Reducer<T, Op>;
  EMBER_KERNEL_LOOP(j, nout) {
    typename Red::A acc = Red::init();
    for (int64_t c = 0; c < chunks; ++c) acc = Red::combine(acc, partial[j * chunks + c]);
    out[j] = Red::finish(acc);
  }
}

// --- argmax / argmin: (value, index) pairs; the first extreme wins, NaN counts as the extreme.
template <class C>
struct ArgPair {
  C v;
  int64_t i;  // -1: no element yet
};
template <class C, bool IsMax>
__device__ inline ArgPair<C> arg_combine(ArgPair<C> a, ArgPair<C> b) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  if (b.i < a.i) {  // keep a the earlier one, so ties go to the first
    const ArgPair<C> t = a;
    a = b;
    b = t;
  }
  if (is_nan(a.v)) return a;
  if (is_nan(b.v)) return b;
  return (IsMax ? b.v > a.v : b.v < a.v) ? b : a;
}

template <class T, bool IsMax>
__global__ void arg_thread_kernel(int64_t* out, const T* x, Walk kept, Walk red) {
  EMBER_KERNEL_LOOP(j, kept.numel) {
    const T* base = x + kept.offset(j);
    int64_t best = 0;
    compute_t<T> bv = load_c(base[red.offset(0)]);
    for (int64_t i = 1; i < red.numel && !is_nan(bv); ++i) {  // the CPU backend's loop
      const compute_t<T> v = load_c(base[red.offset(i)]);
      if (scalar::arg_better<IsMax>(v, bv)) {
        best = i;
        bv = v;
      }
    }
    out[j] = best;
  }
}

template <class T, bool IsMax>
__global__ void arg_block_kernel(int64_t* out, const T* x, Walk kept, Walk red) {
  using C = compute_t<T>;
  __shared__ ArgPair<C> buf[kBlockSize];
  for (int64_t j = blockIdx.x; j < kept.numel; j += gridDim.x) {
    const T* base = x + kept.offset(j);
    ArgPair<C> acc{C(0), -1};
    for (int64_t i = threadIdx.x; i < red.numel; i += blockDim.x)
      acc = arg_combine<C, IsMax>(acc, ArgPair<C>{load_c(base[red.offset(i)]), i});
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
      if (static_cast<int>(threadIdx.x) < s)
        buf[threadIdx.x] = arg_combine<C, IsMax>(buf[threadIdx.x], buf[threadIdx.x + s]);
      __syncthreads();
    }
    if (threadIdx.x == 0) out[j] = buf[0].i;
    __syncthreads();
  }
}

// Column reduction: the kept dims are one contiguous run (x[j + red.offset(i)]: a bias gradient summed over the
// batch, a mean over dim 0). Adjacent threads take adjacent outputs j, so every read of a warp is one coalesced
// row segment; blockIdx.y takes a chunk of the reduced elements, and with several chunks their partials are
// combined in chunk order by reduce_finish_kernel.
template <class T, ReduceOp Op>
__global__ void reduce_column_kernel(typename Reducer<T, Op>::R* out, typename Reducer<T, Op>::A* partial, const T* x,
                                     Walk red, int64_t nout, int64_t chunks, int64_t chunk_len) {
  using Red = Reducer<T, Op>;
  const int64_t c = blockIdx.y, begin = c * chunk_len, end = min(red.numel, begin + chunk_len);
  EMBER_KERNEL_LOOP(j, nout) {
    typename Red::A acc = Red::init();
    for (int64_t i = begin; i < end; ++i) acc = Red::step(acc, x[j + red.offset(i)]);
    if (partial) partial[j * chunks + c] = acc;
    else out[j] = Red::finish(acc);
  }
}

unsigned task_grid(int64_t tasks) {
  return static_cast<unsigned>(tasks < (int64_t{1} << 20) ? tasks : (int64_t{1} << 20));
}

template <class T, ReduceOp Op>
void reduce_typed(const Operand& out, const Operand& x, const Walk& kept, const Walk& red, void* workspace,
                  CUstream_st* stream) {
  using Red = Reducer<T, Op>;
  auto* o = static_cast<typename Red::R*>(out.data);
  const T* in = static_cast<const T*>(x.data);
  const int64_t nout = kept.numel, nred = red.numel;
  const Plan plan = plan_for(Op, kept, red);
  if (plan == Plan::ThreadPerOutput) {
    reduce_thread_kernel<T, Op><<<grid_size(nout), kBlockSize, 0, stream>>>(o, in, kept, red);
    return;
  }
  const int64_t chunks = num_chunks(Op, kept, red);
  const int64_t chunk_len = CEIL_DIV(nred, chunks);
  auto* partial = chunks > 1 ? static_cast<typename Red::A*>(workspace) : nullptr;
  if (plan == Plan::Column) {
    const dim3 grid(grid_size(nout), static_cast<unsigned>(chunks));
    reduce_column_kernel<T, Op><<<grid, kBlockSize, 0, stream>>>(o, partial, in, red, nout, chunks, chunk_len);
  } else {
    reduce_block_kernel<T, Op>
        <<<task_grid(nout * chunks), kBlockSize, 0, stream>>>(o, partial, in, kept, red, chunks, chunk_len);
  }
  if (chunks > 1) reduce_finish_kernel<T, Op><<<grid_size(nout), kBlockSize, 0, stream>>>(o, partial, nout, chunks);
}

template <class T, bool IsMax>
void arg_typed(const Operand& out, const Operand& x, const Walk& kept, const Walk& red, CUstream_st* stream) {
  auto* o = static_cast<int64_t*>(out.data);
  const T* in = static_cast<const T*>(x.data);
  if (red.numel <= kThreadPerOutputMax)
    arg_thread_kernel<T, IsMax><<<grid_size(kept.numel), kBlockSize, 0, stream>>>(o, in, kept, red);
  else arg_block_kernel<T, IsMax><<<task_grid(kept.numel), kBlockSize, 0, stream>>>(o, in, kept, red);
}

}  // namespace

int64_t reduce_workspace_bytes(ReduceOp op, const Walk& kept, const Walk& red) {
  return shared::cuda_reduce_workspace_bytes(op, kept, red);
}

void launch_reduce(ReduceOp op, const Operand& out, const Operand& x, const Walk& kept, const Walk& red,
                   void* workspace, CUstream_st* stream) {
  if (kept.numel == 0 || red.numel == 0) return;
  dispatch(x.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (op) {
#define EMBER_X(Name, str, kind) \
  case ReduceOp::Name: \
    if constexpr (is_index_reduction(ReduceOp::Name)) \
      return arg_typed<T, ReduceOp::Name == ReduceOp::ArgMax>(out, x, kept, red, stream); \
    else return reduce_typed<T, ReduceOp::Name>(out, x, kept, red, workspace, stream);
      EMBER_REDUCE_OPS(EMBER_X)
#undef EMBER_X
    }
  });
  EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::kernels
