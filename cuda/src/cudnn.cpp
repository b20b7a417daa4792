// defines: cudnn_conv2d / cudnn_conv2d_backward (compute_internal.h): float16 / bfloat16 through cuDNN's graph API
// where it serves them (cudnn_conv_graph.cpp), everything else on cuDNN's legacy convolution API, with the
// per-thread cuDNN handles and the per-shape algorithm cache below. Without cuDNN in the build (EMBER_WITH_CUDNN
// 0) the entry points throw DeviceError (pooling does not need cuDNN: pool.cu).
//
// Algorithms: cuDNN's heuristics (cudnnGet*Algorithm_v7, which run nothing) rank the algorithms for a
// shape; the first deterministic one that works within the workspace limit is taken (any working one
// when none is deterministic), and cached per (device, dtype, TF32, shapes, stride, padding, direction).
// Heuristics instead of cudnnFind* (which times every algorithm): no warm-up cost on a new shape, no
// large trial allocations, and the same algorithm on every run (reproducible results). cuda::set_cudnn_benchmark(true)
// times them instead (cudnnFind*, once per shape) and keeps the fastest (the fastest deterministic one under
// use_deterministic_algorithms); the cache key holds both settings.
// Batches whose tensors exceed cuDNN's 32-bit element counts run as slices of the batch (images_per_slice).
#include "compute_internal.h"

#if EMBER_WITH_CUDNN
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "check.h"
#include "cudnn_conv_graph.h"
#include "device_guard.h"
#include "ember/core/determinism.h"
#include "ember/core/factory.h"
#include "ember/core/memory_plan.h"
#include "ember/cuda/cuda.h"
#include "handle_pool.h"
#include "stream_internal.h"
#endif

namespace ember::cuda::detail {

#if !EMBER_WITH_CUDNN

bool have_cudnn() { return false; }
bool cudnn_takes(DType, int) { return false; }
[[noreturn]] static void no_cudnn(const char* op) {
  throw DeviceError(ember::detail::str(op,
                                       ": this build of ember has no cuDNN, which CUDA convolutions use "
                                       "(reconfigure with -DCUDNN_ROOT=<cuDNN 9 install> ; see docs/cuda.md)"));
}
void cudnn_conv2d(const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) { no_cudnn("conv2d"); }
void cudnn_conv2d_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                           const Conv2dParams&) {
  no_cudnn("conv2d_backward");
}

#else

namespace {

constexpr size_t kMaxWorkspace = size_t{1} << 30;  // algorithms wanting more are skipped

// One handle per (thread, device), pooled when the thread exits (handle_pool.h, as cublas.cpp's).
cudnnHandle_t handle_for(int device) {
  return HandlePool<cudnnHandle_t>::get(device, [](cudnnHandle_t* h) { EMBER_CUDNN_CHECK(cudnnCreate(h)); });
}

int as_int(const char* op, int64_t v) {
  EMBER_CHECK_DEVICE(v <= INT_MAX, op, ": size ", v, " exceeds cuDNN's 32-bit limit");
  return static_cast<int>(v);
}

cudnnDataType_t data_type(DType dt) {
  switch (dt) {
    case kFloat64:
      return CUDNN_DATA_DOUBLE;
    case kFloat16:
      return CUDNN_DATA_HALF;
    case kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return CUDNN_DATA_FLOAT;
  }
}
// What cuDNN accumulates in: float for the 16-bit types (as PyTorch's convolutions), else the data's own type.
cudnnDataType_t compute_type(DType dt) { return dt == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; }
// The math type a descriptor starts from: tensor cores for 16-bit data; CUDNN_FMA_MATH keeps float32 off TF32
// tensor cores unless the user allowed it.
cudnnMathType_t start_math(DType dt) {
  if (is_reduced_float(dt)) return CUDNN_TENSOR_OP_MATH;
  return dt == kFloat32 && allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

// A dense tensor laid out NHWC (a 1x1 weight is both layouts: NCHW then, which reads the same memory).
bool channels_last(const Tensor& t) { return t.suggest_memory_format() == MemoryFormat::ChannelsLast; }

// The descriptors of one convolution, destroyed with it.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Descriptors(const char* op, const Tensor& x_t, const Tensor& w_t, const Tensor& y_t, const Conv2dParams& p) {
    const cudnnDataType_t dt = data_type(x_t.dtype());
    auto dim = [&](const Tensor& t, int d) { return as_int(op, t.size(d)); };
    EMBER_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    EMBER_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    EMBER_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    EMBER_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    // x and y by their strides (NCHW or channels-last: cuDNN picks its NHWC kernels from them); the filter by its
    // format, which the raw op made the input's (conv_pool.cpp: x, w and y in one layout).
    auto set_tensor = [&](cudnnTensorDescriptor_t desc, const Tensor& t) {
      auto st = [&](int d) { return as_int(op, t.stride(d)); };
      EMBER_CUDNN_CHECK(cudnnSetTensor4dDescriptorEx(desc, dt, dim(t, 0), dim(t, 1), dim(t, 2), dim(t, 3), st(0), st(1),
                                                     st(2), st(3)));
    };
    set_tensor(x, x_t);
    set_tensor(y, y_t);
    const bool nhwc = (channels_last(x_t) || channels_last(w_t)) && w_t.is_contiguous(MemoryFormat::ChannelsLast);
    const cudnnTensorFormat_t wf = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    EMBER_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, dt, wf, dim(w_t, 0), dim(w_t, 1), dim(w_t, 2), dim(w_t, 3)));
    EMBER_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, as_int(op, p.pad_h), as_int(op, p.pad_w),
                                                      as_int(op, p.stride_h), as_int(op, p.stride_w), 1, 1,
                                                      CUDNN_CROSS_CORRELATION, compute_type(x_t.dtype())));
    EMBER_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, start_math(x_t.dtype())));
  }
  ~Descriptors() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

