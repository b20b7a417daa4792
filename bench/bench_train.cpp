// Training throughput of Ember: one configuration and one thread count per process. bench/train_table.sh runs it
// and libtorch's twin (torch_train.cpp, a process with nothing of Ember in it) alternately and writes the table
// into docs/benchmarks.md.
//   ember_bench_train --framework ember --config mlp-b64|mlp-b256|mlp-big|cnn-b64|cnn-bn-b64 --threads N
// Prints one line: framework config threads samples_per_s peak_rss_mib
// Batches are real Fashion-MNIST images held in memory (data loading excluded); Adam 1e-3; cross-entropy.
#include <ember/ember.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {
using Clock = std::chrono::steady_clock;

struct Config {
  std::string name;
  int64_t batch;
  bool cnn, big, bn = false;  // bn: BatchNorm2d after each conv
};

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Times `step(batch_index)` for `seconds` after warm-up and returns samples per second (median of 5 windows).
template <class Step>
double throughput(int64_t batch, int64_t nbatches, Step&& step) {
  for (int i = 0; i < 5; ++i) step(i % nbatches);  // warm-up: caches, allocator, packing buffers
  std::vector<double> rates;
  int64_t k = 0;
  for (int w = 0; w < 5; ++w) {
    auto t0 = Clock::now();
    int64_t n = 0;
    while (std::chrono::duration<double>(Clock::now() - t0).count() < 0.6) {
      step(k++ % nbatches);
      ++n;
    }
    rates.push_back(static_cast<double>(n * batch) / std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(rates.begin(), rates.end());
  return rates[2];
}

double run_ember(const Config& c, const ember::Tensor& images, const ember::Tensor& labels) {
  using namespace ember;
  nn::Chain model;
  if (c.cnn) {
    model.push_back(nn::Conv2d(1, 32, 5, {.padding = 2}));
    if (c.bn) model.push_back(nn::BatchNorm2d(32));
    model.push_back(nn::relu);
    model.push_back(nn::MaxPool2d(2));
    model.push_back(nn::Conv2d(32, 64, 5, {.padding = 2}));
    if (c.bn) model.push_back(nn::BatchNorm2d(64));
    for (nn::ChainItem m : {nn::ChainItem(nn::relu), nn::ChainItem(nn::MaxPool2d(2)), nn::ChainItem(nn::Flatten()),
                            nn::ChainItem(nn::Dense(3136, 128, nn::relu)), nn::ChainItem(nn::Dense(128, 10))})
      model.push_back(m);
  } else if (c.big) {
    model =
        nn::Chain{nn::Flatten(), nn::Dense(784, 1024, nn::relu), nn::Dense(1024, 1024, nn::relu), nn::Dense(1024, 10)};
  } else {
    model = nn::Chain{nn::Flatten(), nn::Dense(784, 128, nn::relu), nn::Dense(128, 10)};
  }
  optim::Adam opt(model.parameters(), {.lr = 1e-3});
  const int64_t nb = images.size(0) / c.batch;
  std::vector<Tensor> xs, ys;
  for (int64_t i = 0; i < nb; ++i) {
    xs.push_back(images.slice(0, i * c.batch, (i + 1) * c.batch).contiguous());
    ys.push_back(labels.slice(0, i * c.batch, (i + 1) * c.batch).contiguous());
  }
  return throughput(c.batch, nb, [&](int64_t i) {
    Tensor loss = nn::cross_entropy(model(xs[static_cast<size_t>(i)]), ys[static_cast<size_t>(i)]);
    opt.zero_grad();
    loss.backward();
    opt.step();
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::string framework = "ember", config = "mlp-b64", data = "/usr/share/datasets/fashion-mnist";
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
  }
  const std::vector<Config> configs = {{"mlp-b64", 64, false, false},
                                       {"mlp-b256", 256, false, false},
                                       {"mlp-big", 256, false, true},
                                       {"cnn-b64", 64, true, false},
                                       {"cnn-bn-b64", 64, true, false, true}};
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
      rate = run_ember(*it, images, labels);
    } else {
      std::fprintf(stderr, "unknown framework %s\n", framework.c_str());
      return 2;
    }
    std::printf("%s %s %d %.0f %.1f\n", framework.c_str(), config.c_str(), threads, rate, peak_rss_mib());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember_bench_train: %s\n", e.what());
    return 1;
  }
  return 0;
}
