// defines: BlockPool, the caching policy that the CUDA caching allocator (cuda/src/caching_allocator.cpp) and
// memory::plan's simulation of it (core/src/memory_simulation.h) share, written once so the plan predicts what
// the allocator does: blocks carved from segments, best fit by (stream, size, address) from the small or the large
// pool, the split of what a request does not need, the merge of free neighbours, and the release of segments that
// are one free block. It makes no driver call and owns no memory: the caller creates segments and gives them back.
// Plain C++ with no other header but allocator_sizes.h: nvcc-compiled code may read it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <set>

#include "ember/internal/allocator_sizes.h"

namespace ember::detail {

// CONVENTION:
//  - A segment is one device allocation. Its blocks tile it exactly, linked by prev/next in address order; the
//    block with prev == nullptr starts at the segment. A segment is given back only when it is one free block.
//  - `stream` and `small` never change: a block is only handed out for a request on its own stream, from the pool
//    (small or large) of its segment.
//  - Every block is allocated (owned by a user), pending (freed, but other streams may still use it: event_count
//    > 0, in no free set) or free (in the pool's free set). Two free blocks are never neighbours.
template <class B>
struct PoolBlockBase {
  void* ptr = nullptr;
  size_t size = 0;          // bytes, a multiple of kCudaMinBlockSize
  void* stream = nullptr;   // the stream it is handed out on (the simulation has one: nullptr)
  bool small = false;       // in the small pool (requests up to kCudaSmallSize)
  bool allocated = false;
  int event_count = 0;      // outstanding events before a pending block becomes free
  B* prev = nullptr;        // neighbours within the segment
  B* next = nullptr;

  PoolBlockBase(void* ptr_, size_t size_, void* stream_, bool small_)
      : ptr(ptr_), size(size_), stream(stream_), small(small_) {}
  bool is_split() const { return prev != nullptr || next != nullptr; }
  bool is_free() const { return !allocated && event_count == 0; }
};

// The free blocks of both pools, and the block moves. B derives from PoolBlockBase<B> and has a constructor
// B(const B& neighbour, void* ptr, size_t size) for a new block of the neighbour's segment (the split's rest).
// Not thread-safe: the caller locks.
template <class B>
class BlockPool {
 public:
  BlockPool() = default;
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  ~BlockPool() {
    for (auto& set : free_)
      for (B* b : set) delete b;
  }

  // The pool a rounded request comes from.
  static bool is_small(size_t rounded) { return rounded <= kCudaSmallSize; }

  // Best fit: the smallest free block on `stream` that holds `size` rounded bytes (ties: the lowest address),
  // taken out of the free set; null when there is none.
  B* take_best_fit(void* stream, size_t size) {
    FreeSet& set = free_[is_small(size)];
    auto it = set.lower_bound(Key{stream, size, 0});
    if (it == set.end() || (*it)->stream != stream) return nullptr;
    B* b = *it;
    set.erase(it);
    return b;
  }

  // A block just taken (free or a new segment) keeps `size` bytes; the rest becomes a free block of its own when
  // it is worth keeping (cuda_split_worth). The rest has no free neighbour: the block was free, so its old next
  // neighbour was not.
  void split(B* b, size_t size) {
    const size_t rest_size = b->size - size;
    if (!cuda_split_worth(b->small, rest_size)) return;
    B* rest = new B(*b, static_cast<char*>(b->ptr) + size, rest_size);
    rest->prev = b;
    rest->next = b->next;
    if (rest->next) rest->next->prev = rest;
    b->next = rest;
    b->size = size;
    free_[rest->small].insert(rest);
  }

  // A block that is neither allocated nor pending any more: it absorbs its free neighbours (deleting them) and
  // joins the free set. Returns the block that holds it now.
  B* put_back(B* b) {
    merge(b, b->prev);
    merge(b, b->next);
    free_[b->small].insert(b);
    return b;
  }

  // Every free block that is a whole segment, on any stream and in both pools, is handed to `give_back(B*)`
  // (which returns its memory to the device; if it throws, the block stays cached), then deleted.
  template <class GiveBack>
  void release_segments(GiveBack&& give_back) {
    for (FreeSet& set : free_)
      for (auto it = set.begin(); it != set.end();) {
        B* b = *it;
        if (b->is_split()) {
          ++it;
          continue;
        }
        give_back(b);
        it = set.erase(it);
        delete b;
      }
  }

  // The largest free block, any stream (a scan: the sets are ordered by stream first).
  size_t largest_free() const {
    size_t m = 0;
    for (const FreeSet& set : free_)
      for (const B* b : set) m = b->size > m ? b->size : m;
    return m;
  }
  size_t free_blocks(bool small) const { return free_[small].size(); }

 private:
  struct Key {
    void* stream;
    size_t size;
    uintptr_t addr;
  };
  static Key key(const B* b) { return {b->stream, b->size, reinterpret_cast<uintptr_t>(b->ptr)}; }
  // Orders by (stream, size, address): lower_bound({stream, size, 0}) is the best fit on that stream.
  struct Order {
    using is_transparent = void;
    static bool less(const Key& a, const Key& b) {
      const auto sa = reinterpret_cast<uintptr_t>(a.stream), sb = reinterpret_cast<uintptr_t>(b.stream);
      if (sa != sb) return sa < sb;
      if (a.size != b.size) return a.size < b.size;
      return a.addr < b.addr;
    }
    bool operator()(const B* a, const B* b) const { return less(key(a), key(b)); }
    bool operator()(const Key& a, const B* b) const { return less(a, key(b)); }
    bool operator()(const B* a, const Key& b) const { return less(key(a), b); }
  };
  using FreeSet = std::set<B*, Order>;

  // Absorbs the neighbour `src` into `dst` when `src` is free.
  void merge(B* dst, B* src) {
    if (!src || !src->is_free()) return;
    free_[src->small].erase(src);  // before anything changes: the set is ordered by (stream, size, address)
    if (dst->prev == src) {
      dst->ptr = src->ptr;
      dst->prev = src->prev;
      if (dst->prev) dst->prev->next = dst;
    } else {
      dst->next = src->next;
      if (dst->next) dst->next->prev = dst;
    }
    dst->size += src->size;
    delete src;
  }

  FreeSet free_[2];  // [0]: the large pool, [1]: the small pool
};

}  // namespace ember::detail
