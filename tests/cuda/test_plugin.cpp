// tests: the CUDA backend as a plugin (ember/internal/cuda_hooks.h, core/src/cuda_plugin.cpp): where it is found,
// and what a program sees when it is switched off, missing, or not an Ember plugin — CUDA unavailable with the
// reason, the CPU untouched. The environment cases run this binary again in a child process (the plugin is
// looked for once per process). Runs on every machine; the GPU itself is not needed.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "ember/internal/cuda_hooks.h"
#include "test_util.h"

namespace ember {
namespace {

// Trains a few steps on the CPU (works whatever CUDA's state).
void expect_cpu_training_works() {
  manual_seed(3);
  Tensor x = randn({64, 4}), y = argmax(x.slice(1, 0, 2), 1);
  nn::Chain model{nn::Dense(4, 8, nn::relu), nn::Dense(8, 2)};
  optim::SGD opt(model.parameters(), {.lr = 0.1});
  double first = 0, last = 0;
  for (int i = 0; i < 30; ++i) {
    Tensor loss = nn::cross_entropy(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    (i == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first);
}

TEST(CudaPlugin, FoundBesideLibemberInACudaBuild) {
  if (std::getenv("EMBER_CUDA_PLUGIN")) GTEST_SKIP() << "EMBER_CUDA_PLUGIN is set";
  std::string why;
  detail::CudaHooks* h = detail::cuda_hooks(&why);
#if EMBER_WITH_CUDA
  ASSERT_NE(h, nullptr) << why;
  const std::string path = detail::cuda_plugin_path();
  EXPECT_NE(path.find("libember_cuda.so"), std::string::npos) << path;
  // loaded: any reason left is about devices, not about the plugin
  EXPECT_EQ(cuda::unavailable_reason().find("could not be loaded"), std::string::npos) << cuda::unavailable_reason();
  EXPECT_EQ(cuda::is_available(), h->device_count() > 0);
#else
  EXPECT_EQ(h, nullptr);
  EXPECT_NE(why.find("built without CUDA"), std::string::npos) << why;
  EXPECT_FALSE(cuda::is_available());
#endif
  expect_cpu_training_works();
}

// Runs this test binary again with `env` and the child test below; true when it passed.
bool child_passes(const std::string& env, const std::string& expect) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");  // (inside the shell it is the shell)
  const std::string cmd = env + " EMBER_TEST_EXPECT_REASON='" + expect + "' '" + self +
                          "' --gtest_also_run_disabled_tests --gtest_filter=CudaPluginChild.* > /dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The child: CUDA is unavailable with a reason that names the problem, every CUDA call says so, the CPU trains.
// (Disabled: only the CudaPlugin tests above run it, in a child process with the environment set.)
TEST(CudaPluginChild, DISABLED_UnavailableWithTheReason) {
  const char* expect = std::getenv("EMBER_TEST_EXPECT_REASON");
  ASSERT_NE(expect, nullptr) << "run by CudaPlugin.* in a child process";
  EXPECT_FALSE(cuda::is_available());
  EXPECT_EQ(cuda::device_count(), 0);
  const std::string why = cuda::unavailable_reason();
  EXPECT_NE(why.find(expect), std::string::npos) << why;
  EXPECT_THROW_MSG(ones({2}).to(Device::cuda()), DeviceError, "cuda:0", expect);
  EXPECT_EQ(cuda::memory_allocated(0), 0u);  // device-agnostic statistics: 0 without a device
  EXPECT_THROW_MSG(cuda::mem_get_info(0), DeviceError, "cuda::mem_get_info", expect);
  EXPECT_THROW_MSG(cuda::Stream::create(), DeviceError, expect);
  EXPECT_THROW_MSG(ones({2}).pin_memory(), DeviceError, "pin_memory", expect);
  expect_cpu_training_works();
}

TEST(CudaPlugin, SwitchedOffByTheEnvironment) {
#if EMBER_WITH_CUDA
  EXPECT_TRUE(child_passes("EMBER_CUDA_PLUGIN=off", "switched off"));
#else
  EXPECT_TRUE(child_passes("EMBER_CUDA_PLUGIN=off", "built without CUDA"));
#endif
}

TEST(CudaPlugin, MissingPluginIsNamed) {
#if EMBER_WITH_CUDA
  EXPECT_TRUE(child_passes("EMBER_CUDA_PLUGIN=/nonexistent/libember_cuda.so",
                           "/nonexistent/libember_cuda.so: /nonexistent/libember_cuda.so: cannot open"));
#else
  EXPECT_TRUE(child_passes("EMBER_CUDA_PLUGIN=/nonexistent/libember_cuda.so", "built without CUDA"));
#endif
}

TEST(CudaPlugin, ALibraryThatIsNoPluginIsRefused) {
#if EMBER_WITH_CUDA
  EXPECT_TRUE(child_passes("EMBER_CUDA_PLUGIN=libz.so.1", "not an ember plugin"));
#else
  GTEST_SKIP() << "a build without CUDA never looks for the plugin";
#endif
}

}  // namespace
}  // namespace ember
