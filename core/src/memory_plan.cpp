// defines: memory::plan (memory_plan.h): the backend that computes nothing, the plan's state, tagging. The simulated
// allocators it allocates from: memory_simulation.h; the report and the categories: memory_report.cpp;
// max_batch_size: max_batch_size.cpp.
//
// Note [How a plan runs]: plan() points this thread's backend_for() at a MetaBackend, whose allocator for each
// device is a simulation of that device's caching allocator and whose kernels do nothing. The op front-ends run
// as always (argument checks, output shapes, the autograd graph, saved tensors), so every allocation and free the
// real run would make reaches the simulation in the same order, and the simulation hands out placeholder
// addresses. The sizes follow ember/internal/allocator_sizes.h, the rules both real allocators use.
#include "ember/core/memory_plan.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "../cpu/bf16_gemm.h"
#include "ember/core/backend.h"
#include "ember/core/error.h"
#include "ember/core/raw_ops.h"
#include "ember/cuda/cuda.h"
#include "ember/cuda/memory.h"
#include "ember/internal/allocator_sizes.h"
#include "ember/internal/conv_channels_last.h"
#include "ember/internal/conv_split.h"
#include "ember/internal/cuda_scratch.h"
#include "ember/internal/gemm_epilogue.h"
#include "memory_plan_internal.h"
#include "memory_simulation.h"

namespace ember {

namespace detail {
void throw_planned_access() {
  throw Error(
      "this tensor was made by memory::plan and holds no values (planning runs ops shape-only): its memory can be "
      "neither read nor written, and it cannot be used outside the plan; make the tensors a plan needs inside its "
      "function, and read values in a real run");
}
}  // namespace detail

namespace memory {

namespace {
using simulation::CpuSimulation;
using simulation::CudaSimulation;
using simulation::PlannedAllocator;
using simulation::Record;

// The backend a plan runs on. Its kernels compute nothing (the outputs are allocated before a kernel runs); a row
// marked `own` in EMBER_BACKEND_KERNELS allocates what the real kernel takes besides its outputs.
#define EMBER_META_KERNEL(name, params, plan) EMBER_META_KERNEL_##plan(name, params)
#define EMBER_META_KERNEL_skip(name, params) \
  void name params override {}
#define EMBER_META_KERNEL_own(name, params) void name params override;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"  // the skipped kernels' parameters
class MetaBackend final : public Backend {
 public:
  MetaBackend(DeviceType t, PlanState& s) : type_(t), state_(s) {}
  DeviceType type() const override { return type_; }
  Allocator& allocator(int index) override;
  void synchronize(int) override {}
  EMBER_BACKEND_KERNELS(EMBER_META_KERNEL)

 private:
  DeviceType type_;
  PlanState& state_;
};
#pragma GCC diagnostic pop

}  // namespace

// One plan in progress: its backends and one simulated allocator per device it touched.
struct PlanState {
  Device target;
  size_t limit;
  size_t gemm_workspace = 0;
  MetaBackend cpu{DeviceType::CPU, *this}, cuda{DeviceType::CUDA, *this};
  std::unordered_map<Device, PlannedAllocator*> allocators;
  std::unordered_map<Device, Tensor> gemm_workspaces;  // one per device, from its first matmul on (cublas.cpp)
  std::map<std::string, double> forward_flops;         // Plan::forward_flops_by_module
  double recompute_flops = 0;                          // Plan::recompute_flops

  void count_flops(double flops) {
    const Context c = current_context();
    if (c.checkpoint_rerun) recompute_flops += flops;
    else if (!c.checkpoint_recompute && c.phase == Phase::kForward) forward_flops[c.module_path] += flops;
  }

