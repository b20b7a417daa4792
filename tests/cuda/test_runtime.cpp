// tests: the CUDA runtime entry points — availability (never throws), device queries, set_device, and
// tensors on a device index the machine does not have. GPU tests skip without a usable device.
#include "test_util.h"

namespace ember {
namespace {

TEST(CudaRuntime, IsAvailableNeverThrows) {
  bool available = false;
  int count = -1;
  EXPECT_NO_THROW(available = cuda::is_available());
  EXPECT_NO_THROW(count = cuda::device_count());
  EXPECT_EQ(available, count > 0);
  EXPECT_EQ(available, cuda::unavailable_reason().empty()) << cuda::unavailable_reason();
}

TEST(CudaRuntime, DeviceQueries) {
  EMBER_SKIP_IF_NO_CUDA();
  EXPECT_GE(cuda::device_count(), 1);
  EXPECT_FALSE(cuda::get_device_name(0).empty());
  const int d = cuda::current_device();
  EXPECT_GE(d, 0);
  EXPECT_LT(d, cuda::device_count());
  EXPECT_NO_THROW(cuda::set_device(d));
  EXPECT_EQ(cuda::current_device(), d);
  EXPECT_NO_THROW(cuda::synchronize());
}

TEST(CudaRuntime, SetDeviceOutOfRangeThrows) {
  EMBER_SKIP_IF_NO_CUDA();
  const std::string n = std::to_string(cuda::device_count());
  EXPECT_THROW_MSG(cuda::set_device(cuda::device_count()), DeviceError, "cuda::set_device", "out of range", n.c_str());
  EXPECT_THROW_MSG(cuda::set_device(-1), DeviceError, "out of range");
  EXPECT_THROW_MSG(cuda::get_device_name(cuda::device_count()), DeviceError, "out of range");
}

TEST(CudaRuntime, TensorOnMissingDeviceThrowsNamingIt) {
  EMBER_SKIP_IF_NO_CUDA();
  if (cuda::device_count() > 1) GTEST_SKIP() << "this machine has a cuda:1";
  EXPECT_THROW_MSG(zeros({2, 3}, {.device = Device::cuda(1)}), DeviceError, "cuda:1", "device index 1", "out of range");
  EXPECT_THROW_MSG(ones({2}).to(Device::cuda(1)), DeviceError, "cuda:1", "out of range");
}

TEST(CudaRuntime, ComputeOpsRunOnTheDevice) {
  EMBER_SKIP_IF_NO_CUDA();
  Tensor a = ones({4}, {.device = Device::cuda()});
  Tensor b = a + a;
  EXPECT_TRUE(b.is_cuda());
  EXPECT_EQ(test::values(b), std::vector<double>(4, 2.0));
}

}  // namespace
}  // namespace ember
