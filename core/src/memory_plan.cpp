// defines: memory::plan and memory::max_batch_size (memory_plan.h): the simulated allocators (CPU size classes;
// CUDA blocks, segments, split and merge), the backend that computes nothing, and the report.
//
// Note [How a plan runs]: plan() points this thread's backend_for() at a MetaBackend, whose allocator for each
// device is a simulation of that device's caching allocator and whose kernels do nothing. The op front-ends run
// as always (argument checks, output shapes, the autograd graph, saved tensors), so every allocation and free the
// real run would make reaches the simulation in the same order, and the simulation hands out placeholder
// addresses. The sizes follow ember/internal/allocator_sizes.h, the rules both real allocators use.
#include "ember/core/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "ember/core/backend.h"
#include "ember/core/error.h"
#include "ember/core/raw_ops.h"
#include "ember/cuda/cuda.h"
#include "ember/cuda/memory.h"
#include "ember/internal/allocator_sizes.h"
#include "memory_plan_internal.h"

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

bool stronger(Category a, Category b) {
  // parameters > gradients > optimizer state > activations > workspace > temporaries
  auto rank = [](Category c) {
    switch (c) {
      case Category::kParameters:
        return 5;
      case Category::kGradients:
        return 4;
      case Category::kOptimizerState:
        return 3;
      case Category::kActivations:
        return 2;
      case Category::kWorkspace:
        return 1;
      case Category::kTemporaries:
        return 0;
    }
    return 0;
  };
  return rank(a) > rank(b);
}

const char* category_name(Category c) {
  switch (c) {
    case Category::kParameters:
      return "parameters";
    case Category::kGradients:
      return "gradients";
    case Category::kOptimizerState:
      return "optimizer_state";
    case Category::kActivations:
      return "activations";
    case Category::kTemporaries:
      return "temporaries";
    case Category::kWorkspace:
      return "workspace";
  }
  return "?";
}

namespace {

// --- accounting common to both simulations: one record per allocation with the sequence numbers (one count
// over allocations and frees) of its life, so the set live at the peak is found once, at the end.
struct Record {
  size_t bytes = 0;  // as the simulated allocator counts them (size class; CUDA block size)
  Category cat = Category::kTemporaries;
  std::string module;  // the module path it was allocated in
  uint64_t born = 0, died = UINT64_MAX;
};

class PlannedAllocator : public Allocator {
 public:
  PlannedAllocator(Device d, size_t limit) : device_(d), limit_(limit) {}
  Device device() const override { return device_; }
  bool is_meta() const override { return true; }

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    bool over = false;
    auto [ptr, bytes] = take(nbytes, over);
    if (over && fits_) {
      fits_ = false;
      first_oom_ = detail::str(detail::format_bytes(bytes, 1), describe_context());
    }
    const Context ctx = current_context();
    const uint64_t seq = ++seq_;
    id_of_.emplace(ptr, records_.size());
    records_.push_back({bytes, Category::kTemporaries, ctx.module_path, seq});
    allocated_ += bytes;
    ++allocations_;
    if (allocated_ > peak_) {  // a new high-water mark: what is live now is what report() will list
      peak_ = allocated_;
      peak_seq_ = seq;
      peak_phase_ = ctx.phase;
      peak_where_ = describe_context();
    }
    peak_reserved_ = std::max(peak_reserved_, reserved());
    return ptr;
  }

