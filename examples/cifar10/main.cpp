// Trains a CNN on CIFAR-10 (the binary version: data_batch_1..5.bin, test_batch.bin) with the classic
// augmentation — random 32x32 crops of the 4-pixel-padded image, horizontal flips — applied per sample in the
// DataLoader's workers, each sample with its own random stream (the same batches for any --workers).
//   ember_cifar10 --data DIR [--model lenet|resnet] [--epochs N] [--batch-size N] [--lr X] [--device cpu|cuda|auto]
//                 [--workers N] [--threads N] [--seed N] [--limit N]
// lenet is the seed document's network (conv 3→6 5x5, pool, conv 6→16 5x5, pool, 120, 84, 10); resnet a small
// ResNet (3 stages of residual blocks with batch norm, 16/32/64 channels). Device-agnostic: one Device, chosen
// once; the model and the batches go there. Get the data from https://www.cs.toronto.edu/~kriz/cifar.html
// ("CIFAR-10 binary version") and pass the unpacked folder (or its parent) as --data.
#include <ember/ember.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

using namespace ember;
namespace T = ember::data::transforms;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string data, model = "lenet", device = "auto";
  int epochs = 10, workers = 2, threads = 0;
  int64_t batch_size = 128, limit = 0;
  double lr = 1e-3;
  uint64_t seed = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "ember_cifar10: " << why << "\n"
            << "usage: ember_cifar10 --data DIR [--model lenet|resnet] [--epochs N] [--batch-size N] [--lr X]\n"
            << "                     [--device cpu|cuda|auto] [--workers N] [--threads N] [--seed N] [--limit N]\n";
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "-h" || k == "--help") usage("help");
    if (i + 1 >= argc) usage("missing value for " + k);
    const std::string v = argv[++i];
    try {
      if (k == "--data") a.data = v;
      else if (k == "--model") a.model = v;
      else if (k == "--device") a.device = v;
      else if (k == "--epochs") a.epochs = std::stoi(v);
      else if (k == "--workers") a.workers = std::stoi(v);
      else if (k == "--threads") a.threads = std::stoi(v);
      else if (k == "--batch-size") a.batch_size = std::stoll(v);
      else if (k == "--limit") a.limit = std::stoll(v);
      else if (k == "--lr") a.lr = std::stod(v);
      else if (k == "--seed") a.seed = std::stoull(v);
      else usage("unknown flag " + k);
    } catch (const std::logic_error&) {
      usage("bad value '" + v + "' for " + k);
    }
  }
  if (a.data.empty()) usage("--data DIR is required (the folder with data_batch_1.bin ... test_batch.bin)");
  if (a.model != "lenet" && a.model != "resnet") usage("--model must be lenet or resnet");
  if (a.epochs < 1 || a.batch_size < 1 || a.workers < 0 || !(a.lr > 0))
    usage("bad --epochs/--batch-size/--workers/--lr");
  return a;
}

// conv-bn-relu-conv-bn plus the input (through a strided 1x1 conv + bn when the shape changes), then relu.
struct Residual : nn::Module {
  nn::Conv2d c1, c2;
  nn::BatchNorm2d b1, b2;
  bool project;
  nn::Conv2d pc{1, 1, 1};
  nn::BatchNorm2d pb{1};
  Residual(int64_t in, int64_t out, int64_t stride)
      : c1(in, out, 3, {.stride = stride, .padding = 1, .bias = false}),
        c2(out, out, 3, {.padding = 1, .bias = false}),
        b1(out),
        b2(out),
        project(stride != 1 || in != out) {
    register_module("c1", c1);
    register_module("b1", b1);
    register_module("c2", c2);
    register_module("b2", b2);
    if (project) {
      pc = nn::Conv2d(in, out, 1, {.stride = stride, .bias = false});
      pb = nn::BatchNorm2d(out);
      register_module("pc", pc);
      register_module("pb", pb);
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = b2(c2(relu(b1(c1(x)))));
    return relu(y + (project ? pb(pc(x)) : x));
  }
  std::string repr() const override { return project ? "Residual(projected)" : "Residual"; }
};

nn::Chain make_model(const std::string& kind) {
  if (kind == "lenet")
    return nn::Chain{nn::Conv2d(3, 6, 5),
                     nn::relu,
                     nn::MaxPool2d(2),
                     nn::Conv2d(6, 16, 5),
                     nn::relu,
                     nn::MaxPool2d(2),
                     nn::Flatten(),
                     nn::Dense(16 * 5 * 5, 120, nn::relu),
                     nn::Dense(120, 84, nn::relu),
                     nn::Dense(84, 10)};
  return nn::Chain{nn::Conv2d(3, 16, 3, {.padding = 1, .bias = false}),
                   nn::BatchNorm2d(16),
                   nn::relu,
                   Residual(16, 16, 1),
                   Residual(16, 32, 2),
                   Residual(32, 64, 2),
                   nn::AvgPool2d(8),
                   nn::Flatten(),
                   nn::Dense(64, 10)};
}

// Accuracy over a loader, without recording a graph.
template <class L>
double accuracy(nn::Module& model, L& loader) {
  NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0, n = 0;
  for (auto [x, y] : loader) {
    correct += sum(eq(argmax(model(x), 1), y)).cpu().template item<int64_t>();
    n += x.size(0);
  }
  model.train();
  return static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(n, 1));
}

