// defines: the simulated caching allocators that memory::plan (memory_plan.cpp) allocates from: the accounting
// both share (PlannedAllocator: one record per allocation, the peak and what is live at it, the first allocation
// past the limit) and the two policies, the CPU allocator's size classes (CpuSimulation) and the CUDA allocator's
// blocks, segments, split and merge (CudaSimulation). Private to core/.
#pragma once
#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ember/core/allocator.h"
#include "ember/core/error.h"
#include "ember/core/memory_context.h"
#include "ember/core/memory_plan.h"
#include "ember/internal/allocator_sizes.h"
#include "ember/internal/block_pool.h"

namespace ember::memory::simulation {

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

// The CUDA caching allocator (cuda/src/caching_allocator.cpp) on one stream, with its policy (BlockPool, shared
// with it): best fit from the small or the large pool, new segments sized as cudaMalloc's would be, split and
// merge of neighbours within a segment, and past the limit the fully free segments given back first.
class CudaSimulation final : public PlannedAllocator {
 public:
  using PlannedAllocator::PlannedAllocator;
  ~CudaSimulation() override {
    for (auto& [p, b] : allocated_blocks_) delete b;  // an orphaned plan is deleted with none; BlockPool frees the rest
  }

 private:
  struct Block : ember::detail::PoolBlockBase<Block> {
    Block(void* p, size_t bytes, bool small) : PoolBlockBase(p, bytes, nullptr, small) {}
    Block(const Block& neighbour, void* p, size_t bytes) : PoolBlockBase(p, bytes, neighbour.stream, neighbour.small) {}
  };

  std::pair<void*, size_t> take(size_t nbytes, bool& over) override {
    const size_t size = ember::detail::cuda_round_size(nbytes);
    Block* b = pool_.take_best_fit(nullptr, size);
    if (!b) {
      const size_t bytes = ember::detail::cuda_segment_size(size);
      if (limit_ && reserved_ + bytes > limit_) {
        pool_.release_segments([&](Block* seg) { reserved_ -= seg->size; });
        over = reserved_ + bytes > limit_;
      }
      b = new Block(reinterpret_cast<void*>(next_address_), bytes, pool_.is_small(size));
      next_address_ += bytes;
      reserved_ += bytes;
    }
    pool_.split(b, size);
    b->allocated = true;
    allocated_blocks_.emplace(b->ptr, b);
    return {b->ptr, b->size};
  }

  void give(void* p, size_t) override {
    auto it = allocated_blocks_.find(p);
    if (it == allocated_blocks_.end()) return;
    Block* b = it->second;
    allocated_blocks_.erase(it);
    b->allocated = false;
    pool_.put_back(b);
  }
  size_t reserved() const override { return reserved_; }

  ember::detail::BlockPool<Block> pool_;
  std::unordered_map<void*, Block*> allocated_blocks_;
  size_t reserved_ = 0;
};

}  // namespace ember::memory::simulation