  // Runs in ~StorageImpl: never throws.
  void deallocate(void* p, size_t /*nbytes*/) noexcept override {
    if (!p) return;
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = id_of_.find(p);
      if (it == id_of_.end()) return;
      Record& r = records_[it->second];
      r.died = ++seq_;
      allocated_ -= r.bytes;
      try {
        give(p, r.bytes);
      } catch (...) {  // only bad_alloc can come here: the simulation is then off, never the process
      }
      id_of_.erase(it);
      last = orphaned_ && id_of_.empty();
    }
    if (last) delete this;  // the plan ended while tensors still used it: the last of them is gone now
  }

  void tag(void* p, Category c) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = id_of_.find(p);
    if (it == id_of_.end()) return;
    Category& cur = records_[it->second].cat;
    if (stronger(c, cur)) cur = c;
  }

  size_t in_use() {
    std::lock_guard<std::mutex> lock(mu_);
    return allocated_;
  }

  // Fills the plan's numbers (the target's allocator only).
  void report(Plan& out) {
    std::lock_guard<std::mutex> lock(mu_);
    out.peak_bytes = peak_;
    out.peak_reserved_bytes = peak_reserved_;
    out.end_bytes = allocated_;
    out.limit_bytes = limit_;
    out.fits = fits_;
    out.first_oom = first_oom_;
    out.allocations = allocations_;
    out.peak_phase = peak_phase_;
    out.peak_where = peak_where_;
    for (int c = 0; c < kNumCategories; ++c) out.by_category[category_name(static_cast<Category>(c))] = 0;
    for (const Record& r : records_) {
      if (r.born > peak_seq_ || r.died <= peak_seq_) continue;  // not live at the peak
      out.by_category[category_name(r.cat)] += r.bytes;
      out.by_module[r.module.empty() ? std::string("(no module)") : r.module] += r.bytes;
    }
  }

  // Called when the plan ends: deletes itself now, or when the last tensor still using it is freed.
  void retire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!id_of_.empty()) {
        orphaned_ = true;
        return;
      }
    }
    delete this;
  }

 protected:
  // The simulation proper: a placeholder address and the bytes the real allocator would count for a request;
  // `over` set when the request is past the limit even after the cache was given back.
  virtual std::pair<void*, size_t> take(size_t nbytes, bool& over) = 0;
  virtual void give(void* p, size_t bytes) = 0;
  virtual size_t reserved() const = 0;

  // Placeholder addresses: distinct for distinct blocks, never dereferenced (data_ptr() throws first).
  uintptr_t next_address_ = uintptr_t{1} << 40;
  const Device device_;
  const size_t limit_;
  size_t allocated_ = 0;

 private:
  std::mutex mu_;  // a plan runs on one thread, but a planned tensor may be freed on another
  std::vector<Record> records_;
  std::unordered_map<void*, size_t> id_of_;  // live blocks -> their record
  uint64_t seq_ = 0, peak_seq_ = 0;
  size_t peak_ = 0, peak_reserved_ = 0;
  uint64_t allocations_ = 0;
  bool fits_ = true, orphaned_ = false;
  std::string first_oom_, peak_where_;
  Phase peak_phase_ = Phase::kForward;
};

// The CPU caching allocator (cpu_allocator.cpp): free lists per size class; past the limit, the cache is
// given back and the request must fit beside what is in use.
class CpuSimulation final : public PlannedAllocator {
 public:
  using PlannedAllocator::PlannedAllocator;

 private:
  std::pair<void*, size_t> take(size_t nbytes, bool& over) override {
    const size_t sz = detail::cpu_size_class(nbytes);
    size_t& free_count = free_[sz];
    if (free_count > 0) {
      --free_count;
      cached_ -= sz;
    } else if (limit_ && allocated_ + cached_ + sz > limit_) {
      free_.clear();
      cached_ = 0;
      over = allocated_ + sz > limit_;
    }
    void* p = reinterpret_cast<void*>(next_address_);
    next_address_ += sz;
    return {p, sz};
  }
  void give(void*, size_t bytes) override {
    ++free_[bytes];
    cached_ += bytes;
  }
  size_t reserved() const override { return allocated_ + cached_; }

  std::unordered_map<size_t, size_t> free_;  // size class -> cached blocks
  size_t cached_ = 0;
};

// The CUDA caching allocator (cuda/src/caching_allocator.cpp) on one stream: best fit from the small or the
// large pool, new segments sized as cudaMalloc's would be, split and merge of neighbours within a segment, and
// past the limit the fully free segments given back first.
class CudaSimulation final : public PlannedAllocator {
 public:
  using PlannedAllocator::PlannedAllocator;
  ~CudaSimulation() override {
    for (auto& [addr, b] : blocks_) delete b;
  }

 private:
  struct Block {
    uintptr_t addr;
    size_t size;
    bool small, allocated = false;
    Block *prev = nullptr, *next = nullptr;
  };
  using FreeSet = std::set<std::pair<size_t, uintptr_t>>;  // (size, address): lower_bound is the best fit
  FreeSet& pool(bool small) { return small ? small_ : large_; }

  std::pair<void*, size_t> take(size_t nbytes, bool& over) override {
    const size_t size = detail::cuda_round_size(nbytes);
    const bool small = size <= detail::kCudaSmallSize;
    Block* b = nullptr;
    auto it = pool(small).lower_bound({size, 0});
    if (it != pool(small).end()) {
      b = blocks_.at(it->second);
      pool(small).erase(it);
    } else {
      const size_t bytes = detail::cuda_segment_size(size);
      if (limit_ && reserved_ + bytes > limit_) {
        release_cached();
        over = reserved_ + bytes > limit_;
      }
      b = new Block{next_address_, bytes, small};
      next_address_ += bytes;
      blocks_.emplace(b->addr, b);
      reserved_ += bytes;
    }
    const size_t rest = b->size - size;
    if (detail::cuda_split_worth(small, rest)) {
      auto* r = new Block{b->addr + size, rest, small};
      r->prev = b;
      r->next = b->next;
      if (r->next) r->next->prev = r;
      b->next = r;
      b->size = size;
      blocks_.emplace(r->addr, r);
      pool(small).insert({r->size, r->addr});
    }
    b->allocated = true;
    return {reinterpret_cast<void*>(b->addr), b->size};
  }

