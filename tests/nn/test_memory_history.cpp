// What tensors hold, live, and the memory timeline (issue 16, items 5 and 6): bytes by category follow tags from
// Module, autograd and the Optimizer; an OutOfMemoryError names the top categories with advice from their
// numbers; record_history logs every allocation with its phase, module and category, and dump_snapshot writes
// Chrome trace JSON.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "test_util.h"

using namespace ember;

namespace {
size_t cat(memory::Category c) { return memory::bytes_by_category(Device::cpu())[static_cast<size_t>(c)]; }
size_t param_bytes(const nn::Module& m) {
  size_t n = 0;
  for (const Tensor& p : m.parameters()) n += memory::allocated_size(Device::cpu(), p.impl()->storage->nbytes);
  return n;
}
}  // namespace

TEST(MemoryCategories, FollowTheTensorsOfATrainingStep) {
  using memory::Category;
  const size_t params0 = cat(Category::kParameters), grads0 = cat(Category::kGradients),
               acts0 = cat(Category::kActivations), state0 = cat(Category::kOptimizerState);
  {
    nn::Chain model{nn::Dense(64, 256, nn::relu), nn::Dense(256, 10)};
    const size_t pb = param_bytes(model);
    EXPECT_EQ(cat(Category::kParameters) - params0, pb);
    optim::Adam opt(model.parameters(), {.lr = 1e-3});
    Tensor loss = sum(model(randn({32, 64})));
    EXPECT_GT(cat(Category::kActivations), acts0);  // saved for backward
    loss.backward();
    EXPECT_EQ(cat(Category::kActivations), acts0);  // released by backward
    EXPECT_EQ(cat(Category::kGradients) - grads0, pb);
    opt.step();
    EXPECT_EQ(cat(Category::kOptimizerState) - state0, 2 * pb);
    EXPECT_NE(memory::describe_categories(Device::cpu()).find("optimizer_state"), std::string::npos);
    opt.zero_grad();
    EXPECT_EQ(cat(Category::kGradients), grads0);
  }
  EXPECT_EQ(cat(Category::kParameters), params0);
  EXPECT_EQ(cat(Category::kOptimizerState), state0);
  // Workspace outranks temporaries, never a stronger tag.
  const size_t ws0 = cat(Category::kWorkspace);
  Tensor w = empty({1000});
  memory::tag(w, Category::kWorkspace);
  EXPECT_EQ(cat(Category::kWorkspace) - ws0, memory::allocated_size(Device::cpu(), 4000));
  Tensor p = zeros({10});
  memory::tag(p, Category::kParameters);
  memory::tag(p, Category::kWorkspace);
  EXPECT_EQ(cat(Category::kWorkspace) - ws0, memory::allocated_size(Device::cpu(), 4000));
}

// The message lists the top categories in use and advice computed from the largest one.
TEST(MemoryCategories, OutOfMemoryNamesTheLargestCategory) {
  nn::Chain model{nn::Dense(256, 4096, nn::relu), nn::Dense(4096, 4096, nn::relu), nn::Dense(4096, 10)};
  const Tensor x = randn({512, 256});
  cpu_empty_cache();
  set_memory_limit(Device::cpu(), cpu_memory_stats().bytes_in_use + (48u << 20));
  struct Unlimit {
    ~Unlimit() { set_memory_limit(Device::cpu(), 0); }
  } unlimit;
  std::string msg;
  try {
    Tensor loss = sum(model(x));
    loss.backward();
  } catch (const OutOfMemoryError& e) {
    msg = e.what();
  }
  std::printf("%s\n", msg.c_str());
  ASSERT_FALSE(msg.empty());
  EXPECT_NE(msg.find("In use: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("during the backward"), std::string::npos) << msg;  // the gradients do not fit
  EXPECT_NE(msg.find("parameters are "), std::string::npos) << msg;      // 68 MiB of them: the largest share
  EXPECT_NE(msg.find("% ("), std::string::npos) << msg;
  EXPECT_NE(msg.find("saves 34"), std::string::npos) << msg;  // the advice carries a number: half of them
}

TEST(MemoryHistory, RecordsEveryAllocationWithItsContext) {
  memory::record_history(true);
  {
    nn::Chain model{nn::Dense(32, 64, nn::relu), nn::Dense(64, 10)};
    optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
    Tensor loss = nn::cross_entropy(model(randn({16, 32})), randint(0, 10, {16}));
    loss.backward();
    opt.step();
  }
  memory::record_history(false);
  EXPECT_FALSE(memory::is_recording_history());
  const memory::Snapshot s = memory::snapshot();
  ASSERT_GT(s.allocations.size(), 10u);
  EXPECT_FALSE(s.truncated);
  bool phases[3] = {}, module1 = false, params = false, state = false, grads = false;
  for (const memory::AllocationRecord& r : s.allocations) {
    phases[static_cast<int>(r.phase)] = true;
    module1 = module1 || r.module == "1";
    params = params || r.category == memory::Category::kParameters;
    grads = grads || r.category == memory::Category::kGradients;
    state = state || r.category == memory::Category::kOptimizerState;
    EXPECT_EQ(r.device, Device::cpu());
    EXPECT_GE(r.free_us, r.alloc_us);  // everything was freed inside the block
    EXPECT_EQ(r.bytes % 64, 0u);
  }
  EXPECT_TRUE(phases[0] && phases[1] && phases[2]);
  EXPECT_TRUE(module1 && params && grads && state);
  // Nothing is recorded while off.
  (void)zeros({100});
  EXPECT_EQ(memory::snapshot().allocations.size(), s.allocations.size());
  // A cap: later allocations are left out and the snapshot says so.
  memory::record_history(true, 3);
  for (int i = 0; i < 5; ++i) (void)zeros({10});
  memory::record_history(false);
  EXPECT_EQ(memory::snapshot().allocations.size(), 3u);
  EXPECT_TRUE(memory::snapshot().truncated);
}

TEST(MemoryHistory, DumpsChromeTraceJson) {
  memory::record_history(true);
  Tensor kept;
  {
    nn::Chain model{nn::Dense(8, 16, nn::relu), nn::Dense(16, 2)};
    kept = model(randn({4, 8}));
    sum(kept).backward();
  }
  memory::record_history(false);
  const std::string path = testing::TempDir() + "ember_timeline.json";
  memory::dump_snapshot(path);
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_TRUE(j.contains("traceEvents"));
  int counters = 0;
  bool named = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") named = named || e["args"]["name"] == "ember memory cpu";
    if (e["ph"] != "C") continue;
    ++counters;
    if (e["name"] == "by category")
      for (const char* c : {"parameters", "gradients", "optimizer_state", "activations", "temporaries", "workspace"})
        EXPECT_TRUE(e["args"].contains(c)) << c;
  }
  EXPECT_TRUE(named);
  EXPECT_GT(counters, 10);
  // The last sample: what is still live (kept, the parameters were freed with the model).
  std::remove(path.c_str());
  EXPECT_THROW_MSG(memory::dump_snapshot("/nonexistent-dir/x.json"), Error, "dump_snapshot", "cannot write");
}
