// memory::fit and memory::apply (issue 58, item 4): for an 8-block transformer and the library's ViT, the fitted
// step's measured peak is within the budget and recomputes no more than checkpointing every block; a budget nothing
// meets says the smallest peak reachable; the largest batch that fits with the choice; Module::set_checkpointing
// gives the same gradients as without it.
#include "test_util.h"

using namespace ember;

namespace {

// The peak bytes in use a real run adds to what was in use before it.
size_t measured_peak(const std::function<void()>& fn) {
  const size_t before = cpu_memory_stats().bytes_in_use;
  cpu_reset_peak_memory_stats();
  fn();
  return cpu_memory_stats().peak_bytes_in_use - before;
}

nn::Chain eight_blocks() {
  nn::Chain c;
  for (int i = 0; i < 8; ++i) c.push_back(nn::TransformerBlock(64, 4));
  return c;
}

// One Adam step of `model` on a [batch, 32, 64] sequence (the optimiser's state made inside, as a real first step).
void transformer_step(nn::Module& model, int64_t batch) {
  optim::Adam opt(model.parameters(), {.lr = 1e-3});
  const Tensor x = randn({batch, 32, 64});
  model(x).square().mean().backward();
  opt.step();
  opt.zero_grad();
}

void vit_step(nn::Module& model, int64_t batch) {
  optim::Adam opt(model.parameters(), {.lr = 1e-3});
  const Tensor x = randn({batch, 3, 32, 32}), y = randint(0, 10, {batch}, {.dtype = kInt64});
  Tensor loss;
  {
    amp::AutocastGuard ac(kBFloat16);
    loss = nn::cross_entropy(model(x), y);
  }
  loss.backward();
  opt.step();
  opt.zero_grad();
}

size_t planned(nn::Module& model, const std::function<void(nn::Module&, int64_t)>& step, int64_t batch) {
  return memory::plan(Device::cpu(), [&] { step(model, batch); }).peak_bytes;
}

// Fits `model` between no checkpoint and all of them, then checks the plan against a real run and the bounds.
void check_fit(nn::Module& model, const std::vector<nn::Module*>& blocks,
               const std::function<void(nn::Module&, int64_t)>& step, int64_t batch) {
  for (nn::Module* b : blocks) b->set_checkpointing(false);
  const size_t none = planned(model, step, batch);
  for (nn::Module* b : blocks) b->set_checkpointing(true);
  const size_t all = planned(model, step, batch);
  for (nn::Module* b : blocks) b->set_checkpointing(false);
  ASSERT_LT(all, none);
  const size_t budget = all + (none - all) / 3;  // needs some checkpoints, not all of them
  const memory::FitPlan p =
      memory::fit([&](int64_t b) { step(model, b); }, budget, {.model = &model, .batch = batch});
  std::printf("  peak none %zu, all %zu, budget %zu: %zu checkpointed, planned %zu, recompute %.3g FLOPs\n", none, all,
              budget, p.checkpointed.size(), p.predicted_peak_bytes, p.recompute_flops);
  ASSERT_FALSE(p.checkpointed.empty());
  EXPECT_LT(p.checkpointed.size(), blocks.size());
  EXPECT_LE(p.predicted_peak_bytes, budget);
  for (nn::Module* b : blocks) EXPECT_FALSE(b->checkpointing()) << "fit leaves the model as it was";
  // its recomputation is at most that of checkpointing every block
  for (nn::Module* b : blocks) b->set_checkpointing(true);
  const double every = memory::plan(Device::cpu(), [&] { step(model, batch); }).recompute_flops;
  for (nn::Module* b : blocks) b->set_checkpointing(false);
  EXPECT_GT(p.recompute_flops, 0);
  EXPECT_LT(p.recompute_flops, every);
  memory::apply(model, p);
  size_t on = 0;
  for (nn::Module* b : blocks) on += b->checkpointing() ? 1 : 0;
  EXPECT_EQ(on, p.checkpointed.size());
  const size_t real = measured_peak([&] { step(model, batch); });
  EXPECT_EQ(real, p.predicted_peak_bytes);
  EXPECT_LE(real, budget);
  for (nn::Module* b : blocks) b->set_checkpointing(false);
}

}  // namespace

TEST(MemoryFit, AnEightBlockTransformerFitsItsBudget) {
  manual_seed(5);
  nn::Chain model = eight_blocks();
  std::vector<nn::Module*> blocks;
  for (const auto& c : model.children()) blocks.push_back(c.get());
  check_fit(model, blocks, transformer_step, 16);
}

