// tests: training on CUDA — an MLP (SGD with Nesterov momentum and weight decay, Adam, AdamW) and a CNN
// (conv, max and average pooling; Adam) moved with Module::to: the loss goes down, and the per-step losses
// and early parameters match the same run on the CPU; optimiser state lives on the parameters' device,
// follows a model moved after some steps, and load_state_dict moves it there. Each test also runs with the CPU standing
// in for the GPU (the *OnCpu suite), so the test code and its thresholds are exercised on every machine. Also: the TF32
// switch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "gpu_or_cpu.h"

namespace ember {
namespace {

using MakeModel = std::function<nn::Chain()>;
using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

nn::Chain mlp() { return nn::Chain{nn::Dense(20, 32, nn::relu), nn::Dense(32, 5)}; }
// [N, 1, 12, 12] -> conv(pad 1) 4x12x12 -> maxpool 4x6x6 -> conv 8x4x4 -> avgpool 8x2x2 -> 32 -> 5
nn::Chain cnn() {
  return nn::Chain{nn::Conv2d(1, 4, 3, {.padding = 1}),
                   nn::relu,
                   nn::MaxPool2d(2),
                   nn::Conv2d(4, 8, 3),
                   nn::relu,
                   nn::AvgPool2d(2),
                   nn::Flatten(),
                   nn::Dense(32, 5)};
}

// A learnable problem: the class is the argmax of the first 5 features (or of 5 image regions).
struct Data {
  Tensor x, y;
};
Data mlp_data() {
  manual_seed(3);
  Tensor x = randn({64, 20});
  return {x, argmax(x.slice(1, 0, 5), 1)};
}
Data cnn_data() {
  manual_seed(4);
  Tensor x = randn({32, 1, 12, 12});
  return {x, argmax(sum(x.reshape({32, 12, 12}).slice(1, 0, 10).reshape({32, 5, 24}), {2}), 1)};
}

struct RunResult {
  std::vector<double> losses;
  std::vector<Tensor> params;  // on the CPU, after kParamSteps steps
};
// Parameters are compared after a few steps only: Adam moves a weight by ~lr whatever the size of its
// gradient, so a gradient that is ~0 up to rounding can step either way on either device, and such
// differences then grow; the losses are compared over the whole run with looser tolerances.
constexpr int kParamSteps = 3;
RunResult train(const MakeModel& make, const MakeOpt& make_opt, const Data& d, Device dev, int steps) {
  manual_seed(11);
  nn::Chain model = make();
  model.to(dev);
  std::unique_ptr<optim::Optimizer> opt = make_opt(model.parameters());
  const Tensor x = d.x.to(dev), y = d.y.to(dev);
  RunResult r;
  for (int s = 0; s < steps; ++s) {
    opt->zero_grad();
    Tensor loss = nn::cross_entropy(model(x), y);
    loss.backward();
    opt->step();
    r.losses.push_back(test::values(loss)[0]);
    if (s + 1 == kParamSteps)
      for (const Tensor& p : model.parameters()) {
        EXPECT_EQ(p.device(), dev);
        r.params.push_back(p.cpu().clone());  // a copy: on the CPU, cpu() is the live parameter itself
      }
  }
  return r;
}

void check_training(const std::string& what, const MakeModel& make, const MakeOpt& make_opt, const Data& d) {
  constexpr int kSteps = 40;
  const RunResult cpu = train(make, make_opt, d, Device::cpu(), kSteps);
  const RunResult dev = train(make, make_opt, d, g_dev, kSteps);
  EXPECT_LT(dev.losses.back(), 0.7 * dev.losses.front()) << what << ": the loss does not go down";
  // Step 0 is the initial model (only the forward differs: float32 sums in another order); later steps
  // drift slowly apart.
  EXPECT_NEAR(dev.losses[0], cpu.losses[0], 1e-5 * cpu.losses[0]) << what << " step 0";
  for (size_t s = 1; s < 5; ++s)
    EXPECT_NEAR(dev.losses[s], cpu.losses[s], 2e-3 * cpu.losses[s]) << what << " step " << s;
  EXPECT_NEAR(dev.losses.back(), cpu.losses.back(), 5e-2 * cpu.losses.back()) << what << " last step";
  for (size_t i = 0; i < cpu.params.size(); ++i)
    EXPECT_TENSOR_NEAR(dev.params[i], cpu.params[i].shape(), test::values(cpu.params[i]), 1e-3, 1e-2)
        << what << " parameter " << i;
}

MakeOpt sgd() {
  return [](std::vector<Tensor> p) {
    return std::make_unique<optim::SGD>(
        std::move(p), optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-4});
  };
}
MakeOpt adam() {
  return [](std::vector<Tensor> p) {
    return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions{.lr = 1e-2, .weight_decay = 1e-4});
  };
}
MakeOpt adamw() {
  return [](std::vector<Tensor> p) {
    return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions{.lr = 1e-2});
  };
}

