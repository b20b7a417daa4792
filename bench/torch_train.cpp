// The libtorch side of the training table (bench/train_table.sh): the same models, batches, data and timing as
// bench_train.cpp's Ember side, in a process that links libtorch and zlib only — nothing of Ember's (no second
// copy of any runtime, no CUDA libraries mapped, no Ember thread pool), so libtorch runs as fast as it can.
//   ember_torch_train --config mlp-b64|mlp-b256|mlp-big|cnn-b64|cnn-bn-b64 --threads N [--flat] [--amp bf16]
// --amp bf16: forward and loss under CPU autocast to bfloat16 (libtorch's at::autocast, what torch.autocast("cpu")
// does), as bench_train.cpp's --amp bf16.
// Prints one line: torch config threads samples_per_s peak_rss_mib. --flat feeds the MLPs [N, 784] batches
// instead of [N, 1, 28, 28] + Flatten (a check that the 4-D input costs libtorch nothing).
// Batches are real Fashion-MNIST images held in memory (data loading excluded); Adam 1e-3; cross-entropy.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "timing.h"  // standard C++ only: nothing of Ember

namespace {

// The payload of a gzipped IDX file (big-endian header: magic, then one uint32 per dim), first `count` items.
std::vector<uint8_t> read_idx_gz(const std::string& path, int64_t count, int64_t item_bytes, int header_bytes) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<uint8_t> header(static_cast<size_t>(header_bytes)), data(static_cast<size_t>(count * item_bytes));
  const bool ok = gzread(f, header.data(), static_cast<unsigned>(header.size())) == header_bytes &&
                  gzread(f, data.data(), static_cast<unsigned>(data.size())) == static_cast<int>(data.size());
  gzclose(f);
  if (!ok) throw std::runtime_error("short read from " + path);
  return data;
}

torch::nn::Sequential make_model(const std::string& config, bool flat) {
  namespace tn = torch::nn;
  auto conv = [](int64_t in, int64_t out) { return tn::Conv2d(tn::Conv2dOptions(in, out, 5).padding(2)); };
  if (config == "cnn-b64")
    return tn::Sequential(conv(1, 32), tn::ReLU(), tn::MaxPool2d(2), conv(32, 64), tn::ReLU(), tn::MaxPool2d(2),
                          tn::Flatten(), tn::Linear(3136, 128), tn::ReLU(), tn::Linear(128, 10));
  if (config == "cnn-bn-b64")
    return tn::Sequential(conv(1, 32), tn::BatchNorm2d(32), tn::ReLU(), tn::MaxPool2d(2), conv(32, 64),
                          tn::BatchNorm2d(64), tn::ReLU(), tn::MaxPool2d(2), tn::Flatten(), tn::Linear(3136, 128),
                          tn::ReLU(), tn::Linear(128, 10));
  tn::Sequential m;
  if (!flat) m->push_back(tn::Flatten());
  if (config == "mlp-big") {
    m->push_back(tn::Linear(784, 1024));
    m->push_back(tn::ReLU());
    m->push_back(tn::Linear(1024, 1024));
    m->push_back(tn::ReLU());
    m->push_back(tn::Linear(1024, 10));
  } else {
    m->push_back(tn::Linear(784, 128));
    m->push_back(tn::ReLU());
    m->push_back(tn::Linear(128, 10));
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config = "mlp-b64", data = "/usr/share/datasets/fashion-mnist";
  int threads = 1;
  bool flat = false, bf16 = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--flat")) flat = true;
    else if (i + 1 < argc && !std::strcmp(argv[i], "--amp")) bf16 = !std::strcmp(argv[++i], "bf16");
    else if (i + 1 < argc && !std::strcmp(argv[i], "--config")) config = argv[++i];
    else if (i + 1 < argc && !std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[++i]);
    else if (i + 1 < argc && !std::strcmp(argv[i], "--data")) data = argv[++i];
  }
  const int64_t batch = config == "mlp-b256" || config == "mlp-big" ? 256 : 64;
  const bool cnn = config.rfind("cnn", 0) == 0;
  if (config != "mlp-b64" && config != "mlp-b256" && config != "mlp-big" && config != "cnn-b64" &&
      config != "cnn-bn-b64") {
    std::fprintf(stderr, "unknown config %s\n", config.c_str());
    return 2;
  }
  try {
    // the first 10,240 training images, as the Ember side
    constexpr int64_t n = 10240;
    const std::vector<uint8_t> px = read_idx_gz(data + "/train-images-idx3-ubyte.gz", n, 784, 16);
    const std::vector<uint8_t> lb = read_idx_gz(data + "/train-labels-idx1-ubyte.gz", n, 1, 8);
    torch::set_num_threads(threads);
    torch::Tensor X =
        torch::from_blob(const_cast<uint8_t*>(px.data()), {n, 1, 28, 28}, torch::kUInt8).to(torch::kFloat32).div(255);
    if (flat && !cnn) X = X.reshape({n, 784});
    torch::Tensor Y = torch::from_blob(const_cast<uint8_t*>(lb.data()), {n}, torch::kUInt8).to(torch::kInt64);
    torch::nn::Sequential model = make_model(config, flat);
    torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
    const int64_t nb = n / batch;
    std::vector<torch::Tensor> xs, ys;
    for (int64_t i = 0; i < nb; ++i) {
      xs.push_back(X.slice(0, i * batch, (i + 1) * batch).contiguous());
      ys.push_back(Y.slice(0, i * batch, (i + 1) * batch).contiguous());
    }
    const double rate = bench::throughput(batch, nb, [&](int64_t i) {
      if (bf16) {  // the C++ side of torch.autocast("cpu", torch.bfloat16): enable, nest, and clear the cast cache on exit
        at::autocast::set_cpu_enabled(true);
        at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
        at::autocast::increment_nesting();
      }
      torch::Tensor loss =
          torch::nn::functional::cross_entropy(model->forward(xs[static_cast<size_t>(i)]), ys[static_cast<size_t>(i)]);
      if (bf16) {
        if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
        at::autocast::set_cpu_enabled(false);
      }
      opt.zero_grad();
      loss.backward();
      opt.step();
    });
    std::printf("torch %s%s %d %.0f %.1f\n", config.c_str(), bf16 ? "+bf16" : "", threads, rate, bench::peak_rss_mib());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember_torch_train: %s\n", e.what());
    return 1;
  }
  return 0;
}
