// parallel_for on the CPU thread pool (core/cpu/thread_pool.cpp, Note [Thread pool]): every index is covered
// exactly once, chunk boundaries depend only on the thread count, nested and concurrent calls work, and
// workers that went to sleep between regions are woken (no lost wake-up: the test would hang).
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "../../core/cpu/parallel.h"
#include "test_util.h"

using namespace ember;
using cpu::parallel_for;

namespace {
struct ThreadsGuard {
  int saved = get_num_threads();
  explicit ThreadsGuard(int n) { set_num_threads(n); }
  ~ThreadsGuard() { set_num_threads(saved); }
};

// Runs parallel_for over [begin, end) and checks each index was visited exactly once.
void expect_covered_once(int64_t begin, int64_t end, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(std::max<int64_t>(end, 0)));
  parallel_for(begin, end, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < end; ++i)
    ASSERT_EQ(hits[static_cast<size_t>(i)].load(), i >= begin ? 1 : 0)
        << "index " << i << " of [" << begin << ", " << end << ") grain " << grain;
}
}  // namespace

TEST(ThreadPool, EveryIndexOnceForAnyThreadCountAndGrain) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadsGuard g(threads);
    for (int64_t n : {0, 1, 5, 17, 1000, 100003})
      for (int64_t grain : {1, 7, 1000}) expect_covered_once(3, 3 + n, grain);
  }
}

TEST(ThreadPool, ChunksDependOnlyOnTheThreadCount) {
  ThreadsGuard g(3);
  auto ranges = [] {
    std::vector<std::pair<int64_t, int64_t>> r(3, {-1, -1});
    std::atomic<int> calls{0};
    parallel_for(0, 10, 1, [&](int64_t b, int64_t e) {
      r[static_cast<size_t>(b / 4)] = {b, e};
      calls.fetch_add(1);
    });
    EXPECT_EQ(calls.load(), 3);
    return r;
  };
  const auto want = std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 8}, {8, 10}};
  for (int rep = 0; rep < 50; ++rep) ASSERT_EQ(ranges(), want);
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadsGuard g(4);
  std::atomic<int64_t> sum{0};
  parallel_for(0, 8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallel_for(0, 100, 1, [&](int64_t b2, int64_t e2) {
        for (int64_t j = b2; j < e2; ++j) sum.fetch_add(i * 100 + j);
      });
  });
  EXPECT_EQ(sum.load(), 799 * 800 / 2);
}

TEST(ThreadPool, ConcurrentCallersFromSeveralThreads) {
  ThreadsGuard g(2);
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep) {
        std::vector<int> hits(5000, 0);  // each index written by one chunk only
        parallel_for(0, 5000, 100, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)] += 1;
        });
        for (int h : hits)
          if (h != 1) failures.fetch_add(1);
      }
    });
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPool, SleepingWorkersAreWokenAndManyTinyRegionsFinish) {
  ThreadsGuard g(3);
  for (int rep = 0; rep < 20; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // long enough for the workers to go to sleep
    expect_covered_once(0, 64, 1);
  }
  for (int rep = 0; rep < 20000; ++rep) {
    std::atomic<int> n{0};
    parallel_for(0, 3, 1, [&](int64_t b, int64_t e) { n.fetch_add(static_cast<int>(e - b)); });
    ASSERT_EQ(n.load(), 3);
  }
}

// The default thread count is the cores this process may run on (its affinity mask), not the machine's.
TEST(ThreadPool, DefaultThreadsFollowTheAffinityMask) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  EXPECT_EQ(cpu::usable_cores(), CPU_COUNT(&saved));
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const int restricted = cpu::usable_cores();
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
  EXPECT_EQ(restricted, 1);
}
