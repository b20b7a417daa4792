// Tests of the CUDA caching allocator (cuda/src/caching_allocator.*), the cached pinned host allocator and the
// memory API of ember/cuda/memory.h. The GPU tests skip on a machine without a usable GPU; the last test runs
// only there and checks that the memory API says why it cannot work.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

#if EMBER_WITH_CUDA
#include <cuda_runtime.h>

#include "allocator_internal.h"
#endif

namespace {

using namespace ember;
constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

#if EMBER_WITH_CUDA

Allocator& dev0() { return cuda::detail::device_allocator(0); }
cuda::MemoryStats stats0() { return cuda::memory_stats(0); }

// Device 0, legacy default stream, and no cached segments: each test starts from the same state.
void fresh() {
  cuda::set_device(0);
  cuda::empty_cache();
}

// Keeps `stream` busy until release() (or 20 s, so a bug cannot hang the suite): a host function blocks
// the stream while it runs, which stands in for a long kernel.
class BusyStream {
 public:
  explicit BusyStream(cudaStream_t stream) : stream_(stream) {
    EXPECT_EQ(cudaLaunchHostFunc(stream, &BusyStream::wait, &released_), cudaSuccess);
  }
  void release() { released_.store(true); }
  ~BusyStream() {  // the host function reads released_: it must be done before released_ goes away
    release();
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  }

