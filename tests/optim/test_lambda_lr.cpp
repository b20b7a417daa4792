// LambdaLR: warmup then cosine decay stepped per batch, against PyTorch 1.13's LambdaLR on the same function;
// resuming from state_dict; gradient accumulation over micro-batches giving the full batch's step; bad input.
#include <cmath>
#include <numbers>

#include "optim_test_util.h"

namespace ember::test {
namespace {

double warmup_cosine(int64_t s) {
  const int64_t warm = 3, total = 10;
  if (s < warm) return static_cast<double>(s + 1) / warm;
  return 0.5 * (1 + std::cos(std::numbers::pi * static_cast<double>(s - warm) / static_cast<double>(total - warm)));
}

// /usr/bin/python3 (PyTorch 1.13):
//   opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=3e-4)
//   f = lambda s: (s+1)/3 if s < 3 else 0.5*(1+math.cos(math.pi*(s-3)/7))
//   sch = torch.optim.lr_scheduler.LambdaLR(opt, f); lrs = [lr]; 10 x (opt.step(); sch.step(); lrs.append(lr))
const std::vector<double> kTorch = {9.999999999999999e-05,
                                    0.00019999999999999998,
                                    0.0003,
                                    0.0003,
                                    0.0002851453301853628,
                                    0.00024352347027881003,
                                    0.00018337814009344714,
                                    0.00011662185990655284,
                                    5.6476529721189974e-05,
                                    1.4854669814637143e-05,
                                    0.0};

TEST(LambdaLR, WarmupCosineMatchesPyTorch) {
  Tensor p = make_param({1.0}, {1});
  optim::AdamW opt({p}, {.lr = 3e-4});
  optim::LambdaLR sched(opt, warmup_cosine);
  std::vector<double> lrs = {opt.lr()};
  for (int i = 0; i < 10; ++i) {
    sched.step();
    lrs.push_back(opt.lr());
  }
  ASSERT_EQ(lrs.size(), kTorch.size());
  for (size_t i = 0; i < lrs.size(); ++i) EXPECT_DOUBLE_EQ(lrs[i], kTorch[i]) << "step " << i;
  EXPECT_EQ(sched.base_lr(), 3e-4);
}

TEST(LambdaLR, ResumesFromStateDict) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD a({p}, {.lr = 0.1});
  optim::LambdaLR sa(a, warmup_cosine);
  for (int i = 0; i < 5; ++i) sa.step();
  const optim::StateDict opt_sd = a.state_dict(), sched_sd = sa.state_dict();
  Tensor q = make_param({1.0}, {1});
  optim::SGD b({q}, {.lr = 0.1});
  optim::LambdaLR sb(b, warmup_cosine);
  b.load_state_dict(opt_sd);
  sb.load_state_dict(sched_sd);
  for (int i = 0; i < 4; ++i) {
    sa.step();
    sb.step();
    EXPECT_EQ(b.lr(), a.lr()) << "step " << i;
  }
}

TEST(LambdaLR, BadInput) {
  Tensor p = make_param({1.0}, {1});
  optim::SGD opt({p}, {.lr = 0.1});
  EXPECT_THROW_MSG(optim::LambdaLR(opt, nullptr), ValueError, "LambdaLR", "empty");
  optim::LambdaLR sched(opt, [](int64_t s) { return s < 2 ? 1.0 : -1.0; });
  sched.step();
  EXPECT_THROW_MSG(sched.step(), ValueError, "LambdaLR", "lr_lambda(2)", "-1");
  EXPECT_EQ(opt.lr(), 0.1);  // unchanged by the failed step
}

// Gradient accumulation: four micro-batches of 8, each loss scaled by 1/4, summed into .grad, then one step —
// the same update as one step on the batch of 32 (the mean loss), up to float rounding.
TEST(GradientAccumulation, MicroBatchesGiveTheFullBatchStep) {
  manual_seed(3);
  Tensor x = randn({32, 5}), y = randn({32, 1});
  nn::Dense a(5, 1), b(5, 1);
  {
    NoGradGuard g;
    b.weight().copy_(a.weight());
    b.bias().copy_(a.bias());
  }
  optim::SGD oa(a.parameters(), {.lr = 0.1}), ob(b.parameters(), {.lr = 0.1});
  oa.zero_grad();
  nn::mse_loss(a(x), y).backward();
  oa.step();
  ob.zero_grad();
  for (int k = 0; k < 4; ++k) {
    Tensor xs = x.slice(0, 8 * k, 8 * (k + 1)), ys = y.slice(0, 8 * k, 8 * (k + 1));
    (nn::mse_loss(b(xs), ys) / 4.0).backward();  // grads add up across backward() calls until zero_grad()
  }
  ob.step();
  EXPECT_TENSOR_NEAR(b.weight(), a.weight().shape(), values(a.weight()), 1e-6, 1e-5);
  EXPECT_TENSOR_NEAR(b.bias(), a.bias().shape(), values(a.bias()), 1e-6, 1e-5);
}

}  // namespace
}  // namespace ember::test