enum class Direction { Forward, BackwardData, BackwardFilter };
// device, dtype, tf32, direction, benchmark, deterministic, sizes+params+layout
using Key = std::tuple<int, int, bool, int, bool, bool, std::vector<int64_t> >;
struct Choice {
  int algo = 0;
  size_t workspace = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;  // what cuDNN ranked the algorithm with
};
std::mutex g_cache_mu;
std::map<Key, Choice> g_cache;

Key key_for(Direction d, int device, const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  std::vector<int64_t> v(x.shape().begin(), x.shape().end());
  v.insert(v.end(), w.shape().begin(), w.shape().end());
  v.insert(v.end(), {p.stride_h, p.stride_w, p.pad_h, p.pad_w, channels_last(x) ? 1 : 0, channels_last(w) ? 1 : 0});
  return {device,
          static_cast<int>(x.dtype()),
          allow_tf32(),
          static_cast<int>(d),
          cudnn_benchmark(),
          are_deterministic_algorithms_enabled(),
          std::move(v)};
}

// The first deterministic usable entry of cuDNN's ranked list, else the first usable one; or, timed
// (cudnn_benchmark) and not asked for determinism, the first usable one, the fastest. (The workspace size is then
// asked of cuDNN for that algorithm, rather than trusting the ranking's figure.)
template <class Perf>
Choice pick(const char* op, const Perf* perf, int n, bool fastest = false) {
  const Perf* any = nullptr;
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspace) continue;
    if (perf[i].determinism == CUDNN_DETERMINISTIC || (fastest && !are_deterministic_algorithms_enabled()))
      return {static_cast<int>(perf[i].algo), perf[i].memory, perf[i].mathType};
    if (!any) any = &perf[i];
  }
  EMBER_CHECK_DEVICE(any, op, ": cuDNN offers no algorithm for this convolution within ", kMaxWorkspace >> 20,
                     " MiB of workspace");
  return {static_cast<int>(any->algo), any->memory, any->mathType};
}

// For 16-bit data, and for float32 with TF32 allowed, run the algorithm with the math type cuDNN ranked it with
// (it may need tensor ops); otherwise the descriptor stays on CUDNN_FMA_MATH, whatever the ranking said.
void use_math(const Descriptors& d, const Choice& c, DType dt) {
  if (is_reduced_float(dt) || (dt == kFloat32 && allow_tf32()))
    EMBER_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, c.math));
}

// The math type a convolution descriptor starts from (Descriptors' constructor); set again before ranking,
// because a backward pass ranks twice with one descriptor.
void base_math(const Descriptors& d, DType dt) {
  EMBER_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, start_math(dt)));
}

// c.workspace: what cuDNN says c.algo needs, asked for the math type the algorithm will run with.
void query_workspace(Direction dir, cudnnHandle_t h, const Descriptors& d, DType dt, Choice& c) {
  use_math(d, c, dt);
  if (dir == Direction::Forward)
    EMBER_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
        h, d.x, d.w, d.conv, d.y, static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), &c.workspace));
  else if (dir == Direction::BackwardData)
    EMBER_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
        h, d.w, d.y, d.conv, d.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), &c.workspace));
  else
    EMBER_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, d.x, d.y, d.conv, d.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), &c.workspace));
}