  PlanState(Device t, size_t l) : target(t), limit(l) {}
  ~PlanState() {
    gemm_workspaces.clear();  // back to the simulated allocators before they retire
    for (auto& [d, a] : allocators) a->retire();
  }
  PlannedAllocator& allocator_for(Device d) {
    auto it = allocators.find(d);
    if (it != allocators.end()) return *it->second;
    const size_t lim = d == target ? limit : 0;  // other devices are followed, not capped
    PlannedAllocator* a = d.is_cpu() ? static_cast<PlannedAllocator*>(new CpuSimulation(d, lim))
                                     : static_cast<PlannedAllocator*>(new CudaSimulation(d, lim));
    allocators.emplace(d, a);
    return *a;
  }
};

Allocator& MetaBackend::allocator(int index) { return state_.allocator_for(Device(type_, index)); }

// What a CUDA matmul takes besides its output (cuda/src/cublas.cpp): a contiguous copy of an operand cuBLAS cannot
// read as it is, and the cuBLAS workspace, taken at the device's first matmul and kept (as the real one is, per
// stream; a plan runs on one). The CPU backend takes scratch outside the caching allocator.
// --- the CPU's float32 buffers for 16-bit tensors. A CPU kernel that computes float16 / bfloat16 in float32 makes
// them through the caching allocator (core/cpu: through_float32, the bf16 GEMM's product), so a plan makes the same
// ones, alive together for the kernel's length: what the kernel writes in float32, then a float32 copy of each
// 16-bit input, in the kernel's order. (The elementwise kernels compute 16-bit elements in place and make none.)
namespace {
struct FloatBuffers {
  std::vector<Tensor> held;
  FloatBuffers& of(const Tensor& t) {  // a buffer of t's shape when t is a 16-bit float
    if (t.defined() && is_reduced_float(t.dtype()))
      held.push_back(empty(t.shape(), {.dtype = kFloat32, .device = t.device()}));
    return *this;
  }
};
bool cpu_bf16_products(std::initializer_list<const Tensor*> ts) {  // core/cpu's bf16 GEMM path takes these
  if (cpu::bf16_gemm_path() == cpu::Bf16Path::None) return false;
  for (const Tensor* t : ts)
    if (t->defined() && t->dtype() != kBFloat16) return false;
  return true;
}
}  // namespace

// A CUDA reduction split into chunks keeps the chunks' partials, and an argsort of rows longer than 2048 sorts in a
// buffer (cuda/src/reduce.cpp, sort.cpp; the sizes from ember/internal/cuda_scratch.h, the kernels' own).
namespace {
void plan_cuda_scratch(int64_t bytes, Device dev) {
  if (bytes <= 0) return;
  Tensor ws = empty({bytes}, {.dtype = kUInt8, .device = dev});
  tag(ws, Category::kWorkspace);
}
void plan_cuda_reduce(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<bool> is_red(static_cast<size_t>(x.dim()), false);
  for (int64_t d : dims) is_red[static_cast<size_t>(d)] = true;
  DimWalk<ember::detail::kCudaReduceMaxDims> kept, red;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!(is_red[static_cast<size_t>(d)] ? red : kept).add(x.size(d), x.stride(d))) return;  // the kernel refuses
  if (red.numel == 0 || out.numel() == 0) return;
  plan_cuda_scratch(ember::detail::cuda_reduce_workspace_bytes(op, kept, red), out.device());
}
}  // namespace

void MetaBackend::reduce(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims) {
  if (type_ == DeviceType::CUDA) return plan_cuda_reduce(op, out, x, dims);
  if (!is_reduced_float(x.dtype())) return;
  FloatBuffers f;
  f.of(x);
  if (op != ReduceOp::ArgMax && op != ReduceOp::ArgMin) f.held.push_back(empty(out.shape(), {.device = out.device()}));
}
void MetaBackend::cumsum(const Tensor& out, const Tensor& x, int64_t, bool) {
  if (type_ == DeviceType::CPU && is_reduced_float(out.dtype())) FloatBuffers().of(out).of(x);
}
void MetaBackend::argsort(const Tensor& out, const Tensor& x, bool) {
  if (type_ == DeviceType::CPU) FloatBuffers().of(x);
  if (type_ != DeviceType::CUDA || out.numel() == 0) return;
  const int64_t n = x.size(x.dim() - 1);
  plan_cuda_scratch(ember::detail::cuda_argsort_workspace_bytes(x.numel() / n, n, itemsize(x.dtype())), out.device());
}
void MetaBackend::softmax(const Tensor& out, const Tensor& x, int64_t, bool) {
  if (type_ == DeviceType::CPU && is_reduced_float(out.dtype())) FloatBuffers().of(out).of(x);
}
void MetaBackend::conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  // a channels-last convolution on the CPU: the same steps as core/cpu/conv.cpp's (copies, or a GEMM)
  if (type_ == DeviceType::CPU && ember::detail::conv2d_channels_last(*this, out, x, w, b, p)) return;
  const int64_t per_output = w.numel() / std::max<int64_t>(1, w.size(0));  // C KH KW multiply-adds
  state_.count_flops(2.0 * static_cast<double>(out.numel()) * static_cast<double>(per_output));
  if (type_ != DeviceType::CPU || !is_reduced_float(out.dtype()) || cpu_bf16_products({&out, &x, &w, &b})) return;
  FloatBuffers().of(out).of(x).of(w).of(b);
}
// ... and the weight gradient's per-part sums of the float path (core/cpu/conv.cpp: one weight for each part of the
// batch after the first, the parts as ConvSplit cuts them).
void MetaBackend::attention(const AttentionArgs& a) {
  const AttentionParams& p = a.p;
  const double pairs = static_cast<double>(p.batch_heads) * static_cast<double>(p.tq) * static_cast<double>(p.tk);
  state_.count_flops(2.0 * pairs * static_cast<double>(p.d + p.dv) * (p.causal ? 0.5 : 1.0));
}
void MetaBackend::conv2d_backward(const Conv2dGradArgs& a) {
  if (type_ == DeviceType::CPU && ember::detail::conv2d_backward_channels_last(*this, a)) return;
  if (type_ != DeviceType::CPU || cpu_bf16_products({&a.gy, &a.x, &a.w, &a.gx, &a.gw, &a.gb})) return;
  FloatBuffers f;
  if (is_reduced_float(a.x.dtype())) f.of(a.gx).of(a.gw).of(a.gb).of(a.gy).of(a.x).of(a.w);
  if (!a.gw.defined()) return;
  const int64_t n = a.x.size(0), oc = a.w.size(0), ckk = a.w.numel() / std::max<int64_t>(oc, 1);
  const int64_t parts =
      ember::detail::conv_parts(n, 2 * n * oc * ckk * a.gy.size(2) * a.gy.size(3), get_num_threads()).parts;
  if (parts > 1)
    f.held.push_back(
        empty({parts - 1, a.w.numel()}, {.dtype = is_reduced_float(a.x.dtype()) ? kFloat32 : a.x.dtype()}));
}
// Pooling's copies: the CPU's NCHW copies of a channels-last or strided pooling (core/cpu/pool.cpp), CUDA's copies
// of x and gy into the kernels' layout (cuda/src/conv_pool.cpp), each alive while the kernel runs.
void MetaBackend::pool2d(PoolKind kind, const Tensor& out, const Tensor& x, const Pool2dParams& p) {
  if (type_ == DeviceType::CPU) {
    ember::detail::pool2d_channels_last(*this, kind, out, x, p);
    return;
  }
  const Tensor xc = raw::contiguous(x, ember::detail::pool_memory_format(x, out));
}
void MetaBackend::pool2d_backward(PoolKind kind, const Tensor& gx, const Tensor& gy, const Tensor& x,
                                  const Pool2dParams& p) {
  if (type_ == DeviceType::CPU) {
    ember::detail::pool2d_backward_channels_last(*this, kind, gx, gy, x, p);
    return;
  }
  const MemoryFormat f = ember::detail::pool_memory_format(x, gx);
  const Tensor xc = raw::contiguous(x, f), gyc = raw::contiguous(gy, f);
}
void MetaBackend::index_add(const Tensor& out, int64_t, const Tensor&, const Tensor& src) {
  if (type_ == DeviceType::CPU && is_reduced_float(out.dtype())) FloatBuffers().of(out).of(src);
}

