// defines: what the CUDA comparison suites share: the device under test (g_dev: cuda:0, or the CPU standing
// in for it), CudaSuite (skips without a GPU, TF32 off), and EMBER_GPU_AND_CPU_TEST, which runs one test
// body twice — as Fixture.Name on the GPU and as CpuSuite.Name with the CPU in the GPU's place — so that the
// test code itself (inputs, references, op calls) runs on every machine, GPU or not.
#pragma once
#include "test_util.h"

namespace ember {

inline Device g_dev = Device::cuda();
struct DeviceScope {
  Device prev = g_dev;
  explicit DeviceScope(Device d) { g_dev = d; }
  ~DeviceScope() { g_dev = prev; }
};

class CudaSuite : public ::testing::Test {
 protected:
  void SetUp() override {
    EMBER_SKIP_IF_NO_CUDA();
    cuda::set_allow_tf32(false);
  }
};

}  // namespace ember

#define EMBER_GPU_AND_CPU_TEST(Fixture, CpuSuite, Name) \
  void Name##_body(); \
  TEST_F(Fixture, Name) { Name##_body(); } \
  TEST(CpuSuite, Name) { \
    ::ember::DeviceScope cpu(::ember::Device::cpu()); \
    Name##_body(); \
  } \
  void Name##_body()