// cudnn_benchmark: cuDNN runs every algorithm on buffers of its own and returns them by time.
Choice find_fastest(Direction dir, const char* op, cudnnHandle_t h, const Descriptors& d) {
  int n = 0;
  if (dir == Direction::Forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    EMBER_CUDNN_CHECK(
        cudnnFindConvolutionForwardAlgorithm(h, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
    return pick(op, perf, n, true);
  }
  if (dir == Direction::BackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    EMBER_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(h, d.w, d.y, d.conv, d.x,
                                                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf));
    return pick(op, perf, n, true);
  }
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  EMBER_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(h, d.x, d.y, d.conv, d.w,
                                                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf));
  return pick(op, perf, n, true);
}

Choice choose(Direction dir, const char* op, cudnnHandle_t h, const Descriptors& d, int device, const Tensor& x,
              const Tensor& w, const Conv2dParams& p) {
  const Key key = key_for(dir, device, x, w, p);
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) return it->second;
  }
  Choice c;
  int n = 0;
  base_math(d, x.dtype());
  if (cudnn_benchmark()) {
    c = find_fastest(dir, op, h, d);
  } else if (dir == Direction::Forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    EMBER_CUDNN_CHECK(
        cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
    c = pick(op, perf, n);
  } else if (dir == Direction::BackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    EMBER_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x,
                                                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf));
    c = pick(op, perf, n);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    EMBER_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w,
                                                                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf));
    c = pick(op, perf, n);
  }
  query_workspace(dir, h, d, x.dtype(), c);
  std::lock_guard<std::mutex> lock(g_cache_mu);
  g_cache.emplace(key, c);
  return c;
}

// Scratch from the caching allocator on the current stream (freed back to it after the call is queued).
Tensor workspace(size_t bytes, Device dev) {
  Tensor t = empty({static_cast<int64_t>(bytes > 0 ? bytes : 1)}, {.dtype = kUInt8, .device = dev});
  memory::tag(t, memory::Category::kWorkspace);  // memory_history.h's counters and timeline
  return t;
}

// The workspace of choice c; when memory is too short for it, c becomes the cheapest algorithm instead —
// algorithm 0 of each direction (implicit GEMM and its backward counterparts), which needs little or no
// workspace — rather than failing a convolution that can run. Then use_math for whichever algorithm it is.
Tensor workspace_or_cheaper(Direction dir, cudnnHandle_t h, const Descriptors& d, DType dt, Choice& c, Device dev) {
  Tensor ws;
  try {
    ws = workspace(c.workspace, dev);
  } catch (const OutOfMemoryError&) {
    Choice cheap{.algo = 0, .workspace = 0, .math = start_math(dt)};
    base_math(d, dt);
    query_workspace(dir, h, d, dt, cheap);
    if (cheap.workspace >= c.workspace) throw;
    c = cheap;
    ws = workspace(c.workspace, dev);
  }
  use_math(d, c, dt);
  return ws;
}

}  // namespace

bool have_cudnn() { return true; }

bool cudnn_takes(DType dt, int device) {
  if (dt == kFloat32 || dt == kFloat64) return true;
  if (!is_reduced_float(dt)) return false;
  int major = 0;
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= (dt == kFloat16 ? 7 : 8);
}