void MetaBackend::matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  state_.count_flops(2.0 * static_cast<double>(out.numel()) * static_cast<double>(a.size(2)));
  if (type_ == DeviceType::CPU && is_reduced_float(out.dtype())) {           // core/cpu/linalg.cpp's two 16-bit paths
    if (cpu_bf16_products({&out, &a, &b})) FloatBuffers().of(out).of(bias);  // the float32 product, the bias
    else FloatBuffers().of(out).of(a).of(b).of(bias);
    return;
  }
  if (type_ != DeviceType::CUDA || out.numel() == 0) return;
  const int64_t M = out.size(1), N = out.size(2), K = a.size(2);
  // cuBLAS reads a row-major rows x cols operand directly when one of its strides is 1 and the other spans a row.
  auto readable = [](int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    const int64_t need_n = cols > 1 ? cols : 1, need_t = rows > 1 ? rows : 1;
    return ((cs == 1 || cols == 1) && (rows == 1 || rs >= need_n)) ||
           ((rs == 1 || rows == 1) && (cols == 1 || cs >= need_t));
  };
  Tensor bc = readable(K, N, b.stride(1), b.stride(2)) ? Tensor() : raw::contiguous(b);
  Tensor ac = readable(M, K, a.stride(1), a.stride(2)) ? Tensor() : raw::contiguous(a);
  if (state_.gemm_workspace && !state_.gemm_workspaces.count(out.device())) {
    Tensor ws = empty({static_cast<int64_t>(state_.gemm_workspace)}, {.dtype = kUInt8, .device = out.device()});
    tag(ws, Category::kWorkspace);
    state_.gemm_workspaces.emplace(out.device(), std::move(ws));
  }
}

// cuBLASLt's epilogue GEMM takes what cuBLAS's takes (the stream's workspace, copies of unreadable operands); the
// composed steps plan as the backend's own.
void MetaBackend::gemm_epilogue(const GemmEpilogueArgs& a) {
  if (type_ == DeviceType::CUDA && ember::detail::gemm_epilogue_on_cublaslt(a))
    matmul(raw::unsqueeze(a.out, 0), raw::unsqueeze(a.a, 0), raw::unsqueeze(a.b, 0), Tensor());
  else ember::detail::gemm_epilogue_composed(*this, a);
}

