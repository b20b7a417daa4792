// defines: creation functions, the global Philox generator (manual_seed), and the CPU thread setting.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../cpu/bf16_gemm.h"
#include "../cpu/isa.h"
#include "../cpu/parallel.h"
#include "ember/core/memory_plan.h"
#include "ember/internal/cuda_hooks.h"
#include "op_utils.h"

namespace ember {

// Sizes must be >= 0, and the element count and strides (the product of the sizes, zeros taken as one) must fit
// in int64 bytes: past that, numel() and the contiguous strides would overflow.
void check_sizes(const char* op, const Shape& shape, DType dtype) {
  int64_t span = static_cast<int64_t>(itemsize(dtype));
  for (int64_t s : shape) {
    EMBER_CHECK_SHAPE(s >= 0, op, ": negative size in shape ", shape);
    EMBER_CHECK_SHAPE(!__builtin_mul_overflow(span, std::max<int64_t>(s, 1), &span), op, ": shape ", shape, " of ",
                      dtype, " is too large (its size in bytes overflows int64)");
  }
}

namespace {
// Inside memory::plan, a factory that filled a real host buffer (PlanningSuspend) hands out a planned tensor, as
// every other op does, even when no cast or move made a new one.
Tensor planned_if_planning(Tensor t) {
  if (memory::is_planning() && !t.is_meta()) return raw::clone(t);
  return t;
}
}  // namespace

Tensor empty(const Shape& shape, const TensorOptions& opts) { return empty(shape, opts, MemoryFormat::Contiguous); }

Tensor empty(const Shape& shape, const TensorOptions& opts, MemoryFormat format) {
  check_sizes("empty", shape, opts.dtype);
  EMBER_CHECK_VALUE(format != MemoryFormat::Preserve, "empty: preserve_format needs a tensor to preserve (use empty ",
                    "with Contiguous or ChannelsLast)");
  EMBER_CHECK_SHAPE(format != MemoryFormat::ChannelsLast || shape.size() == 4,
                    "empty: channels_last needs a 4-D [N, C, H, W] shape, got ", shape);
  if (opts.requires_grad)
    EMBER_CHECK_DTYPE(is_floating(opts.dtype), "requires_grad: only floating-point tensors can require gradients, got ",
                      opts.dtype);
  Allocator& alloc = backend_for(opts.device).allocator(opts.device.index());
  auto storage = std::make_shared<StorageImpl>(static_cast<size_t>(shape.numel()) * itemsize(opts.dtype), alloc);
  Tensor t(std::make_shared<TensorImpl>(std::move(storage), 0, shape, memory_format_strides(shape, format), opts.dtype));
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}

Tensor full(const Shape& shape, Scalar value, const TensorOptions& opts) {
  Tensor t = empty(shape, opts);
  if (t.numel()) backend_for(t.device()).fill(t, value.value);
  return t;
}
Tensor zeros(const Shape& shape, const TensorOptions& opts) { return full(shape, 0, opts); }
Tensor ones(const Shape& shape, const TensorOptions& opts) { return full(shape, 1, opts); }
Tensor zeros_like(const Tensor& x) { return zeros(x.shape(), {.dtype = x.dtype(), .device = x.device()}); }
Tensor ones_like(const Tensor& x) { return ones(x.shape(), {.dtype = x.dtype(), .device = x.device()}); }
Tensor empty_like(const Tensor& x) { return empty(x.shape(), {.dtype = x.dtype(), .device = x.device()}); }
Tensor full_like(const Tensor& x, Scalar v) { return full(x.shape(), v, {.dtype = x.dtype(), .device = x.device()}); }

Tensor arange(double start, double end, double step, const TensorOptions& opts) {
  EMBER_CHECK_VALUE(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
                    "arange: step must be non-zero and bounds finite, got (", start, ", ", end, ", ", step, ")");
  const double n = std::ceil((end - start) / step);
  const int64_t count = n > 0 ? static_cast<int64_t>(n) : 0;
  // One kernel on the tensor's device (no host copy: a blocking copy would make the host wait, and arange runs inside
  // the index ops every step), each element fma(i, step, start) in double, so every device gives the same values.
  Tensor out = empty({count}, opts);
  if (count > 0) backend_for(opts.device).arange(out, start, step);
  return out;
}
Tensor arange(int64_t n, const TensorOptions& opts) { return arange(0, static_cast<double>(n), 1, opts); }

// --- the global generator (generator.cpp)
void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }
PhiloxState get_rng_state() { return default_generator().state(); }
void set_rng_state(const PhiloxState& state) { default_generator().set_state(state); }
PhiloxState next_philox(uint64_t blocks, Generator* g) { return (g ? *g : current_generator()).next(blocks); }

namespace {
Tensor random_tensor(RandomKind kind, const Shape& shape, double lo, double hi, const TensorOptions& opts) {
  TensorOptions o = opts;
  o.requires_grad = false;
  o.generator = nullptr;
  Tensor t = empty(shape, o);
  if (t.numel())
    backend_for(t.device())
        .random(kind, t, lo, hi, next_philox(static_cast<uint64_t>((t.numel() + 3) / 4), opts.generator));
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}
}  // namespace

