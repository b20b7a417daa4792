// defines: parallel_for (OpenMP with a grain size so small work stays on the calling thread) and the
// thread-count setting behind ember::set_num_threads. Private to core/.
#pragma once
#include <algorithm>
#include <cstdint>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace ember::cpu {

int num_threads();

// Below this many elements an elementwise op runs on one thread: the fork/join costs more than it saves.
inline constexpr int64_t kElementwiseGrain = 32768;

// Calls f(begin, end) on contiguous chunks of [begin, end), each at least `grain` long, one per thread.
// f must not throw.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  int64_t n = end - begin;
  if (n <= 0) return;
#ifdef _OPENMP
  int nt = num_threads();
  if (nt > 1 && n > grain && !omp_in_parallel()) {
    int64_t chunks = std::min<int64_t>(nt, (n + grain - 1) / std::max<int64_t>(grain, 1));
    if (chunks > 1) {
      int64_t per = (n + chunks - 1) / chunks;
#pragma omp parallel num_threads(static_cast<int>(chunks))
      {
        int64_t b = begin + omp_get_thread_num() * per;
        int64_t e = std::min(end, b + per);
        if (b < e) f(b, e);
      }
      return;
    }
  }
#endif
  f(begin, end);
}

}  // namespace ember::cpu