// What a CUDA row norm's backward takes besides its outputs: the weight and bias gradients' per-chunk column sums
// (cuda/src/norm.cpp), held for the kernel's length. The CPU keeps its partial sums outside the caching allocator.
void MetaBackend::row_norm_backward(const RowNormGradArgs& a) {
  if (type_ != DeviceType::CUDA || !(a.dw.defined() || a.db.defined())) return;
  const int64_t bytes = row_norm_grad_workspace_bytes(a.norm.rows, a.norm.cols);
  if (bytes == 0) return;
  Tensor ws = empty({bytes}, {.dtype = kUInt8, .device = a.x.device()});
  tag(ws, Category::kWorkspace);
}

// A CUDA batch norm's two reductions take their per-part sums (cuda/src/norm.cpp) for the kernels' length.
namespace {
void plan_batch_norm_workspace(DeviceType type, const Tensor& x) {
  if (type != DeviceType::CUDA || x.dim() < 2) return;
  const int64_t n = x.size(0), c = x.size(1), s = n && c ? x.numel() / (n * c) : 0;
  const int64_t bytes = batch_norm_workspace_bytes(n, c, s);
  if (bytes == 0) return;
  Tensor ws = empty({bytes}, {.dtype = kUInt8, .device = x.device()});
  tag(ws, Category::kWorkspace);
}
}  // namespace
void MetaBackend::batch_norm_stats(const Tensor&, const Tensor&, const Tensor& x) {
  if (x.size(1) > 0) plan_batch_norm_workspace(type_, x);
}
void MetaBackend::batch_norm_backward_reduce(const BatchNormGradReduceArgs& a) {
  if (a.x.size(1) > 0) plan_batch_norm_workspace(type_, a.x);
}

namespace {
thread_local PlanState* t_plan = nullptr;
}  // namespace

namespace internal {
Backend* planning_backend(DeviceType t) {
  PlanState* s = t_plan;
  if (!s) [[likely]]
    return nullptr;
  return t == DeviceType::CPU ? static_cast<Backend*>(&s->cpu) : &s->cuda;
}
}  // namespace internal

bool is_planning() { return t_plan != nullptr; }
PlanningSuspend::PlanningSuspend() : saved_(t_plan) { t_plan = nullptr; }
PlanningSuspend::~PlanningSuspend() { t_plan = static_cast<PlanState*>(saved_); }

size_t allocated_size(Device device, size_t nbytes) {
  if (nbytes == 0) return 0;
  return device.is_cpu() ? ember::detail::cpu_size_class(nbytes) : ember::detail::cuda_round_size(nbytes);
}

size_t planned_bytes_in_use(Device device) {
  PlanState* s = t_plan;
  return s ? s->allocator_for(device).in_use() : 0;
}

void tag(const Tensor& t, Category c) {
  if (!t.defined()) return;
  StorageImpl& st = *t.impl()->storage;
  if (!st.data || !st.allocator) return;
  if (st.meta) static_cast<PlannedAllocator*>(st.allocator)->tag(st.data, c);
  else internal::retag(st, static_cast<uint8_t>(c));
}

Plan plan(Device target, const std::function<void()>& fn, const PlanOptions& opts) {
  EMBER_CHECK_VALUE(static_cast<bool>(fn), "memory::plan: the function to plan is empty");
  EMBER_CHECK_VALUE(t_plan == nullptr, "memory::plan: already planning on this thread (plans do not nest)");
  EMBER_CHECK_DEVICE(target.index() >= 0 && (target.is_cuda() || target.index() == 0), "memory::plan: invalid device ",
                     target);
  size_t limit = opts.limit_bytes;
  if (limit == 0 && (target.is_cpu() || cuda::is_available())) limit = memory_limit(target);
  PlanState state(target, limit);
  state.gemm_workspace = opts.cuda_gemm_workspace_bytes;
  state.allocator_for(target);  // the target is reported even when fn allocates nothing there
  t_plan = &state;
  // The plan draws random numbers (factories, dropout) from the same stream as the real run: put it back after.
  struct Restore {
    PhiloxState rng = get_rng_state();
    ~Restore() {
      t_plan = nullptr;
      set_rng_state(rng);
    }
  } restore;
  fn();
  Plan out;
  out.device = target;
  state.allocators.at(target)->report(out);
  out.forward_flops_by_module = std::move(state.forward_flops);
  out.recompute_flops = state.recompute_flops;
  return out;
}

}  // namespace memory
}  // namespace ember