Tensor rand(const Shape& shape, const TensorOptions& opts) { return uniform(shape, 0, 1, opts); }
Tensor randn(const Shape& shape, const TensorOptions& opts) { return normal(shape, 0, 1, opts); }
Tensor uniform(const Shape& shape, double lo, double hi, const TensorOptions& opts) {
  EMBER_CHECK_DTYPE(is_floating(opts.dtype), "uniform: expected a floating dtype, got ", opts.dtype);
  EMBER_CHECK_VALUE(lo <= hi, "uniform: expected lo <= hi, got [", lo, ", ", hi, ")");
  return random_tensor(RandomKind::Uniform, shape, lo, hi, opts);
}
Tensor normal(const Shape& shape, double mean, double std, const TensorOptions& opts) {
  EMBER_CHECK_DTYPE(is_floating(opts.dtype), "normal: expected a floating dtype, got ", opts.dtype);
  EMBER_CHECK_VALUE(std >= 0, "normal: std must be >= 0, got ", std);
  return random_tensor(RandomKind::Normal, shape, mean, std, opts);
}
Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& opts) {
  EMBER_CHECK_VALUE(low < high, "randint: expected low < high, got [", low, ", ", high, ")");
  EMBER_CHECK_VALUE(static_cast<double>(high) - static_cast<double>(low) <= 4294967296.0, "randint: the range [", low,
                    ", ", high, ") is wider than 2^32");
  EMBER_CHECK_DTYPE(opts.dtype != kBool || (low >= 0 && high <= 2), "randint: range [", low, ", ", high,
                    ") does not fit bool");
  return random_tensor(RandomKind::Int, shape, static_cast<double>(low), static_cast<double>(high), opts);
}

Tensor randperm(int64_t n, const TensorOptions& opts) {
  EMBER_CHECK_VALUE(n >= 0, "randperm: n must be >= 0, got ", n);
  EMBER_CHECK_DTYPE(opts.dtype == kInt64, "randperm: dtype must be int64, got ", opts.dtype);
  Tensor out;
  {
    memory::PlanningSuspend real;  // host buffers filled here, even inside memory::plan
    Tensor keys = rand({n}, {.dtype = kFloat64, .generator = opts.generator});
    out = empty({n}, {.dtype = kInt64});
    int64_t* o = out.data<int64_t>();
    // Fisher-Yates driven by the uniform draws: deterministic for a seed.
    const double* k = keys.data<double>();
    for (int64_t i = 0; i < n; ++i) o[i] = i;
    for (int64_t i = n - 1; i > 0; --i) {
      int64_t j = std::min<int64_t>(static_cast<int64_t>(k[i] * static_cast<double>(i + 1)), i);
      std::swap(o[i], o[j]);
    }
  }
  return planned_if_planning(raw::to_device(out, opts.device));
}

Tensor tensor_from_raw(const void* data, DType src, int64_t count, const Shape& shape, const TensorOptions& opts) {
  check_sizes("tensor", shape, src);
  EMBER_CHECK_SHAPE(shape.numel() == count, "tensor: ", count, " values do not fill shape ", shape, " (", shape.numel(),
                    " elements)");
  Tensor host;
  {
    memory::PlanningSuspend real;  // a host buffer filled here, even inside memory::plan
    host = empty(shape, {.dtype = src});
  }
  if (count) std::memcpy(host.data_ptr(), data, static_cast<size_t>(count) * itemsize(src));
  Tensor t = planned_if_planning(raw::to_device(raw::cast(host, opts.dtype), opts.device));
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}

namespace {
// A CUDA blob must be memory that device's kernels can use: host memory handed in as cuda:0 would crash the first
// kernel that reads it (an illegal address poisons the whole process). Checked where a GPU is usable; without one,
// every op on the tensor throws DeviceError before touching it.
void check_cuda_blob(const void* data, const Device& device) {
  detail::CudaHooks* h = detail::cuda_hooks();
  if (h == nullptr || h->device_count() == 0) return;
  EMBER_CHECK_DEVICE(device.index() < h->device_count(), "from_blob: ", device, " is out of range (", h->device_count(),
                     " CUDA device(s))");
  const std::string problem = h->device_pointer_problem(device.index(), data);
  EMBER_CHECK_DEVICE(problem.empty(), "from_blob: the pointer ", data, " given for ", device, " is ", problem,
                     "; pass memory allocated on ", device, ", or copy host data there with tensor(...).to(", device,
                     ")");
}
}  // namespace

Tensor from_blob(void* data, const Shape& shape, const TensorOptions& opts, std::function<void(void*)> deleter) {
  check_sizes("from_blob", shape, opts.dtype);
  EMBER_CHECK_VALUE(data != nullptr || shape.numel() == 0, "from_blob: null pointer for ", shape.numel(), " elements");
  if (opts.device.is_cuda() && data != nullptr) check_cuda_blob(data, opts.device);
  const size_t nbytes = static_cast<size_t>(shape.numel()) * itemsize(opts.dtype);
  auto storage = std::make_shared<StorageImpl>(data, nbytes, opts.device, std::move(deleter));
  Tensor t(std::make_shared<TensorImpl>(std::move(storage), 0, shape, contiguous_strides(shape), opts.dtype));
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}

// --- threads
namespace {
std::atomic<int> g_threads{0};  // 0: not set yet, use the cores this process may run on
}
namespace cpu {
// The cores in this process's affinity mask (taskset, cgroup cpusets, a job scheduler's binding), not the
// machine's: more threads than usable cores only wait for each other.
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}
int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n > 0) return n;
  n = usable_cores();
  g_threads.store(n, std::memory_order_relaxed);
  return n;
}
}  // namespace cpu

void set_num_threads(int n) {
  EMBER_CHECK_VALUE(n >= 1, "set_num_threads: expected n >= 1, got ", n);
  g_threads.store(n, std::memory_order_relaxed);
#ifdef _OPENMP
  omp_set_num_threads(n);  // Eigen's GEMM threads follow OpenMP's setting
#endif
}
int get_num_threads() { return cpu::num_threads(); }
std::string cpu_isa() { return cpu::name(cpu::active_isa()); }
std::string cpu_bf16_gemm() { return cpu::name(cpu::bf16_gemm_path()); }

}  // namespace ember
