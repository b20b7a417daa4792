// Post-accumulate-grad hooks and end-of-backward callbacks (ember/autograd/hooks.h): what DistributedDataParallel
// builds on.
#include <gtest/gtest.h>

#include "ember/ember.h"

using namespace ember;

TEST(Hooks, PostAccumulateHookSeesTheAccumulatedGradOncePerPass) {
  Tensor w = ones({3}).requires_grad_();
  std::vector<std::vector<double>> seen;
  auto h = autograd::register_post_accumulate_grad_hook(w, [&](const Tensor& p) {
    EXPECT_TRUE(p.is_same(w) || p.impl() == w.impl());
    seen.push_back(p.grad().to_vector<double>());
  });
  // w is used twice in one graph: one accumulation, one call, with the summed gradient.
  sum(w * 2.0 + w * 3.0).backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<double>{5, 5, 5}));
  sum(w).backward();  // accumulates into .grad: the hook sees the total
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<double>{6, 6, 6}));
  h.remove();
  sum(w).backward();
  EXPECT_EQ(seen.size(), 2u);
  h.remove();  // idempotent
}

TEST(Hooks, QueuedCallbacksRunAfterTheLastNodeInOrder) {
  Tensor a = ones({2}).requires_grad_(), b = ones({2}).requires_grad_();
  std::vector<std::string> log;
  bool queued = false;
  autograd::register_post_accumulate_grad_hook(a, [&](const Tensor&) {
    log.push_back("a");
    if (!queued) {
      autograd::queue_callback([&] {
        log.push_back("end1");
        EXPECT_TRUE(b.grad().defined());  // every gradient is in by now
      });
      autograd::queue_callback([&] { log.push_back("end2"); });
      queued = true;
    }
  });
  autograd::register_post_accumulate_grad_hook(b, [&](const Tensor&) { log.push_back("b"); });
  EXPECT_FALSE(autograd::in_backward());
  sum(a * b).backward();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[2], "end1");
  EXPECT_EQ(log[3], "end2");
  // the queue is per pass: a second pass runs no stale callback
  log.clear();
  queued = true;
  sum(a * b).backward();
  EXPECT_EQ(log.size(), 2u);
}

TEST(Hooks, BadUsesThrowClearErrors) {
  Tensor x = ones({2});
  EXPECT_THROW(autograd::register_post_accumulate_grad_hook(x, [](const Tensor&) {}), ValueError);
  Tensor w = ones({2}).requires_grad_();
  Tensor y = w * 2.0;
  try {
    autograd::register_post_accumulate_grad_hook(y, [](const Tensor&) {});
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("not a leaf"), std::string::npos) << e.what();
  }
  EXPECT_THROW(autograd::queue_callback([] {}), Error);  // no backward running
}

TEST(Hooks, AnExceptionFromACallbackLeavesBackward) {
  Tensor w = ones({2}).requires_grad_();
  auto h = autograd::register_post_accumulate_grad_hook(
      w, [](const Tensor&) { autograd::queue_callback([] { throw ValueError("from the callback"); }); });
  EXPECT_THROW(sum(w).backward(), ValueError);
  EXPECT_FALSE(autograd::in_backward());
  h.remove();
  sum(w).backward();  // the engine is usable again
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{2, 2}));
}