  void give(void* p, size_t) override {
    Block* b = blocks_.at(reinterpret_cast<uintptr_t>(p));
    b->allocated = false;
    // Absorb free neighbours: two free blocks are never neighbours.
    for (Block* n : {b->prev, b->next}) {
      if (!n || n->allocated) continue;
      pool(n->small).erase({n->size, n->addr});
      if (n == b->prev) {
        n->size += b->size;
        n->next = b->next;
        if (n->next) n->next->prev = n;
        blocks_.erase(b->addr);
        delete b;
        b = n;
      } else {
        b->size += n->size;
        b->next = n->next;
        if (b->next) b->next->prev = b;
        blocks_.erase(n->addr);
        delete n;
      }
    }
    pool(b->small).insert({b->size, b->addr});
  }

  void release_cached() {
    for (FreeSet* fs : {&small_, &large_})
      for (auto it = fs->begin(); it != fs->end();) {
        Block* b = blocks_.at(it->second);
        if (b->prev || b->next) {
          ++it;
          continue;
        }
        reserved_ -= b->size;
        blocks_.erase(b->addr);
        delete b;
        it = fs->erase(it);
      }
  }
  size_t reserved() const override { return reserved_; }

  std::map<uintptr_t, Block*> blocks_;  // every block, by address
  FreeSet small_, large_;
  size_t reserved_ = 0;
};

// A backend that computes nothing: the front-ends have checked and allocated everything before calling it.
class MetaBackend final : public Backend {
 public:
  MetaBackend(DeviceType t, PlanState& s) : type_(t), state_(s) {}
  DeviceType type() const override { return type_; }
  Allocator& allocator(int index) override;
  void synchronize(int) override {}
  void copy(const Tensor&, const Tensor&, bool) override {}
  void fill(const Tensor&, double) override {}
  void unary(UnaryOp, const Tensor&, const Tensor&) override {}
  void clamp(const Tensor&, const Tensor&, double, double) override {}
  void binary(BinaryOp, const Tensor&, const Tensor&, const Tensor&) override {}
  void where(const Tensor&, const Tensor&, const Tensor&, const Tensor&) override {}
  void reduce(ReduceOp, const Tensor&, const Tensor&, const std::vector<int64_t>&) override {}
  void cumsum(const Tensor&, const Tensor&, int64_t, bool) override {}
  void argsort(const Tensor&, const Tensor&, bool) override {}
  void matmul(const Tensor& out, const Tensor& a, const Tensor& b) override;
  void softmax(const Tensor&, const Tensor&, int64_t, bool) override {}
  void conv2d(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) override {}
  void conv2d_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       const Conv2dParams&) override {}
  void pool2d(PoolKind, const Tensor&, const Tensor&, const Pool2dParams&) override {}
  void pool2d_backward(PoolKind, const Tensor&, const Tensor&, const Tensor&, const Pool2dParams&) override {}
  void attention(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                 const AttentionParams&) override {}
  void attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                          const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AttentionParams&) override {
  }
  void index_select(const Tensor&, const Tensor&, int64_t, const Tensor&) override {}
  void check_range(const Tensor&, int64_t, int64_t, const RangeMessage&) override {}  // planned values: none to check
  void index_add(const Tensor&, int64_t, const Tensor&, const Tensor&) override {}
  void batch_norm_stats(const Tensor&, const Tensor&, const Tensor&) override {}
  void batch_norm_elemt(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&) override {}
  void batch_norm_backward_reduce(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) override {}
  void batch_norm_backward_elemt(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                 const Tensor&, const Tensor&, const Tensor&, int64_t) override {}
  void row_norm(const RowNormArgs&) override {}
  void row_norm_backward(const RowNormGradArgs&) override {}
  void random(RandomKind, const Tensor&, double, double, PhiloxState) override {}
  void sgd_step(const SgdStepArgs&) override {}
  void adam_step(const AdamStepArgs&) override {}
  void amp_unscale(const std::vector<Tensor>&, const Tensor&, double) override {}

 private:
  DeviceType type_;
  PlanState& state_;
};

}  // namespace

