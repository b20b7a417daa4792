// defines: HandlePool, per-thread cuBLAS / cuDNN handles that outlive no thread and leak none. A thread takes one
// handle per device on first use; when the thread exits, its handles go back to a process-wide free list (no CUDA
// call: the exit of the last threads may race the runtime's own shutdown) and the next new thread reuses them.
// Threads that come and go (data workers, user threads) thus hold a bounded set of handles, where a handle per
// thread kept forever grew without end. The free lists are never destroyed.
#pragma once
#include <mutex>
#include <vector>

namespace ember::cuda::detail {

template <class H>
class HandlePool {
 public:
  // This thread's handle for `device`: from the free list, else create(&h) (which throws on failure).
  template <class Create>
  static H get(int device, Create&& create) {
    std::vector<H>& mine = thread_handles().hs;
    if (mine.size() <= static_cast<size_t>(device)) mine.resize(static_cast<size_t>(device) + 1, nullptr);
    H& h = mine[static_cast<size_t>(device)];
    if (!h) {
      {
        std::lock_guard<std::mutex> lock(shared().mu);
        auto& list = shared().free;
        if (list.size() > static_cast<size_t>(device) && !list[static_cast<size_t>(device)].empty()) {
          h = list[static_cast<size_t>(device)].back();
          list[static_cast<size_t>(device)].pop_back();
        }
      }
      if (!h) create(&h);
    }
    return h;
  }

 private:
  struct Shared {
    std::mutex mu;
    std::vector<std::vector<H>> free;  // by device
  };
  static Shared& shared() {
    static auto* s = new Shared();  // never destroyed: threads exiting during teardown still find it
    return *s;
  }
  struct ThreadHandles {
    std::vector<H> hs;  // by device
    ~ThreadHandles() {
      std::lock_guard<std::mutex> lock(shared().mu);
      auto& list = shared().free;
      if (list.size() < hs.size()) list.resize(hs.size());
      for (size_t d = 0; d < hs.size(); ++d)
        if (hs[d]) list[d].push_back(hs[d]);
    }
  };
  static ThreadHandles& thread_handles() {
    thread_local ThreadHandles t;
    return t;
  }
};

}  // namespace ember::cuda::detail