namespace {

// cuDNN's 4-d descriptors take 32-bit sizes and strides: a tensor of more than INT_MAX elements (a large batch) runs
// as several convolutions over slices of the batch, each under the limit. EMBER_CUDNN_MAX_ELEMENTS lowers the limit
// (the tests run the slicing on small tensors).
int64_t max_elements() {
  static const int64_t limit = [] {
    const char* e = std::getenv("EMBER_CUDNN_MAX_ELEMENTS");
    const long long v = e ? std::atoll(e) : 0;
    return v > 0 && v < INT_MAX ? static_cast<int64_t>(v) : static_cast<int64_t>(INT_MAX);
  }();
  return limit;
}
// Images per slice, so that neither a's nor b's slice (both [N, ...]) exceeds max_elements().
int64_t images_per_slice(const char* op, const Tensor& a, const Tensor& b) {
  const int64_t n = a.size(0);
  if (n == 0) return 1;
  const int64_t per_image = std::max(a.numel(), b.numel()) / n;
  EMBER_CHECK_DEVICE(per_image <= max_elements(), op, ": one image of ", a.shape(), " or ", b.shape(),
                     " has more elements than cuDNN's 32-bit sizes hold (", max_elements(), ")");
  return std::max<int64_t>(1, max_elements() / std::max<int64_t>(per_image, 1));
}

struct Scalars {  // alpha = 1 and beta = 0 or 1 in the data's precision class
  double one_d = 1, zero_d = 0;
  float one_f = 1, zero_f = 0;
  bool dbl;
  explicit Scalars(DType dt) : dbl(dt == kFloat64) {}
  const void* one() const { return dbl ? static_cast<const void*>(&one_d) : &one_f; }
  const void* beta(bool accumulate) const {
    if (accumulate) return one();
    return dbl ? static_cast<const void*>(&zero_d) : &zero_f;
  }
};

// One cuDNN call over a slice of the batch, x [n, C, H, W] and y [n, K, P, Q] (the output, or its gradient):
// Forward writes y; BackwardData writes x_grad; BackwardFilter writes w_grad, or adds to it when `accumulate`.
void run_slice(Direction dir, cudnnHandle_t h, int device, const Tensor& x, const Tensor& w, const Tensor& y,
               const Tensor& x_grad, const Tensor& w_grad, const Conv2dParams& p, bool accumulate) {
  const char* op = dir == Direction::Forward ? "conv2d" : "conv2d_backward";
  Descriptors d(op, x, w, y, p);
  Choice c = choose(dir, op, h, d, device, x, w, p);
  Tensor ws = workspace_or_cheaper(dir, h, d, x.dtype(), c, y.device());
  const Scalars s(x.dtype());
  switch (dir) {
    case Direction::Forward:
      EMBER_CUDNN_CHECK(cudnnConvolutionForward(h, s.one(), d.x, x.data_ptr(), d.w, w.data_ptr(), d.conv,
                                                static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws.data_ptr(),
                                                c.workspace, s.beta(false), d.y, y.data_ptr()));
      break;
    case Direction::BackwardData:
      EMBER_CUDNN_CHECK(cudnnConvolutionBackwardData(h, s.one(), d.w, w.data_ptr(), d.y, y.data_ptr(), d.conv,
                                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws.data_ptr(),
                                                     c.workspace, s.beta(false), d.x, x_grad.data_ptr()));
      break;
    case Direction::BackwardFilter:
      EMBER_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, s.one(), d.x, x.data_ptr(), d.y, y.data_ptr(), d.conv,
                                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo),
                                                       ws.data_ptr(), c.workspace, s.beta(accumulate), d.w,
                                                       w_grad.data_ptr()));
      break;
  }
}

}  // namespace

void cudnn_conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  if (out.numel() == 0) return;
  const int device = out.device().index();
  DeviceGuard guard(device);
  cudnnHandle_t h = handle_for(device);
  EMBER_CUDNN_CHECK(cudnnSetStream(h, current_stream_handle(device)));
  const int64_t n = x.size(0), step = images_per_slice("conv2d", x, out);
  if (step >= n && cudnn_graph_conv(ConvPass::Forward, x, w, out, out, p)) return;  // 16-bit: the graph API
  for (int64_t n0 = 0; n0 < n; n0 += step) {
    const int64_t n1 = std::min(n, n0 + step);
    run_slice(Direction::Forward, h, device, x.slice(0, n0, n1), w, out.slice(0, n0, n1), Tensor(), Tensor(), p, false);
  }
}

void cudnn_conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx, const Tensor& gw,
                           const Conv2dParams& p) {
  if (!gx.defined() && !gw.defined()) return;
  const int device = gy.device().index();
  DeviceGuard guard(device);
  cudnnHandle_t h = handle_for(device);
  EMBER_CUDNN_CHECK(cudnnSetStream(h, current_stream_handle(device)));
  const int64_t n = x.size(0), step = images_per_slice("conv2d_backward", x, gy);
  // 16-bit gradients of the whole batch through the graph API where it serves them; the rest the legacy calls
  const bool need_gx = gx.defined() && gx.numel() > 0, need_gw = gw.defined() && gw.numel() > 0;
  const bool gx_done = need_gx && step >= n && cudnn_graph_conv(ConvPass::Data, x, w, gy, gx, p);
  const bool gw_done = need_gw && step >= n && cudnn_graph_conv(ConvPass::Filter, x, w, gy, gw, p);
  for (int64_t n0 = 0; n0 < n; n0 += step) {
    const int64_t n1 = std::min(n, n0 + step);
    const Tensor xs = x.slice(0, n0, n1), gys = gy.slice(0, n0, n1);
    if (need_gx && !gx_done)
      run_slice(Direction::BackwardData, h, device, xs, w, gys, gx.slice(0, n0, n1), Tensor(), p, false);
    if (need_gw && !gw_done)
      run_slice(Direction::BackwardFilter, h, device, xs, w, gys, Tensor(), gw, p, /*accumulate=*/n0 > 0);
  }
}

#endif

}  // namespace ember::cuda::detail