class CudaTraining : public CudaSuite {};

#define TRAINING_TEST(Name) EMBER_GPU_AND_CPU_TEST(CudaTraining, CudaTrainingOnCpu, Name)

TRAINING_TEST(MlpWithSgdAdamAndAdamW) {
  const Data d = mlp_data();
  check_training("mlp sgd", mlp, sgd(), d);
  check_training("mlp adam", mlp, adam(), d);
  check_training("mlp adamw", mlp, adamw(), d);
}

TRAINING_TEST(CnnWithAdam) { check_training("cnn adam", cnn, adam(), cnn_data()); }

TRAINING_TEST(OptimiserStateLivesWithTheParameters) {
  const Data d = mlp_data();
  manual_seed(11);
  nn::Chain model = mlp();
  model.to(g_dev);
  optim::Adam opt(model.parameters(), {.lr = 1e-2});
  nn::cross_entropy(model(d.x.to(g_dev)), d.y.to(g_dev)).backward();
  opt.step();
  optim::StateDict sd = opt.state_dict();
  {
    int seen = 0;
    for (const auto& [name, t] : sd)
      if (name.find("exp_avg") != std::string::npos) {
        ++seen;
        EXPECT_EQ(t.device(), g_dev) << name;
      }
    EXPECT_GT(seen, 0) << "no exp_avg state";
  }
  // loaded into an optimiser of CPU parameters, the state lands on the CPU (and back on the device again)
  nn::Chain cpu_model = mlp();
  optim::Adam cpu_opt(cpu_model.parameters(), {.lr = 1e-2});
  cpu_opt.load_state_dict(sd);
  {
    int seen = 0;
    for (const auto& [name, t] : cpu_opt.state_dict())
      if (name.find("exp_avg") != std::string::npos) {
        ++seen;
        EXPECT_TRUE(t.is_cpu()) << name;
      }
    EXPECT_GT(seen, 0) << "no exp_avg state";
  }
  optim::Adam dev_opt(model.parameters(), {.lr = 1e-2});
  dev_opt.load_state_dict(cpu_opt.state_dict());
  {
    int seen = 0;
    for (const auto& [name, t] : dev_opt.state_dict())
      if (name.find("exp_avg") != std::string::npos) {
        ++seen;
        EXPECT_EQ(t.device(), g_dev) << name;
      }
    EXPECT_GT(seen, 0) << "no exp_avg state";
  }
}

TRAINING_TEST(OptimiserStateFollowsAModelMovedAfterSomeSteps) {
  const Data d = mlp_data();
  auto step = [&](nn::Chain& model, optim::Optimizer& opt, Device dev) {
    opt.zero_grad();
    nn::cross_entropy(model(d.x.to(dev)), d.y.to(dev)).backward();
    opt.step();
  };
  manual_seed(11);
  nn::Chain moved = mlp();
  // SGD with momentum: its buffer is state, and (unlike Adam) its update is not sensitive to the sign of
  // gradients that are ~0 up to rounding, so the two devices' results stay close
  optim::SGD opt(moved.parameters(), {.lr = 0.1, .momentum = 0.9});
  step(moved, opt, Device::cpu());  // state created on the CPU
  moved.to(g_dev);
  step(moved, opt, g_dev);  // ... and moved to the device with the parameters
  {
    int seen = 0;
    for (const auto& [name, t] : opt.state_dict())
      if (name.find("momentum_buffer") != std::string::npos) {
        ++seen;
        EXPECT_EQ(t.device(), g_dev) << name;
      }
    EXPECT_GT(seen, 0) << "no momentum_buffer state";
  }
  // the same two steps on the CPU alone
  manual_seed(11);
  nn::Chain ref = mlp();
  optim::SGD ref_opt(ref.parameters(), {.lr = 0.1, .momentum = 0.9});
  step(ref, ref_opt, Device::cpu());
  step(ref, ref_opt, Device::cpu());
  const std::vector<Tensor> got = moved.parameters(), want = ref.parameters();
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TENSOR_NEAR(got[i], want[i].shape(), test::values(want[i]), 1e-5, 1e-4) << "parameter " << i;
}

TEST(CudaSettings, Tf32IsOffByDefaultAndSwitchable) {
  EXPECT_FALSE(cuda::allow_tf32());
  cuda::set_allow_tf32(true);
  EXPECT_TRUE(cuda::allow_tf32());
  cuda::set_allow_tf32(false);
  EXPECT_FALSE(cuda::allow_tf32());
}

}  // namespace
}  // namespace ember