// One plan in progress: its backends and one simulated allocator per device it touched.
struct PlanState {
  Device target;
  size_t limit;
  size_t gemm_workspace = 0;
  MetaBackend cpu{DeviceType::CPU, *this}, cuda{DeviceType::CUDA, *this};
  std::unordered_map<Device, PlannedAllocator*> allocators;
  std::unordered_map<Device, Tensor> gemm_workspaces;  // one per device, from its first matmul on (cublas.cpp)

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
void MetaBackend::matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
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
  return out;
}

std::string Plan::to_string() const {
  auto fmt = [](size_t b) { return detail::format_bytes(b, 2); };
  auto pct = [this](size_t b) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(1) << (peak_bytes ? 100.0 * static_cast<double>(b) / peak_bytes : 0.0) << "%";
    return os.str();
  };
  std::ostringstream os;
  os << "memory plan for " << device << " (" << allocations << " allocations simulated)\n"
     << "  peak allocated  " << std::setw(12) << fmt(peak_bytes) << "   reached" << peak_where << "\n"
     << "  peak reserved   " << std::setw(12) << fmt(peak_reserved_bytes) << "\n"
     << "  held at the end " << std::setw(12) << fmt(end_bytes) << "\n";
  if (limit_bytes)
    os << "  limit           " << std::setw(12) << fmt(limit_bytes) << "   "
       << (fits ? std::string("fits") : "does NOT fit: first refused " + first_oom) << "\n";
  os << "  at the peak, by category:\n";
  for (int c = 0; c < kNumCategories; ++c) {
    const size_t b = bytes(static_cast<Category>(c));
    os << "    " << std::left << std::setw(16) << category_name(static_cast<Category>(c)) << std::right << std::setw(12)
       << fmt(b) << std::setw(8) << pct(b) << "\n";
  }
  os << "  at the peak, by module (where allocated), largest first:\n";
  std::vector<std::pair<std::string, size_t>> modules(by_module.begin(), by_module.end());
  std::stable_sort(modules.begin(), modules.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (size_t k = 0; k < modules.size(); ++k) {
    if (k == 12) {
      os << "    ... " << modules.size() - 12 << " more\n";
      break;
    }
    os << "    " << std::left << std::setw(16) << modules[k].first << std::right << std::setw(12)
       << fmt(modules[k].second) << std::setw(8) << pct(modules[k].second) << "\n";
  }
  return os.str();
}

// --- max_batch_size

namespace {
size_t system_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

size_t default_budget(Device target) {
  const size_t limit = memory_limit(target);
  if (target.is_cpu()) {
    const size_t in_use = cpu_memory_stats().bytes_in_use;
    if (limit) return limit > in_use ? limit - in_use : 0;
    return system_available_bytes();
  }
  EMBER_CHECK_DEVICE(cuda::is_available(), "memory::max_batch_size: no budget_bytes given and ", target,
                     " cannot be asked for its free memory (", cuda::unavailable_reason(),
                     "); pass BatchSearch::budget_bytes to plan for a device that is not here");
  // The limit caps reserved segments, and only wholly free ones can be given back: count every reserved byte as
  // taken (cuda::empty_cache() first gives the most room). Without a limit: what the driver has free.
  const size_t reserved = cuda::memory_reserved(target.index());
  if (limit) return limit > reserved ? limit - reserved : 0;
  return cuda::mem_get_info(target.index()).first;
}
}  // namespace

int64_t max_batch_size(Device target, const std::function<void(int64_t)>& step, const BatchSearch& opts) {
  EMBER_CHECK_VALUE(static_cast<bool>(step), "memory::max_batch_size: the step function is empty");
  EMBER_CHECK_VALUE(opts.lo >= 1 && opts.lo <= opts.hi,
                    "memory::max_batch_size: expected 1 <= lo <= hi, got lo = ", opts.lo, ", hi = ", opts.hi);
  const size_t budget = opts.budget_bytes ? opts.budget_bytes : default_budget(target);
  EMBER_CHECK_VALUE(budget > 0, "memory::max_batch_size: the budget on ", target, " is 0 bytes");
  auto fits = [&](int64_t b) { return plan(target, [&] { step(b); }, {.limit_bytes = budget}); };
  Plan at_lo = fits(opts.lo);
  if (!at_lo.fits)
    throw ValueError(detail::str("memory::max_batch_size: even batch ", opts.lo, " does not fit ",
                                 detail::format_bytes(budget, 2), " on ", target, ": its step needs a peak of ",
                                 detail::format_bytes(at_lo.peak_bytes, 2), " (first refused: ", at_lo.first_oom, ")"));
  if (fits(opts.hi).fits) return opts.hi;
  int64_t good = opts.lo, bad = opts.hi;  // invariant: good fits, bad does not
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    (fits(mid).fits ? good : bad) = mid;
  }
  return good;
}

}  // namespace memory
}  // namespace ember
