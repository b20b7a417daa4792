// tests: what a machine without a usable CUDA device (or a build without CUDA) sees: no devices, a reason,
// and a DeviceError carrying that reason wherever a device is needed. Skipped when a GPU is present.
#include "test_util.h"

namespace ember {
namespace {

#define SKIP_IF_GPU() \
  do { \
    if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is present"; \
  } while (0)

TEST(CudaNoGpu, NoDevicesAndAReason) {
  SKIP_IF_GPU();
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_FALSE(cuda::unavailable_reason().empty());
}

TEST(CudaNoGpu, ToCudaThrowsWithTheReason) {
  SKIP_IF_GPU();
  const std::string why = cuda::unavailable_reason();
  Tensor x = ones({2, 3});
  EXPECT_THROW_MSG(x.to(Device::cuda()), DeviceError, "cuda:0", why.c_str());
  EXPECT_THROW_MSG(x.cuda(), DeviceError, why.c_str());
  EXPECT_THROW_MSG(zeros({2}, {.device = Device::cuda()}), DeviceError, why.c_str());
  Tensor y = empty({2, 3});
  EXPECT_NO_THROW(y.copy_(x));  // CPU copies are unaffected
}

TEST(CudaNoGpu, PinMemoryThrows) {
  SKIP_IF_GPU();
  const std::string why = cuda::unavailable_reason();
  Tensor x = ones({4});
  EXPECT_FALSE(x.is_pinned());
  EXPECT_THROW_MSG(x.pin_memory(), DeviceError, "pin_memory", why.c_str());
}

TEST(CudaNoGpu, StreamsAndEventsThrow) {
  SKIP_IF_GPU();
  const std::string why = cuda::unavailable_reason();
  EXPECT_THROW_MSG(cuda::Stream::create(), DeviceError, "Stream::create", why.c_str());
  EXPECT_THROW_MSG(cuda::current_stream(), DeviceError, why.c_str());
  EXPECT_THROW_MSG(cuda::default_stream(), DeviceError, why.c_str());
  cuda::Stream s(nullptr, 0);
  EXPECT_THROW_MSG(cuda::StreamGuard g(s), DeviceError, why.c_str());
  EXPECT_THROW_MSG(s.synchronize(), DeviceError, why.c_str());
  cuda::Event e({.enable_timing = true});  // constructing makes no CUDA call
  EXPECT_FALSE(e.recorded());
  EXPECT_THROW_MSG(e.record(s), DeviceError, why.c_str());
  EXPECT_THROW_MSG(e.record(), DeviceError, "cuda::Event::record", why.c_str());  // the user's call, named
  EXPECT_THROW(ones({2}).record_stream(s), DeviceError);
}

TEST(CudaNoGpu, DeviceQueriesThrow) {
  SKIP_IF_GPU();
  const std::string why = cuda::unavailable_reason();
  EXPECT_THROW_MSG(cuda::current_device(), DeviceError, why.c_str());
  EXPECT_THROW_MSG(cuda::set_device(0), DeviceError, why.c_str());
  EXPECT_THROW_MSG(cuda::get_device_name(0), DeviceError, why.c_str());
  EXPECT_THROW_MSG(cuda::synchronize(), DeviceError, why.c_str());
}

}  // namespace
}  // namespace ember