// The first n samples of a dataset (--limit: a quick run on part of the data).
template <class D>
struct Head {
  D ds;
  int64_t n;
  int64_t size() const { return n > 0 ? std::min<int64_t>(n, ds.size()) : ds.size(); }
  data::Example get(int64_t i) const { return ds.get(i); }
};

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    if (args.threads > 0) set_num_threads(args.threads);
    Device dev = Device::cpu();
    if (args.device == "cuda" || (args.device == "auto" && cuda::is_available())) dev = Device::cuda();
    else if (args.device != "cpu" && args.device != "auto") usage("--device must be cpu, cuda or auto");
    manual_seed(args.seed);

    // Per-channel statistics of the CIFAR-10 training images.
    const std::vector<double> mean = {0.4914, 0.4822, 0.4465}, stdev = {0.2470, 0.2435, 0.2616};
    data::Transformed train(Head<data::CIFAR10>{data::CIFAR10(args.data, data::Split::Train), args.limit},
                            T::Compose{T::RandomCrop(32, {.padding = 4}), T::RandomHorizontalFlip(), T::ToFloat(),
                                       T::Normalize(mean, stdev)});
    data::Transformed test(data::CIFAR10(args.data, data::Split::Test),
                           T::Compose{T::ToFloat(), T::Normalize(mean, stdev)});
    const data::DataLoaderOptions common{.batch_size = args.batch_size,
                                         .num_workers = args.workers,
                                         .pin_memory = dev.is_cuda(),
                                         .device = dev,
                                         .seed = args.seed,
                                         .persistent_workers = args.workers > 0};
    data::DataLoaderOptions train_opts = common;
    train_opts.shuffle = true;
    data::DataLoader train_loader(train, train_opts);
    data::DataLoader test_loader(test, common);

    nn::Chain model = make_model(args.model);
    model.to(dev);
    optim::Adam opt(model.parameters(), {.lr = args.lr});
    std::cout << args.model << " on " << dev << ", " << get_num_threads() << " threads, " << args.workers
              << " loader workers, batch " << args.batch_size << ", Adam lr " << args.lr << ", " << train.size()
              << " training / " << test.size() << " test images\n";

    const bool tty = ::isatty(STDOUT_FILENO);
    const int64_t nb = train_loader.size();
    for (int epoch = 1; epoch <= args.epochs; ++epoch) {
      const auto t0 = Clock::now();
      Tensor loss_sum = zeros({}, {.device = dev});  // read back only when printed: no sync per step
      int64_t done = 0, seen = 0;
      for (auto [x, y] : train_loader) {
        Tensor loss = nn::cross_entropy(model(x), y);
        opt.zero_grad();
        loss.backward();
        opt.step();
        loss_sum = loss_sum + loss.detach();
        ++done;
        seen += x.size(0);
        const bool last = done == nb;
        if ((tty && (done % 10 == 0 || last)) || (!tty && (done % std::max<int64_t>(1, nb / 4) == 0 || last))) {
          const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
          const int width = 30, filled = static_cast<int>(width * done / nb);
          std::printf("%sepoch %d [%s%s] %lld/%lld  %.0f samples/s  loss %.4f%s", tty ? "\r" : "", epoch,
                      std::string(static_cast<size_t>(filled), '=').c_str(),
                      std::string(static_cast<size_t>(width - filled), ' ').c_str(), static_cast<long long>(done),
                      static_cast<long long>(nb), static_cast<double>(seen) / secs,
                      loss_sum.cpu().item<float>() / static_cast<double>(done), tty ? "" : "\n");
          std::fflush(stdout);
        }
      }
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      const double acc = accuracy(model, test_loader);
      std::printf("%sepoch %d: train loss %.4f, test accuracy %.2f%%, %.1f s (%.0f samples/s)\n", tty ? "\n" : "",
                  epoch, loss_sum.cpu().item<float>() / static_cast<double>(done), 100 * acc, secs,
                  static_cast<double>(seen) / secs);
    }
  } catch (const Error& e) {
    std::cerr << "ember_cifar10: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
