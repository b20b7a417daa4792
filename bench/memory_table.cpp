// The single-GPU memory table from the planner alone (issue 58, item 5): ResNet-50 (batch 256) and ViT-B/16 (batch
// 128) training steps (AdamW; float32, bf16 autocast, and bf16 autocast with the checkpoints memory::fit picks)
// planned for one CUDA device with a 48 GB budget — meta execution and the CUDA caching allocator's rules, no GPU
// needed. Per row: the planned peak at the batch, and the largest batch that fits the budget.
//   ember_memory_table [--budget-gb 48] [--only resnet50|vit_b16]
// Prints a Markdown table. The cuDNN workspace is not planned yet (docs/memory.md): real peaks may be higher by it.
#include <ember/ember.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

using namespace ember;

namespace {

struct Model {
  std::string name;
  int64_t batch;
  std::shared_ptr<nn::Module> (*make)();
};

// One training step of a fresh copy of `model` on the GPU (made inside the plan: its parameters, gradients and
// optimiser state are planned too), with `model`'s checkpointing choices copied over by module path.
void step(const Model& m, const nn::Module& model, int64_t batch, bool bf16) {
  const Device gpu = Device::cuda();
  std::shared_ptr<nn::Module> net = m.make();
  const nn::NamedModules want = model.named_modules(), have = net->named_modules();
  for (size_t i = 0; i < have.size() && i < want.size(); ++i) have[i].second->set_checkpointing(want[i].second->checkpointing());
  net->to(gpu);
  optim::AdamW opt(net->parameters(), {.lr = 1e-4});
  const Tensor x = randn({batch, 3, 224, 224}, {.device = gpu});
  const Tensor y = randint(0, 1000, {batch}, {.dtype = kInt64, .device = gpu});
  Tensor loss;
  {
    amp::AutocastGuard ac(gpu, kBFloat16, bf16);
    loss = nn::cross_entropy((*net)(x), y);
  }
  loss.backward();
  opt.step();
  opt.zero_grad();
}

size_t peak(const Model& m, const nn::Module& model, int64_t batch, bool bf16) {
  return memory::plan(Device::cuda(), [&] { step(m, model, batch, bf16); }).peak_bytes;
}

int64_t largest_batch(const Model& m, const nn::Module& model, bool bf16, size_t budget) {
  return memory::max_batch_size(
      Device::cuda(), [&](int64_t b) { step(m, model, b, bf16); }, {.lo = 1, .hi = 1 << 14, .budget_bytes = budget});
}

std::string gib(size_t b) { return detail::str(static_cast<double>(b) / (1 << 30)).substr(0, 5) + " GiB"; }

}  // namespace

int main(int argc, char** argv) try {
  double budget_gb = 48;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--budget-gb")) budget_gb = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
  }
  const size_t budget = static_cast<size_t>(budget_gb * 1e9);
  const Model models[] = {
      {"resnet50", 256, [] { return std::shared_ptr<nn::Module>(std::make_shared<models::ResNet>(models::resnet50())); }},
      {"vit_b16", 128, [] { return std::shared_ptr<nn::Module>(std::make_shared<models::ViT>(models::vit_b16())); }},
  };
  std::printf("| model | batch | precision | planned peak at the batch | largest batch in %.0f GB | checkpointed |\n",
              budget_gb);
  std::printf("| --- | ---: | --- | ---: | ---: | --- |\n");
  for (const Model& m : models) {
    if (!only.empty() && only != m.name) continue;
    std::shared_ptr<nn::Module> model = m.make();  // on the CPU: the checkpoint choices live here
    for (bool bf16 : {false, true}) {
      std::printf("| %s | %lld | %s | %s | %lld | none |\n", m.name.c_str(), static_cast<long long>(m.batch),
                  bf16 ? "bf16 autocast" : "float32", gib(peak(m, *model, m.batch, bf16)).c_str(),
                  static_cast<long long>(largest_batch(m, *model, bf16, budget)));
      std::fflush(stdout);
    }
    // bf16 autocast with memory::fit: the cheapest checkpoints that let a batch a quarter larger than autocast's
    // largest fit, then the largest batch with them.
    const int64_t fits = largest_batch(m, *model, true, budget), beyond = fits + fits / 4;
    const memory::FitPlan p = memory::fit([&](int64_t b) { step(m, *model, b, true); }, budget,
                                          {.model = model.get(), .batch = beyond, .max_batch = 1 << 14,
                                           .device = Device::cuda()});
    memory::apply(*model, p);
    const size_t at_batch = peak(m, *model, m.batch, true);
    std::printf("| %s | %lld | bf16 autocast + memory::fit | %s | %lld | %zu of the blocks (%.0f GFLOP recomputed a "
                "step at batch %lld) |\n",
                m.name.c_str(), static_cast<long long>(m.batch), gib(at_batch).c_str(),
                static_cast<long long>(p.batch), p.checkpointed.size(), p.recompute_flops / 1e9,
                static_cast<long long>(p.batch));
    std::fflush(stdout);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "ember_memory_table: %s\n", e.what());
  return 1;
}