TEST(MemoryFit, TheLibrarysVitFitsItsBudget) {
  manual_seed(6);
  models::ViT vit(models::ViTConfig{.image_size = 32, .patch_size = 8, .dim = 64, .depth = 6, .heads = 4,
                                    .num_classes = 10});
  std::vector<nn::Module*> blocks;
  for (const auto& [path, m] : vit.named_modules())
    if (path.starts_with("blocks.") && path.find('.', 7) == std::string::npos) blocks.push_back(m);
  ASSERT_EQ(blocks.size(), 6u);
  check_fit(vit, blocks, vit_step, 16);
}

// A budget that fits without checkpoints needs none; one that nothing meets is an error giving the smallest peak.
TEST(MemoryFit, NothingNeededAndNothingEnough) {
  manual_seed(7);
  nn::Chain model = eight_blocks();
  auto step = [&](int64_t b) { transformer_step(model, b); };
  const memory::FitPlan roomy = memory::fit(step, size_t{1} << 34, {.model = &model, .batch = 4});
  EXPECT_TRUE(roomy.checkpointed.empty());
  EXPECT_EQ(roomy.recompute_flops, 0);
  EXPECT_THROW_MSG((void)memory::fit(step, 1 << 20, {.model = &model, .batch = 4}), ValueError,
                   "no choice of the 8 candidate modules fits 1.00 MiB", "the smallest peak reachable");
  EXPECT_THROW_MSG((void)memory::fit(step, 1 << 20, {}), ValueError, "FitOptions::model is required");
  nn::Dense stranger(4, 4);
  EXPECT_THROW_MSG((void)memory::fit(step, 1 << 20, {.candidates = {&stranger}, .model = &model}), ValueError,
                   "not a submodule");
  EXPECT_THROW_MSG(memory::apply(model, {.checkpointed = {"9"}}), ValueError, "no module '9'");
}

// With max_batch, the largest batch that fits with the choice: it plans within the budget and one more does not.
TEST(MemoryFit, TheLargestBatchThatFitsWithTheChoice) {
  manual_seed(8);
  nn::Chain model = eight_blocks();
  auto step = [&](int64_t b) { transformer_step(model, b); };
  const size_t at16 = planned(model, transformer_step, 16);
  const memory::FitPlan p = memory::fit(step, at16, {.model = &model, .batch = 8, .max_batch = 256});
  EXPECT_GE(p.batch, 16);  // checkpoints can only make room
  EXPECT_LT(p.batch, 256);
  EXPECT_LE(p.predicted_peak_bytes, at16);
  memory::apply(model, p);
  EXPECT_GT(planned(model, transformer_step, p.batch + 1), at16);
}

// A checkpointed module gives the gradients it gives without checkpointing (float64, bit for bit here: the same
// ops run again), and keeps less for backward.
TEST(MemoryFit, SetCheckpointingKeepsTheGradients) {
  manual_seed(9);
  nn::TransformerBlock block(16, 2);
  block.to(kFloat64);
  const Tensor x = randn({2, 5, 16}, {.dtype = kFloat64});
  auto grads = [&] {
    for (Tensor p : block.parameters()) p.set_grad(Tensor());
    block(x).square().sum().backward();
    std::vector<std::vector<double>> g;
    for (const Tensor& p : block.parameters()) g.push_back(test::values(p.grad()));
    return g;
  };
  const auto plain = grads();
  block.set_checkpointing(true);
  EXPECT_TRUE(block.checkpointing());
  EXPECT_EQ(grads(), plain);
  {  // under no_grad the module runs plainly
    NoGradGuard g;
    EXPECT_FALSE(block(x).requires_grad());
  }
}

// A plan counts each module's forward FLOPs (2 per multiply-add of matmul, conv2d and attention) and what the
// checkpoints run again in backward.
TEST(MemoryFit, PlansCountForwardAndRecomputedFlops) {
  nn::Chain model{nn::Dense(100, 200, nn::relu), nn::Dense(200, 10)};
  auto step = [&] { model(randn({32, 100})).sum().backward(); };
  const memory::Plan plain = memory::plan(Device::cpu(), step);
  EXPECT_EQ(plain.forward_flops_by_module.at("0"), 2.0 * 32 * 100 * 200);
  EXPECT_EQ(plain.forward_flops_by_module.at("1"), 2.0 * 32 * 200 * 10);
  EXPECT_EQ(plain.recompute_flops, 0);
  // (the first layer's input needs no gradient: autograd::checkpoint runs it plainly, so it is the second one here)
  model[1].set_checkpointing(true);
  const memory::Plan ckpt = memory::plan(Device::cpu(), step);
  EXPECT_EQ(ckpt.forward_flops_by_module.at("1"), 2.0 * 32 * 200 * 10);
  EXPECT_EQ(ckpt.recompute_flops, 2.0 * 32 * 200 * 10);
}