 private:
  static void wait(void* flag) {
    auto* released = static_cast<std::atomic<bool>*>(flag);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!released->load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  cudaStream_t stream_;
  std::atomic<bool> released_{false};
};

TEST(CudaCachingAllocator, SecondAllocationOfASizeIsACacheHit) {
  EMBER_SKIP_IF_NO_CUDA();
  fresh();
  void* p = dev0().allocate(1000);
  ASSERT_NE(p, nullptr);
  const cuda::MemoryStats s1 = stats0();
  dev0().deallocate(p, 1000);
  void* q = dev0().allocate(1000);
  const cuda::MemoryStats s2 = stats0();
  EXPECT_EQ(q, p);  // the freed block merged back into its segment, and best fit starts there again
  EXPECT_EQ(s2.num_cuda_mallocs, s1.num_cuda_mallocs);
  EXPECT_EQ(s2.cache_hits, s1.cache_hits + 1);
  dev0().deallocate(q, 1000);
  EXPECT_EQ(dev0().allocate(0), nullptr);
  dev0().deallocate(nullptr, 0);  // a no-op
  EXPECT_EQ(dev0().device(), Device::cuda(0));
}

TEST(CudaCachingAllocator, SmallBlocksSplitAndMerge) {
  EMBER_SKIP_IF_NO_CUDA();
  fresh();
  // Three 512 KiB blocks carved from one 2 MiB small-pool segment, in address order.
  auto* a = static_cast<char*>(dev0().allocate(512 * KiB));
  auto* b = static_cast<char*>(dev0().allocate(512 * KiB));
  auto* c = static_cast<char*>(dev0().allocate(512 * KiB));
  const cuda::MemoryStats s0 = stats0();
  ASSERT_EQ(b, a + 512 * KiB);
  ASSERT_EQ(c, b + 512 * KiB);
  dev0().deallocate(b, 512 * KiB);  // the middle first: no free neighbour yet
  dev0().deallocate(a, 512 * KiB);
  dev0().deallocate(c, 512 * KiB);  // now the whole segment is one free block again
  // Two 1 MiB requests fit only if all pieces merged: both come from the same segment, no cudaMalloc.
  auto* x = static_cast<char*>(dev0().allocate(1 * MiB));
  auto* y = static_cast<char*>(dev0().allocate(1 * MiB));
  const cuda::MemoryStats s1 = stats0();
  EXPECT_EQ(x, a);
  EXPECT_EQ(y, a + 1 * MiB);
  EXPECT_EQ(s1.num_cuda_mallocs, s0.num_cuda_mallocs);
  EXPECT_EQ(s1.segments, s0.segments);
  dev0().deallocate(x, 1 * MiB);
  dev0().deallocate(y, 1 * MiB);
}

TEST(CudaCachingAllocator, LargeBlocksSplitAndMerge) {
  EMBER_SKIP_IF_NO_CUDA();
  fresh();
  // Three 3 MiB blocks from one 20 MiB large-pool segment.
  auto* a = static_cast<char*>(dev0().allocate(3 * MiB));
  auto* b = static_cast<char*>(dev0().allocate(3 * MiB));
  auto* c = static_cast<char*>(dev0().allocate(3 * MiB));
  const cuda::MemoryStats s0 = stats0();
  ASSERT_EQ(b, a + 3 * MiB);
  ASSERT_EQ(c, b + 3 * MiB);
  dev0().deallocate(b, 3 * MiB);
  dev0().deallocate(c, 3 * MiB);
  dev0().deallocate(a, 3 * MiB);
  // 16 MiB would get its own segment, but the merged 20 MiB block fits it.
  void* big = dev0().allocate(16 * MiB);
  const cuda::MemoryStats s1 = stats0();
  EXPECT_EQ(big, a);
  EXPECT_EQ(s1.num_cuda_mallocs, s0.num_cuda_mallocs);
  dev0().deallocate(big, 16 * MiB);
}

TEST(CudaCachingAllocator, StatsCountRoundedSizesAndPeaks) {
  EMBER_SKIP_IF_NO_CUDA();
  fresh();
  cuda::reset_peak_memory_stats(0);
  const size_t base = cuda::memory_allocated(0);
  const cuda::MemoryStats s0 = stats0();

  void* p = dev0().allocate(1000);  // rounded to 1024
  EXPECT_EQ(cuda::memory_allocated(0), base + 1024);
  void* q = dev0().allocate(3 * MiB);  // a 3 MiB piece of a 20 MiB segment
  EXPECT_EQ(cuda::memory_allocated(0), base + 1024 + 3 * MiB);
  EXPECT_EQ(cuda::memory_allocated(Device::cuda(0)), cuda::memory_allocated());
  EXPECT_GE(cuda::memory_reserved(0), cuda::memory_allocated(0));
  EXPECT_GE(cuda::memory_reserved(0), 2 * MiB + 20 * MiB);
  EXPECT_GE(cuda::max_memory_reserved(0), cuda::memory_reserved(0));
  EXPECT_EQ(cuda::max_memory_allocated(0), base + 1024 + 3 * MiB);

  dev0().deallocate(q, 3 * MiB);
  EXPECT_EQ(cuda::memory_allocated(0), base + 1024);
  EXPECT_EQ(cuda::max_memory_allocated(0), base + 1024 + 3 * MiB);  // the peak stays
  cuda::reset_peak_memory_stats(0);
  EXPECT_EQ(cuda::max_memory_allocated(0), base + 1024);
  EXPECT_EQ(cuda::max_memory_reserved(0), cuda::memory_reserved(0));
  dev0().deallocate(p, 1000);
  EXPECT_EQ(cuda::memory_allocated(0), base);

  const cuda::MemoryStats s1 = stats0();
  EXPECT_EQ(s1.num_allocs, s0.num_allocs + 2);
  EXPECT_EQ(s1.num_frees, s0.num_frees + 2);
  EXPECT_EQ(s1.active_blocks, s0.active_blocks);
  EXPECT_THROW_MSG(cuda::memory_allocated(Device::cpu()), DeviceError, "expected a CUDA device");
}

TEST(CudaCachingAllocator, EmptyCacheReturnsReservedMemory) {
  EMBER_SKIP_IF_NO_CUDA();
  fresh();
  const size_t reserved0 = cuda::memory_reserved(0);
  void* p = dev0().allocate(256 * MiB);
  dev0().deallocate(p, 256 * MiB);
  EXPECT_EQ(cuda::memory_reserved(0), reserved0 + 256 * MiB);  // freed, but kept in the cache
  const size_t free1 = cuda::mem_get_info(0).first;
  const uint64_t frees0 = stats0().num_cuda_frees;
  cuda::empty_cache();
  const auto [free2, total] = cuda::mem_get_info(0);
  EXPECT_EQ(cuda::memory_reserved(0), reserved0);
  EXPECT_EQ(stats0().num_cuda_frees, frees0 + 1);
  EXPECT_GT(free2, free1 + 128 * MiB);  // the driver got (about) 256 MiB back
  EXPECT_LE(free2, total);
}

// cuBLAS's workspace is taken at a stream's first GEMM and kept: later GEMMs on the stream take only their output,
// another stream gets its own, and empty_cache() gives them back.
TEST(CudaCachingAllocator, CublasWorkspaceIsKeptPerStream) {
  EMBER_SKIP_IF_NO_CUDA();
  const TensorOptions on{.device = Device::cuda()};
  const Tensor a = randn({64, 64}, on), b = randn({64, 64}, on);
  cuda::synchronize();
  cuda::empty_cache();
  const size_t base = cuda::memory_allocated(0), out = 64 * 64 * 4;
  const Tensor c1 = matmul(a, b);
  const size_t first = cuda::memory_allocated(0) - base;
  EXPECT_GE(first, out + 4 * MiB) << "the output and the workspace (4 MiB, 32 on Hopper)";
  const Tensor c2 = matmul(a, b);
  EXPECT_EQ(cuda::memory_allocated(0) - base, first + out) << "the same stream reuses its workspace";
  {
    cuda::Stream s = cuda::Stream::create();
    cuda::StreamGuard g(s);
    const Tensor c3 = matmul(a, b);
    EXPECT_EQ(cuda::memory_allocated(0) - base, 2 * first + out) << "another stream takes its own";
    s.synchronize();
  }
  cuda::synchronize();
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_allocated(0) - base, 2 * out) << "empty_cache gives the workspaces back";
  EXPECT_EQ(test::values(c1), test::values(c2));
}

TEST(CudaCachingAllocator, OutOfMemoryThrowsAndTheAllocatorStillWorks) {
  EMBER_SKIP_IF_NO_CUDA();
  fresh();
  const size_t total = cuda::mem_get_info(0).second;
  void* keep = dev0().allocate(4 * KiB);  // a live block must survive the OOM path
  const cuda::MemoryStats s0 = stats0();
  EXPECT_THROW_MSG(dev0().allocate(total + 1024 * MiB), OutOfMemoryError, "CUDA out of memory: tried to allocate",
                   "on cuda:0", " total, ", " free, ", "allocated by ember", " reserved");
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // the error slot was cleared
  const cuda::MemoryStats s1 = stats0();
  EXPECT_EQ(s1.num_ooms, s0.num_ooms + 1);
  EXPECT_EQ(s1.num_alloc_retries, s0.num_alloc_retries + 1);
  EXPECT_EQ(s1.allocated_bytes, s0.allocated_bytes);
  EXPECT_EQ(s1.num_allocs, s0.num_allocs);

  void* p = dev0().allocate(8 * MiB);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(cudaMemset(p, 0, 8 * MiB), cudaSuccess);
  EXPECT_EQ(cudaMemset(keep, 0, 4 * KiB), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dev0().deallocate(p, 8 * MiB);
  dev0().deallocate(keep, 4 * KiB);
}

TEST(CudaCachingAllocator, MemorySummaryHasTheHeadings) {
  EMBER_SKIP_IF_NO_CUDA();
  fresh();
  void* p = dev0().allocate(1 * MiB);
  const std::string s = cuda::memory_summary(0);
  dev0().deallocate(p, 1 * MiB);
  for (const char* heading : {"cuda:0", "Metric", "Current", "Peak", "Allocated memory", "Reserved memory", "Segments",
                              "cudaMalloc calls", "cache hits", "free of"})
    EXPECT_NE(s.find(heading), std::string::npos) << "summary lacks \"" << heading << "\":\n" << s;
  EXPECT_EQ(cuda::memory_summary(Device::cuda(0)).empty(), false);
}

TEST(CudaCachingAllocator, SteadyLoopMakesNoCudaMallocAfterTheFirstIteration) {
  EMBER_SKIP_IF_NO_CUDA();
  fresh();
  const std::vector<size_t> sizes = {4 * KiB, 1000, 300 * KiB, 1 * MiB, 3 * MiB, 12 * MiB, 64 * MiB, 777, 5 * MiB};
  uint64_t mallocs_after_first = 0;
  for (int iter = 0; iter < 10; ++iter) {
    std::vector<void*> ptrs;
    for (size_t n : sizes) ptrs.push_back(dev0().allocate(n));
    for (size_t i = ptrs.size(); i-- > 0;) dev0().deallocate(ptrs[i], sizes[i]);
    const uint64_t mallocs = stats0().num_cuda_mallocs;
    if (iter == 0) {
      mallocs_after_first = mallocs;
    } else {
      EXPECT_EQ(mallocs, mallocs_after_first) << "iteration " << iter;
    }
  }
}

TEST(CudaCachingAllocator, RecordStreamDelaysReuseUntilTheStreamIsDone) {
  EMBER_SKIP_IF_NO_CUDA();
  fresh();
  cudaStream_t side = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  {
    auto* p = static_cast<char*>(dev0().allocate(1 * MiB));  // on the current (legacy default) stream
    BusyStream busy(side);
    cuda::detail::record_stream(p, side);  // `side` uses p; its work is not done
    dev0().deallocate(p, 1 * MiB);
    EXPECT_EQ(stats0().pending_free_blocks, 1u);

    void* q = dev0().allocate(1 * MiB);  // same stream and size: must not get p while `side` runs
    EXPECT_NE(q, static_cast<void*>(p));
    EXPECT_EQ(q, static_cast<void*>(p + 1 * MiB));  // the other half of the segment

    busy.release();
    ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
    dev0().deallocate(q, 1 * MiB);
    void* r = dev0().allocate(1 * MiB);  // the event completed: p is free (and merged with q) again
    EXPECT_EQ(r, static_cast<void*>(p));
    EXPECT_EQ(stats0().pending_free_blocks, 0u);
    dev0().deallocate(r, 1 * MiB);
  }
  // record_stream on the block's own stream and on memory the allocator does not own are no-ops.
  void* s = dev0().allocate(4 * KiB);
  cuda::detail::record_stream(s, nullptr);
  int not_ours = 0;
  cuda::detail::record_stream(&not_ours, side);
  dev0().deallocate(s, 4 * KiB);
  EXPECT_EQ(stats0().pending_free_blocks, 0u);
  EXPECT_EQ(cudaStreamDestroy(side), cudaSuccess);
}

TEST(CudaCachingAllocator, PinnedHostAllocatorReturnsPageLockedMemoryAndCaches) {
  EMBER_SKIP_IF_NO_CUDA();
  Allocator& host = cuda::detail::host_allocator();
  EXPECT_TRUE(host.device().is_cpu());
  const cuda::HostMemoryStats s0 = cuda::host_memory_stats();
  void* p = host.allocate(10000);
  ASSERT_NE(p, nullptr);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, p), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  std::memset(p, 7, 10000);  // ordinary host memory too
  const cuda::HostMemoryStats s1 = cuda::host_memory_stats();
  EXPECT_GE(s1.allocated_bytes, s0.allocated_bytes + 10000);
  EXPECT_GE(s1.reserved_bytes, s1.allocated_bytes);

  host.deallocate(p, 10000);
  void* q = host.allocate(10000);
  const cuda::HostMemoryStats s2 = cuda::host_memory_stats();
  EXPECT_EQ(q, p);
  EXPECT_EQ(s2.cache_hits, s1.cache_hits + 1);
  EXPECT_EQ(s2.num_host_allocs, s1.num_host_allocs);
  host.deallocate(q, 10000);

  cuda::host_empty_cache();
  const cuda::HostMemoryStats s3 = cuda::host_memory_stats();
  EXPECT_EQ(s3.reserved_bytes, s3.allocated_bytes);
  EXPECT_GT(s3.num_host_frees, s2.num_host_frees);
}

TEST(CudaCachingAllocator, PinnedBlockUsedByACopyIsNotReusedBeforeTheCopyFinishes) {
  EMBER_SKIP_IF_NO_CUDA();
  cuda::set_device(0);
  Allocator& host = cuda::detail::host_allocator();
  cuda::host_empty_cache();
  cudaStream_t side = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  void* dst = dev0().allocate(64 * KiB);
  {
    // Two cached blocks of one size, so that nothing below needs cudaHostAlloc while `side` is held busy.
    auto* p = static_cast<char*>(host.allocate(64 * KiB));
    void* spare = host.allocate(64 * KiB);
    host.deallocate(spare, 64 * KiB);

    BusyStream busy(side);
    ASSERT_EQ(cudaMemcpyAsync(dst, p, 64 * KiB, cudaMemcpyHostToDevice, side), cudaSuccess);
    cuda::detail::host_record_use(p + 100, side);  // any address inside the block will do
    host.deallocate(p, 64 * KiB);                  // cached after `spare`, so it would be handed out first

    void* q = host.allocate(64 * KiB);  // the copy has not run: p must not come back
    EXPECT_NE(q, static_cast<void*>(p));
    EXPECT_EQ(q, spare);

    busy.release();
    ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
    void* r = host.allocate(64 * KiB);  // the copy is done: p is reusable
    EXPECT_EQ(r, static_cast<void*>(p));
    host.deallocate(q, 64 * KiB);
    host.deallocate(r, 64 * KiB);
  }
  int pageable = 0;
  cuda::detail::host_record_use(&pageable, side);  // not pinned by ember: a no-op
  dev0().deallocate(dst, 64 * KiB);
  EXPECT_EQ(cudaStreamDestroy(side), cudaSuccess);
}

#endif  // EMBER_WITH_CUDA

// Runs where there is no usable GPU (or no CUDA build): the memory statistics read 0 and the cache calls do nothing
// (device-agnostic loops call them unconditionally, as with PyTorch); what needs a device throws with the reason.
TEST(CudaMemoryWithoutGpu, StatisticsReadZeroAndCacheCallsDoNothing) {
  if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is present";
  const std::string why = cuda::unavailable_reason();
  ASSERT_FALSE(why.empty());
  EXPECT_EQ(cuda::memory_allocated(), 0u);
  EXPECT_EQ(cuda::memory_allocated(0), 0u);
  EXPECT_EQ(cuda::memory_allocated(Device::cuda(0)), 0u);
  EXPECT_EQ(cuda::max_memory_allocated(), 0u);
  EXPECT_EQ(cuda::memory_reserved(), 0u);
  EXPECT_EQ(cuda::max_memory_reserved(Device::cuda(1)), 0u);
  EXPECT_EQ(cuda::memory_stats().num_allocs, 0u);
  EXPECT_EQ(cuda::memory_stats().reserved_bytes, 0u);
  EXPECT_EQ(cuda::host_memory_stats().allocated_bytes, 0u);
  EXPECT_NO_THROW(cuda::reset_peak_memory_stats());
  EXPECT_NO_THROW(cuda::empty_cache());
  EXPECT_NO_THROW(cuda::host_empty_cache());
  EXPECT_NO_THROW(cuda::reset_peak_host_memory_stats());
  const std::string summary = cuda::memory_summary();
  EXPECT_EQ(summary.rfind("CUDA is not available: ", 0), 0u) << summary;
  EXPECT_NE(summary.find(why), std::string::npos) << summary;
  // Still errors: asking the driver, capping a device, a CPU device passed where a CUDA one is meant.
  EXPECT_THROW_MSG(cuda::mem_get_info(), DeviceError, "cuda::mem_get_info", why.c_str());
  EXPECT_THROW_MSG(cuda::set_per_process_memory_fraction(0.5), DeviceError, why.c_str());
  EXPECT_THROW_MSG(cuda::memory_allocated(Device::cpu()), DeviceError, "expected a CUDA device");
  EXPECT_THROW_MSG(cuda::synchronize(), DeviceError, why.c_str());
#if EMBER_WITH_CUDA
  EXPECT_THROW_MSG(cuda::detail::device_allocator(0), DeviceError, why.c_str());
  EXPECT_THROW_MSG(cuda::detail::host_allocator().allocate(16), DeviceError, why.c_str());
  int x = 0;
  cuda::detail::record_stream(&x, nullptr);  // no-ops, not errors
  cuda::detail::host_record_use(&x, nullptr);
#endif
}

}  // namespace
