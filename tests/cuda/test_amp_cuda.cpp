// tests: mixed precision on the GPU against the CPU: GradScaler's multi-tensor unscale (many tensors, a tensor
// larger than one launch, every float dtype, an inf in a late launch), autocast's dtypes and values on device
// tensors, and bfloat16 training on the device. Also run with the CPU standing in for the GPU (the *OnCpu
// suite), so the test code is exercised on every machine.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gpu_or_cpu.h"

namespace ember {
namespace {

class CudaAmp : public CudaSuite {};
#define AMP_TEST(Name) EMBER_GPU_AND_CPU_TEST(CudaAmp, CudaAmpOnCpu, Name)

// 60 gradients (more than one launch's 48 tensors) of every float dtype, one of 256 * 65536 + 5 elements (more
// than one launch's 256 blocks): each divided by the scale (powers of two: exact in every dtype), and the step
// skipped only when an inf is planted in the last gradient.
AMP_TEST(UnscaleManyTensors) {
  const std::vector<DType> dts = {kFloat32, kFloat16, kBFloat16, kFloat64};
  for (bool plant : {false, true}) {
    std::vector<Tensor> params;
    std::vector<std::vector<double>> want;
    for (int i = 0; i < 60; ++i) {
      const DType dt = dts[static_cast<size_t>(i % 4)];
      const int64_t n = i == 7 ? 256 * 65536 + 5 : 1 + 37 * i;
      Tensor p = zeros({n}, {.dtype = dt, .device = g_dev}).requires_grad_(true);
      Generator gen(static_cast<uint64_t>(i));
      Tensor g = i == 7 ? full({n}, 24.0, {.dtype = dt}) : (randn({n}, {.generator = &gen}) * 8).to(dt);
      if (plant && i == 59) {
        std::vector<double> v = test::values(g);
        v.back() = std::numeric_limits<double>::infinity();
        g = tensor(v, {n}, {.dtype = dt});
      }
      if (i != 7) want.push_back(test::values(g / 8.0));
      p.set_grad(g.to(g_dev));
      params.push_back(p);
    }
    optim::SGD opt(params, {.lr = 0.0});
    amp::GradScaler s({.init_scale = 8.0});
    s.unscale_(opt);
    size_t w = 0;
    for (int i = 0; i < 60; ++i) {
      const Tensor& g = params[static_cast<size_t>(i)].grad();
      ASSERT_EQ(g.device(), g_dev);
      if (i == 7) {  // the large one: every element 24 / 8
        EXPECT_EQ(max(g).cpu().item<double>(), 3.0);
        EXPECT_EQ(min(g).cpu().item<double>(), 3.0);
        continue;
      }
      EXPECT_EQ(test::values(g), want[w++]) << "gradient " << i << " (" << g.dtype() << ")";
    }
    EXPECT_EQ(s.step(opt), !plant);
    s.update();
    EXPECT_EQ(s.get_scale(), plant ? 4.0 : 8.0);
  }
}

// Autocast on device tensors: the matmul in float16 (tensor cores on a GPU), the softmax in float32, the values
// within float16's rounding of the float32 ones on the CPU.
AMP_TEST(AutocastOnDevice) {
  Generator gen(3);
  const Tensor a = randn({64, 96}, {.generator = &gen}), b = randn({96, 32}, {.generator = &gen});
  const Tensor ref = softmax(matmul(a, b), 1);
  amp::AutocastGuard ac(g_dev, kFloat16);
  const Tensor ad = a.to(g_dev), bd = b.to(g_dev);
  const Tensor prod = matmul(ad, bd);
  EXPECT_EQ(prod.dtype(), kFloat16);
  const Tensor y = softmax(prod, 1);
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_TENSOR_NEAR(y, ref.shape(), test::values(ref), 2e-3, 2e-2);
}

// A bfloat16 model trained with AdamW on the device, as on the CPU, ends within bfloat16's noise of it.
AMP_TEST(Bf16ModelTrainsLikeTheCpu) {
  auto train = [](Device dev) {
    manual_seed(11);
    nn::Chain model{nn::Dense(4, 16, nn::tanh), nn::Dense(16, 1)};
    model.to(kBFloat16);
    model.to(dev);
    optim::AdamW opt(model.parameters(), {.lr = 0.02});
    Generator gen(5);
    const Tensor x = randn({32, 4}, {.generator = &gen}).to(kBFloat16).to(dev);
    const Tensor y = sum(x.to(kFloat32), {1}, true).to(kBFloat16);
    double loss = 0;
    for (int k = 0; k < 50; ++k) {
      opt.zero_grad();
      Tensor l = nn::mse_loss(model(x), y.to(dev));
      l.backward();
      opt.step();
      loss = l.cpu().item<double>();
    }
    return loss;
  };
  const double cpu = train(Device::cpu()), dev = train(g_dev);
  EXPECT_LT(cpu, 0.5);
  EXPECT_NEAR(dev, cpu, 0.1 * cpu + 1e-2);
}

}  // namespace
}  // namespace ember
