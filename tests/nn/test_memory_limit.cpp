// Memory limits and OutOfMemoryErrors that explain themselves (issue 16, items 4 and 5): a limit on the CPU
// allocator, the phase (forward / backward / optimizer step), the module path and the backward op in the message,
// advice computed from the state, and an allocator that goes on working after an OOM.
#include "test_util.h"

using namespace ember;

namespace {

using LimitGuard = test::CpuLimitGuard;  // the limit is restored (to none) whatever a test does
using test::oom_message;

size_t in_use() { return cpu_memory_stats().bytes_in_use; }

}  // namespace

TEST(MemoryLimit, CapsTheCpuAllocatorAndLifts) {
  cpu_empty_cache();
  const uint64_t ooms = cpu_memory_stats().num_ooms;
  {
    LimitGuard limit(in_use() + (8 << 20));
    EXPECT_EQ(memory_limit(Device::cpu()), in_use() + (8 << 20));
    EXPECT_EQ(cpu_memory_stats().limit_bytes, memory_limit(Device::cpu()));
    const Tensor small = zeros({1 << 20});                                // 4 MiB: fits
    const std::string msg = oom_message([] { (void)zeros({4 << 20}); });  // 16 MiB more: does not
    EXPECT_NE(msg.find("CPU out of memory: tried to allocate 16.00 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("set_memory_limit"), std::string::npos) << msg;
    EXPECT_NE(msg.find("more than the limit"), std::string::npos) << msg;
    EXPECT_NE(msg.find("lower the batch size"), std::string::npos) << msg;
    EXPECT_EQ(cpu_memory_stats().num_ooms, ooms + 1);
    EXPECT_EQ(sum(small).item<float>(), 0.0f);  // what was allocated is untouched
    EXPECT_NE(cpu_memory_summary().find("out-of-memory errors: "), std::string::npos);
  }
  EXPECT_EQ(memory_limit(Device::cpu()), 0u);
  EXPECT_EQ(zeros({4 << 20}).numel(), 4 << 20);  // no limit: fine
}

TEST(MemoryLimit, CachedBlocksAreGivenBackBeforeRefusing) {
  cpu_empty_cache();
  { const Tensor t = zeros({2 << 20}); }  // 8 MiB, now cached
  ASSERT_GE(cpu_memory_stats().bytes_cached, size_t{8} << 20);
  LimitGuard limit(in_use() + (10 << 20));  // 8 cached + 4 new would pass the limit; 4 alone does not
  EXPECT_NO_THROW((void)zeros({1 << 20, 1}).add_(1.0));
  EXPECT_LT(cpu_memory_stats().bytes_cached, size_t{8} << 20);
}

TEST(MemoryLimit, MessageNamesPhaseModuleAndOp) {
  manual_seed(0);
  nn::Chain model{nn::Dense(16, 32, nn::relu), nn::Chain{nn::Dense(32, 65536)}};
  const Tensor x = randn({64, 16});
  cpu_empty_cache();
  // forward: the second layer's output (64 x 65536 floats, 16 MiB) does not fit
  {
    LimitGuard limit(in_use() + (4 << 20));
    const std::string msg = oom_message([&] { (void)model(x); });
    std::cout << msg << "\n";  // docs/memory.md quotes it
    EXPECT_NE(msg.find("during the forward of linear in module '1.0'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("checkpoint activations"), std::string::npos) << msg;
  }
  // backward: the forward fits, the gradients do not
  Tensor loss = sum(model(x));
  cpu_empty_cache();
  {
    LimitGuard limit(in_use() + (1 << 20));
    const std::string msg = oom_message([&] { loss.backward(); });
    EXPECT_NE(msg.find("during the backward of "), std::string::npos) << msg;
  }
  // optimizer step: Adam's first step makes its state, twice the 8 MiB of the parameters
  model.zero_grad();
  sum(model(x)).backward();
  optim::Adam opt(model.parameters(), {.lr = 1e-3});
  cpu_empty_cache();
  {
    LimitGuard limit(in_use() + (1 << 20));
    const std::string msg = oom_message([&] { opt.step(); });
    EXPECT_NE(msg.find("during the optimizer step"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Adam: twice the parameters"), std::string::npos) << msg;
  }
}

// After an OOM the run goes on at a smaller batch, under the same limit.
// An OOM in the backward of a checkpointed segment (its forward re-run) does not advise checkpointing, which is
// already on: it says the segment is re-running and advises smaller segments.
TEST(MemoryLimit, InsideACheckpointsBackwardTheAdviceIsSmallerSegments) {
  manual_seed(0);
  nn::Chain block{nn::Dense(16, 65536, nn::relu), nn::Dense(65536, 4)};
  const Tensor x = randn({64, 16});
  Tensor loss = sum(autograd::checkpoint([&](const std::vector<Tensor>& in) { return block(in[0]); },
                                         {x.detach().requires_grad_()}));
  cpu_empty_cache();
  LimitGuard limit(in_use() + (4 << 20));  // the re-run's 16 MiB activations do not fit
  const std::string msg = oom_message([&] { loss.backward(); });
  EXPECT_NE(msg.find("(re-running a checkpointed segment)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("already checkpointed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("checkpoint smaller segments"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("checkpoint activations (autograd::checkpoint)"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("autograd::checkpoint on the largest blocks"), std::string::npos) << msg;
}

TEST(MemoryLimit, TrainingGoesOnAtASmallerBatch) {
  manual_seed(1);
  nn::Chain model{nn::Dense(32, 1024, nn::relu), nn::Dense(1024, 10)};
  optim::SGD opt(model.parameters(), {.lr = 0.1});
  auto step = [&](int64_t batch) {
    const Tensor x = randn({batch, 32});
    const Tensor y = randint(0, 10, {batch});
    opt.zero_grad();
    Tensor loss = nn::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    return loss.item<float>();
  };
  step(8);  // gradients allocated once, as in any run
  cpu_empty_cache();
  LimitGuard limit(in_use() + (2 << 20));
  EXPECT_THROW(step(4096), OutOfMemoryError);  // 4096 x 1024 floats = 16 MiB of activations
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(std::isfinite(step(64)));
}

TEST(MemoryLimit, BadInput) {
  EXPECT_THROW_MSG(cuda::set_per_process_memory_fraction(1.5), ValueError, "set_per_process_memory_fraction", "1.5");
  if (!cuda::is_available()) {
    EXPECT_THROW_MSG(set_memory_limit(Device::cuda(), 1 << 20), DeviceError, "set_memory_limit");
    EXPECT_THROW(cuda::set_per_process_memory_fraction(0.5), DeviceError);
  }
}
