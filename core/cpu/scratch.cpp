// defines: Scratch, the CPU kernels' temporary buffers, and the arenas they come from (Note [Scratch arenas]).
// Compiled once, into libember: every CPU kernel variant (core/cpu/isa.h) draws from the same arenas.
#include <utility>
#include <vector>

#include "cpu_backend.h"
#include "parallel.h"

namespace ember::cpu {

// Note [Scratch arenas]: kernels' temporary buffers (conv's column buffer, then sgemm's packing buffers
// inside it) come from arenas holding one buffer per nesting depth that only ever grows. Inside a thread-pool
// region the arena belongs to the chunk being run (chunk i of a region always covers the same work, whichever
// thread runs it: thread_pool.cpp claims chunks dynamically); outside one it belongs to the thread. So after
// the first step of a steady loop every buffer is big enough and kernels allocate nothing, whatever the
// timing of the threads. The arenas come from the system and are counted apart from tensors
// (CpuMemoryStats::scratch_bytes): bytes_in_use is what tensors hold, and what memory::plan predicts.
namespace {
struct Arena {
  std::vector<std::pair<void*, size_t>> bufs;
  size_t depth = 0;
  ~Arena() {
    for (auto& [p, n] : bufs) detail::cpu_scratch_free(p, n);
  }
};
thread_local Arena t_arena;
constexpr int kChunkArenas = 64;
// Used only inside pool regions, which run one at a time with one thread per chunk. Never destroyed (static
// destruction order); the buffers live as long as the process.
Arena* const g_chunk_arenas = new Arena[kChunkArenas];

Arena& current_arena() {
  const int c = current_chunk_slot();
  return c >= 0 && c < kChunkArenas ? g_chunk_arenas[c] : t_arena;
}
}  // namespace

Scratch::Scratch(size_t nbytes) : ptr_(nullptr), arena_(nullptr) {
  Arena& a = current_arena();
  if (a.bufs.size() <= a.depth) a.bufs.emplace_back(nullptr, 0);
  auto& [p, n] = a.bufs[a.depth];
  if (n < nbytes) {
    detail::cpu_scratch_free(p, n);
    p = nullptr;  // if allocate throws, the slot is left empty rather than dangling
    n = 0;
    p = detail::cpu_scratch_allocate(nbytes);
    n = nbytes;
  }
  ptr_ = p;
  arena_ = &a;
  ++a.depth;  // only once the buffer exists: a throw above leaves the depth as it was
}
Scratch::~Scratch() { --static_cast<Arena*>(arena_)->depth; }

}  // namespace ember::cpu
