// defines: the simulated caching allocators that memory::plan (memory_plan.cpp) allocates from: the accounting
// both share (PlannedAllocator: one record per allocation, the peak and what is live at it, the first allocation
// past the limit) and the two policies, the CPU allocator's size classes (CpuSimulation) and the CUDA allocator's
// blocks, segments, split and merge (CudaSimulation). Private to core/.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ember/core/allocator.h"
#include "ember/core/error.h"
#include "ember/core/memory_context.h"
#include "ember/core/memory_plan.h"
#include "ember/internal/allocator_sizes.h"

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

}  // namespace ember::memory::simulation
