// defines: parallel_for (chunks of a range on the pool's threads, with a grain size so small work stays on the
// calling thread; core/cpu/thread_pool.cpp) and the thread-count setting behind ember::set_num_threads.
// Private to core/.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace ember::cpu {

int num_threads();   // set_num_threads, or by default usable_cores()
int usable_cores();  // the cores this process may run on (its affinity mask)

// Below this many elements an elementwise op runs on one thread: the fork/join costs more than it saves.
inline constexpr int64_t kElementwiseGrain = 32768;

// A non-owning reference to a callable taking the chunk index (no allocation, one indirect call).
class ChunkFn {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, ChunkFn>>>
  ChunkFn(const F& f) : obj_(&f), call_([](const void* o, int64_t i) { (*static_cast<const F*>(o))(i); }) {}
  void operator()(int64_t i) const { call_(obj_, i); }

 private:
  const void* obj_;
  void (*call_)(const void*, int64_t);
};

// The chunk of a thread-pool region this thread is running, -1 outside one (Scratch keys buffers by it).
int current_chunk_slot();

// Runs fn(0) ... fn(chunks - 1), each exactly once, on up to `threads` threads (the caller's included), and
// returns when all are done. Nested calls, and calls made while another thread's region runs, run inline.
void run_chunks(int threads, int64_t chunks, const ChunkFn& fn);

// Calls f(begin, end) on contiguous chunks of [begin, end), each at least `grain` long, at most one per
// thread; which chunk covers which range depends only on the thread count, never on timing. f must not throw.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  const int nt = num_threads();
  const int64_t chunks = nt > 1 && n > grain ? std::min<int64_t>(nt, (n + grain - 1) / std::max<int64_t>(grain, 1)) : 1;
  if (chunks <= 1) {
    f(begin, end);
    return;
  }
  const int64_t per = (n + chunks - 1) / chunks;
  run_chunks(nt, chunks, [&](int64_t c) {
    const int64_t b = begin + c * per, e = std::min(end, b + per);
    if (b < e) f(b, e);
  });
}

}  // namespace ember::cpu
