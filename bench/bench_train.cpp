// Training throughput of Ember: one configuration and one thread count per process. bench/train_table.sh runs it
// and libtorch's twin (torch_train.cpp, a process with nothing of Ember in it) alternately and writes the table
// into docs/benchmarks.md.
//   ember_bench_train --framework ember --config mlp-b64|mlp-b256|mlp-big|cnn-b64|cnn-bn-b64 --threads N
//                     [--amp bf16]   (forward and loss under autocast, as torch_train.cpp's --amp bf16)
// Prints one line: framework config threads samples_per_s peak_rss_mib
// Batches are real Fashion-MNIST images held in memory (data loading excluded); Adam 1e-3; cross-entropy.
#include <ember/ember.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "models.h"
#include "timing.h"

namespace {
struct Config {
  std::string name;
  int64_t batch;
  std::string model;  // bench::model's name
};

double run_ember(const Config& c, const ember::Tensor& images, const ember::Tensor& labels, bool bf16) {
  using namespace ember;
  nn::Chain model = bench::model(c.model);
  optim::Adam opt(model.parameters(), {.lr = 1e-3});
  const int64_t nb = images.size(0) / c.batch;
  std::vector<Tensor> xs, ys;
  for (int64_t i = 0; i < nb; ++i) {
    xs.push_back(images.slice(0, i * c.batch, (i + 1) * c.batch).contiguous());
    ys.push_back(labels.slice(0, i * c.batch, (i + 1) * c.batch).contiguous());
  }
  return bench::throughput(c.batch, nb, [&](int64_t i) {
    Tensor loss;
    {
      amp::AutocastGuard autocast(kBFloat16, bf16);
      loss = nn::cross_entropy(model(xs[static_cast<size_t>(i)]), ys[static_cast<size_t>(i)]);
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::string framework = "ember", config = "mlp-b64", data = "/usr/share/datasets/fashion-mnist", amp = "none";
  int threads = 1;
  if (argc == 2 && !std::strcmp(argv[1], "--isa")) {  // the CPU kernel variant this machine uses
    std::printf("%s\n", ember::cpu_isa().c_str());
    return 0;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--framework")) framework = argv[i + 1];
    else if (!std::strcmp(argv[i], "--config")) config = argv[i + 1];
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--data")) data = argv[i + 1];
    else if (!std::strcmp(argv[i], "--amp")) amp = argv[i + 1];
  }
  if (amp != "none" && amp != "bf16") {
    std::fprintf(stderr, "--amp must be none or bf16\n");
    return 2;
  }
  const std::vector<Config> configs = {{"mlp-b64", 64, "mlp"},
                                       {"mlp-b256", 256, "mlp"},
                                       {"mlp-big", 256, "mlp-big"},
                                       {"cnn-b64", 64, "cnn"},
                                       {"cnn-bn-b64", 64, "cnn-bn"}};
  auto it = std::find_if(configs.begin(), configs.end(), [&](const Config& c) { return c.name == config; });
  if (it == configs.end()) {
    std::fprintf(stderr, "unknown config %s\n", config.c_str());
    return 2;
  }
  try {
    // 10,240 training images are enough batches to cycle through without measuring data loading.
    // (read as uint8 and converted only for the images used, so that peak RSS is about the frameworks)
    ember::Tensor images, labels;
    {
      ember::Tensor raw_x = ember::data::read_idx(data + "/train-images-idx3-ubyte.gz").slice(0, 0, 10240);
      ember::Tensor raw_y = ember::data::read_idx(data + "/train-labels-idx1-ubyte.gz").slice(0, 0, 10240);
      images = (raw_x.to(ember::kFloat32) / 255).reshape({-1, 1, 28, 28});
      labels = raw_y.to(ember::kInt64);
    }
    ember::cpu_empty_cache();
    double rate = 0;
    if (framework == "ember") {
      ember::set_num_threads(threads);
      rate = run_ember(*it, images, labels, amp == "bf16");
    } else {
      std::fprintf(stderr, "unknown framework %s\n", framework.c_str());
      return 2;
    }
    std::printf("%s %s%s %d %.0f %.1f\n", framework.c_str(), config.c_str(), amp == "bf16" ? "+bf16" : "", threads,
                rate, bench::peak_rss_mib());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember_bench_train: %s\n", e.what());
    return 1;
  }
  return 0;
}
