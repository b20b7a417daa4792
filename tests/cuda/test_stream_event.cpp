// tests: cuda::Stream (default and pooled streams, query/synchronize), the per-thread current stream and
// StreamGuard, and cuda::Event (query, timing, ordering one stream after another with block).
#include <thread>

#include "test_util.h"

namespace ember {
namespace {

constexpr int64_t kBig = int64_t{1} << 24;  // 64 MiB of float32: enough work to keep a stream busy a while

TEST(CudaStream, DefaultCurrentStreamIsTheLegacyDefaultStream) {
  EMBER_SKIP_IF_NO_CUDA();
  cuda::Stream s = cuda::current_stream();
  EXPECT_TRUE(s.is_default());
  EXPECT_EQ(s.handle(), nullptr);
  EXPECT_EQ(s, cuda::default_stream());
  EXPECT_EQ(s.device_index(), cuda::current_device());
  EXPECT_NO_THROW(s.synchronize());
  EXPECT_TRUE(s.query());
}

TEST(CudaStream, CreateGivesDistinctNonDefaultStreams) {
  EMBER_SKIP_IF_NO_CUDA();
  cuda::Stream a = cuda::Stream::create();
  cuda::Stream b = cuda::Stream::create();
  EXPECT_FALSE(a.is_default());
  EXPECT_NE(a, b);
  EXPECT_EQ(a.device_index(), cuda::current_device());
  a.synchronize();
  EXPECT_TRUE(a.query());
  EXPECT_THROW_MSG(cuda::Stream::create(cuda::device_count()), DeviceError, "out of range");
}

TEST(CudaStream, GuardSetsAndRestoresTheCurrentStream) {
  EMBER_SKIP_IF_NO_CUDA();
  const cuda::Stream before = cuda::current_stream();
  cuda::Stream s = cuda::Stream::create(), t = cuda::Stream::create();
  {
    cuda::StreamGuard g(s);
    EXPECT_EQ(cuda::current_stream(), s);
    {
      cuda::StreamGuard g2(t);
      EXPECT_EQ(cuda::current_stream(), t);
    }
    EXPECT_EQ(cuda::current_stream(), s);
  }
  EXPECT_EQ(cuda::current_stream(), before);
}

TEST(CudaStream, GuardRestoresOnException) {
  EMBER_SKIP_IF_NO_CUDA();
  const cuda::Stream before = cuda::current_stream();
  try {
    cuda::StreamGuard g(cuda::Stream::create());
    throw ValueError("boom");
  } catch (const ValueError&) {}
  EXPECT_EQ(cuda::current_stream(), before);
}

TEST(CudaStream, CurrentStreamIsPerThread) {
  EMBER_SKIP_IF_NO_CUDA();
  cuda::Stream s = cuda::Stream::create();
  cuda::StreamGuard g(s);
  cuda::Stream seen(nullptr, 0);
  bool is_default = false;
  std::thread other([&] {
    seen = cuda::current_stream(s.device_index());
    is_default = seen.is_default();
  });
  other.join();
  EXPECT_TRUE(is_default);
  EXPECT_EQ(cuda::current_stream(), s);
}

TEST(CudaStream, WorkRunsOnTheGuardedStream) {
  EMBER_SKIP_IF_NO_CUDA();
  cuda::Stream s = cuda::Stream::create();
  Tensor x;
  {
    cuda::StreamGuard g(s);
    x = full({kBig}, 3.0, {.device = Device::cuda()});
  }
  s.synchronize();
  EXPECT_TRUE(s.query());
  std::vector<float> v = x.to_vector<float>();
  EXPECT_EQ(v.front(), 3.0f);
  EXPECT_EQ(v.back(), 3.0f);
}

TEST(CudaEvent, UnrecordedEventIsComplete) {
  EMBER_SKIP_IF_NO_CUDA();
  cuda::Event e;
  EXPECT_FALSE(e.recorded());
  EXPECT_TRUE(e.query());
  EXPECT_NO_THROW(e.synchronize());
  EXPECT_NO_THROW(e.block(cuda::current_stream()));
}

TEST(CudaEvent, TimingAroundWork) {
  EMBER_SKIP_IF_NO_CUDA();
  cuda::Event start({.enable_timing = true}), stop({.enable_timing = true});
  Tensor x = empty({kBig}, {.device = Device::cuda()});
  start.record();
  for (int i = 0; i < 4; ++i) x.fill_(i);
  stop.record();
  const float ms = start.elapsed_ms(stop);
  EXPECT_GE(ms, 0.0f);
  EXPECT_TRUE(stop.query());
  EXPECT_TRUE(start.recorded());
  EXPECT_EQ(start.device_index(), cuda::current_device());
}

TEST(CudaEvent, ElapsedNeedsTimingAndRecords) {
  EMBER_SKIP_IF_NO_CUDA();
  cuda::Event a, b;
  a.record();
  b.record();
  EXPECT_THROW_MSG(a.elapsed_ms(b), ValueError, "enable_timing");
  cuda::Event c({.enable_timing = true}), d({.enable_timing = true});
  EXPECT_THROW_MSG(c.elapsed_ms(d), ValueError, "recorded");
}

TEST(CudaEvent, MoveKeepsTheEvent) {
  EMBER_SKIP_IF_NO_CUDA();
  cuda::Event a;
  a.record();
  cuda::Event b = std::move(a);
  EXPECT_TRUE(b.recorded());
  EXPECT_FALSE(a.recorded());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  b.synchronize();
  cuda::Event c;
  c = std::move(b);
  EXPECT_TRUE(c.query());
}

// A producer stream fills x; the consumer stream waits on an event and copies x to y. Without block() the
// copy could read x before the fill; with it, y must hold the filled values.
TEST(CudaEvent, BlockOrdersOneStreamAfterAnother) {
  EMBER_SKIP_IF_NO_CUDA();
  cuda::Stream producer = cuda::Stream::create(), consumer = cuda::Stream::create();
  ASSERT_NE(producer, consumer);
  Tensor x, y;
  cuda::Event ready;
  {
    cuda::StreamGuard g(producer);
    x = zeros({kBig}, {.device = Device::cuda()});
    for (int i = 1; i <= 7; ++i) x.fill_(i);  // keep the producer busy
    ready.record(producer);
  }
  ready.block(consumer);
  {
    cuda::StreamGuard g(consumer);
    x.record_stream(consumer);  // x was allocated on the producer and is now read on the consumer
    y = empty({kBig}, {.device = Device::cuda()});
    y.copy_(x);
  }
  consumer.synchronize();
  std::vector<float> v = y.to_vector<float>();
  size_t wrong = 0;
  for (float f : v) wrong += f != 7.0f;
  EXPECT_EQ(wrong, 0u);
}

TEST(CudaEvent, RecordOnAnotherDeviceThrows) {
  EMBER_SKIP_IF_NO_CUDA();
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  cuda::Event e;
  e.record(cuda::default_stream(0));
  EXPECT_THROW_MSG(e.record(cuda::default_stream(1)), DeviceError, "cuda:0", "cuda:1");
}

}  // namespace
}  // namespace ember
