// Resuming from a checkpoint (model + Adam state + step, written by save_checkpoint) gives exactly the next
// loss an uninterrupted run gives.
#include <filesystem>

#include "test_util.h"

using namespace ember;

namespace {
nn::Chain make_model() { return nn::Chain{nn::Dense(8, 16, nn::relu), nn::Dense(16, 3)}; }
// A fixed stream of batches: batch k is the same in every run.
std::pair<Tensor, Tensor> batch(int k) {
  manual_seed(1000 + static_cast<uint64_t>(k));
  return {randn({32, 8}), randint(0, 3, {32})};
}
double train_step(nn::Chain& model, optim::Adam& opt, int k) {
  auto [x, y] = batch(k);
  Tensor loss = nn::cross_entropy(model(x), y);
  opt.zero_grad();
  loss.backward();
  opt.step();
  return loss.item();
}
}  // namespace

TEST(Resume, SameNextLossAsAnUninterruptedRun) {
  const std::string path = (std::filesystem::temp_directory_path() / "ember_resume_test.safetensors").string();
  manual_seed(7);
  nn::Chain a = make_model();
  optim::Adam opt_a(a.parameters(), {.lr = 1e-2});
  for (int k = 0; k < 5; ++k) train_step(a, opt_a, k);
  nn::save_checkpoint(path, a, opt_a, 5);
  std::vector<double> uninterrupted;
  for (int k = 5; k < 8; ++k) uninterrupted.push_back(train_step(a, opt_a, k));

  manual_seed(99);  // a different initialisation, overwritten by the checkpoint
  nn::Chain b = make_model();
  optim::Adam opt_b(b.parameters(), {.lr = 1e-2});
  const int64_t step = nn::load_checkpoint(path, b, opt_b);
  EXPECT_EQ(step, 5);
  for (int k = 5; k < 8; ++k)
    EXPECT_EQ(train_step(b, opt_b, k), uninterrupted[static_cast<size_t>(k - 5)]) << "step " << k;

  // Without the optimiser state (a fresh Adam on the loaded weights) the next loss is the same, but the
  // one after differs: the moments matter, so the test above really checks them.
  nn::Chain c = make_model();
  nn::load_checkpoint(path, c, opt_b);  // (only to load the weights into c)
  optim::Adam fresh(c.parameters(), {.lr = 1e-2});
  EXPECT_EQ(train_step(c, fresh, 5), uninterrupted[0]);
  EXPECT_NE(train_step(c, fresh, 6), uninterrupted[1]);
  std::filesystem::remove(path);
}
