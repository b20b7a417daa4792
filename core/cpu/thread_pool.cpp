// defines: the worker threads behind parallel_for (parallel.h).
//
// Note [Thread pool]: why not `#pragma omp parallel`. An OpenMP region ends at a barrier that every thread of
// the team must reach, so when one worker is descheduled (another process, or a DataLoader thread, wants the
// core) the others spin or sleep until it runs again: on a 2-core machine with a compile running beside it,
// a CNN step went 1,650 -> 300 samples/s. Here the chunks of a region are claimed from a shared counter by
// whichever threads are running, the calling thread included, and the region ends when every chunk is done:
// a worker that never woke up simply claims nothing. Workers spin briefly between regions (training steps
// issue them back to back) and then sleep on an atomic wait.
//
// The region's state is one 64-bit ticket: generation (32 bits) | chunk count (16) | next chunk (16). A
// worker claims chunk i of generation g by a compare-exchange of the whole ticket, so it can never take a
// chunk of a region that has already ended. The chunk function is only read after a successful claim, and
// the caller does not reuse the slot before all claimed chunks have reported done.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "parallel.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define EMBER_CPU_RELAX() _mm_pause()
#else
#define EMBER_CPU_RELAX() std::this_thread::yield()
#endif

namespace ember::cpu {
namespace {

constexpr int kSpinsBeforeSleep = 1 << 14;  // ~50 us of pause instructions

uint64_t ticket_of(uint64_t gen, uint64_t chunks, uint64_t next) { return gen << 32 | chunks << 16 | next; }
uint32_t gen_of(uint64_t t) { return static_cast<uint32_t>(t >> 32); }
int64_t chunks_of(uint64_t t) { return static_cast<int64_t>(t >> 16 & 0xFFFF); }
int64_t next_of(uint64_t t) { return static_cast<int64_t>(t & 0xFFFF); }

class ThreadPool {
 public:
  // Runs fn(i) for i in [0, chunks) on the caller and up to `threads - 1` workers. Returns false (running
  // nothing) when another thread's region is in progress: the caller then runs the chunks itself.
  bool run(int threads, int64_t chunks, const ChunkFn& fn) {
    if (busy_.exchange(true, std::memory_order_acquire)) return false;
    ensure_workers(threads - 1);
    fn_ = &fn;
    done_.store(0, std::memory_order_relaxed);
    const uint32_t gen = ++gen_counter_;
    ticket_.store(ticket_of(gen, static_cast<uint64_t>(chunks), 0), std::memory_order_seq_cst);
    // seq_cst store and load here, and in the worker's sleepers_ increment and re-check of the ticket: either
    // the worker sees the new ticket, or this sees the sleeper and wakes it.
    if (sleepers_.load(std::memory_order_seq_cst) > 0) ticket_.notify_all();
    work(gen);
    // Wait for the chunks other threads claimed. Yield rather than spin for long: a claimed chunk whose
    // thread was descheduled needs a core to finish.
    for (int spins = 0; done_.load(std::memory_order_acquire) < chunks; ++spins) {
      if (spins < kSpinsBeforeSleep) EMBER_CPU_RELAX();
      else std::this_thread::yield();
    }
    busy_.store(false, std::memory_order_release);
    return true;
  }

 private:
  // Claims and runs chunks of region `gen` until none is left.
  void work(uint32_t gen) {
    uint64_t t = ticket_.load(std::memory_order_acquire);
    while (gen_of(t) == gen && next_of(t) < chunks_of(t)) {
      if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      (*fn_)(next_of(t));
      done_.fetch_add(1, std::memory_order_release);
      t = ticket_.load(std::memory_order_acquire);
    }
  }

  void worker_loop() {
    uint64_t seen = ticket_.load(std::memory_order_acquire);
    for (;;) {
      // Wait for a new ticket: spin a little, then sleep until it changes.
      uint64_t t = ticket_.load(std::memory_order_acquire);
      for (int spins = 0; t == seen && spins < kSpinsBeforeSleep; ++spins) {
        EMBER_CPU_RELAX();
        t = ticket_.load(std::memory_order_acquire);
      }
      if (t == seen) {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        ticket_.wait(seen, std::memory_order_seq_cst);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        t = ticket_.load(std::memory_order_acquire);
      }
      work(gen_of(t));
      seen = ticket_.load(std::memory_order_acquire);
    }
  }

  void ensure_workers(int n) {
    if (static_cast<int>(workers_.size()) >= n) return;
    std::lock_guard<std::mutex> lock(start_mutex_);
    while (static_cast<int>(workers_.size()) < n) workers_.emplace_back([this] { worker_loop(); });
  }

  std::atomic<uint64_t> ticket_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> busy_{false};
  const ChunkFn* fn_ = nullptr;
  uint32_t gen_counter_ = 0;  // only touched by the thread holding busy_
  std::mutex start_mutex_;
  std::vector<std::thread> workers_;
};

// Never destroyed: its threads may still be waiting when static destructors run; process exit ends them.
ThreadPool& pool() {
  static ThreadPool* p = new ThreadPool;
  return *p;
}

thread_local int t_region_depth = 0;  // > 0 inside a chunk: nested regions run inline
thread_local int t_chunk_slot = -1;   // the pool chunk this thread runs

}  // namespace

int current_chunk_slot() { return t_chunk_slot; }

void run_chunks(int threads, int64_t chunks, const ChunkFn& fn) {
  if (threads > 1 && chunks > 1 && chunks <= 0xFFFF && t_region_depth == 0) {
    ++t_region_depth;
    const bool ran = pool().run(threads, chunks, [&fn](int64_t i) {
      ++t_region_depth;
      t_chunk_slot = static_cast<int>(i);
#ifdef _OPENMP
      // Eigen's float64 GEMM threads itself with OpenMP unless it is already inside a parallel region; a
      // chunk is one thread's share, so it runs single-threaded (as under the old `omp parallel`).
      const int omp_threads = omp_get_max_threads();
      omp_set_num_threads(1);
#endif
      fn(i);
#ifdef _OPENMP
      omp_set_num_threads(omp_threads);
#endif
      t_chunk_slot = -1;
      --t_region_depth;
    });
    --t_region_depth;
    if (ran) return;
  }
  for (int64_t i = 0; i < chunks; ++i) fn(i);
}

}  // namespace ember::cpu
