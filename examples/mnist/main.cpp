// Trains an MLP or the CNN on (Fashion-)MNIST with Adam, as in the README:
//   ember_mnist --model mlp|cnn --epochs 3 --batch-size 64 --lr 1e-3 --device cpu|cuda|auto --threads N
//               --save model.safetensors --data /usr/share/datasets/fashion-mnist --workers 1 --seed 0
//               --amp none|bf16|f16   (mixed precision: autocast, with a GradScaler for f16; docs/amp.md)
//               --plan                (nn::summary and a memory plan before training, planned vs measured after)
//               --memory-timeline out.json   (every allocation, for Perfetto or scripts/plot_memory.py)
//               --logdir runs/mnist   (TensorBoard logs: loss, accuracy, learning rate, peak memory, weights)
// Device-agnostic: one Device is picked once and the model and every batch are moved with .to(dev).
#include <ember/ember.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string model = "mlp", device = "auto", save, data = "/usr/share/datasets/fashion-mnist", amp = "none";
  std::string timeline;  // --memory-timeline
  std::string logdir;    // --logdir (TensorBoard)
  bool plan = false;
  int epochs = 3, threads = 0, workers = 1;
  int64_t batch_size = 64;
  double lr = 1e-3;
  uint64_t seed = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "ember_mnist: " << why << "\n"
            << "usage: ember_mnist [--model mlp|cnn] [--epochs N] [--batch-size N] [--lr X] [--device cpu|cuda|auto]\n"
            << "                   [--threads N] [--workers N] [--seed N] [--save PATH] [--data DIR]\n"
            << "                   [--amp none|bf16|f16] [--plan] [--memory-timeline out.json] [--logdir DIR]\n";
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "-h" || k == "--help") usage("help");
    if (k == "--plan") {
      a.plan = true;
      continue;
    }
    if (i + 1 >= argc) usage("missing value for " + k);
    std::string v = argv[++i];
    try {
      if (k == "--model") a.model = v;
      else if (k == "--epochs") a.epochs = std::stoi(v);
      else if (k == "--batch-size") a.batch_size = std::stoll(v);
      else if (k == "--lr") a.lr = std::stod(v);
      else if (k == "--device") a.device = v;
      else if (k == "--threads") a.threads = std::stoi(v);
      else if (k == "--workers") a.workers = std::stoi(v);
      else if (k == "--seed") a.seed = std::stoull(v);
      else if (k == "--save") a.save = v;
      else if (k == "--data") a.data = v;
      else if (k == "--amp") a.amp = v;
      else if (k == "--memory-timeline") a.timeline = v;
      else if (k == "--logdir") a.logdir = v;
      else usage("unknown flag " + k);
    } catch (const std::logic_error&) {
      usage("bad value '" + v + "' for " + k);
    }
  }
  if (a.model != "mlp" && a.model != "cnn") usage("--model must be mlp or cnn");
  if (a.amp != "none" && a.amp != "bf16" && a.amp != "f16") usage("--amp must be none, bf16 or f16");
  if (a.epochs < 1 || a.batch_size < 1 || !(a.lr > 0)) usage("--epochs, --batch-size and --lr must be positive");
  return a;
}

nn::Chain make_model(const std::string& kind) {
  if (kind == "mlp") return nn::Chain{nn::Flatten(), nn::Dense(784, 128, nn::relu), nn::Dense(128, 10)};
  return nn::Chain{nn::Conv2d(1, 32, 5, {.padding = 2}),
                   nn::relu,
                   nn::MaxPool2d(2),
                   nn::Conv2d(32, 64, 5, {.padding = 2}),
                   nn::relu,
                   nn::MaxPool2d(2),
                   nn::Flatten(),
                   nn::Dense(3136, 128, nn::relu),
                   nn::Dense(128, 10)};
}

// The training step of main() on a model and optimiser of its own, twice (the second step runs with Adam's
// state): what memory::plan simulates for --plan. Random batches stand in for the loader's, of the same shapes,
// and so do the batches its workers have ready meanwhile (DataLoaderOptions::prefetch = 2 per worker).
void planned_steps(const Args& args, Device dev) {
  std::vector<Tensor> queued;
  for (int i = 0; i < 2 * args.workers; ++i) {
    queued.push_back(empty({args.batch_size, 1, 28, 28}));
    queued.push_back(empty({args.batch_size}, {.dtype = kInt64}));
  }
  nn::Chain model = make_model(args.model);
  model.to(dev);
  optim::Adam opt(model.parameters(), {.lr = args.lr});
  amp::GradScaler scaler({.enabled = args.amp == "f16"});
  for (int s = 0; s < 2; ++s) {
    Tensor x = randn({args.batch_size, 1, 28, 28}, {.device = dev});
    Tensor y = randint(0, 10, {args.batch_size}, {.dtype = kInt64, .device = dev});
    Tensor loss;
    {
      amp::AutocastGuard ac(dev, args.amp == "f16" ? kFloat16 : kBFloat16, args.amp != "none");
      loss = nn::cross_entropy(model(x), y);
    }
    opt.zero_grad();
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
  }
}

size_t bytes_in_use(Device dev) {
  return dev.is_cuda() ? cuda::memory_allocated(dev.index()) : cpu_memory_stats().bytes_in_use;
}
size_t peak_in_use(Device dev) {
  return dev.is_cuda() ? cuda::max_memory_allocated(dev.index()) : cpu_memory_stats().peak_bytes_in_use;
}
std::string mib(size_t b) { return detail::format_bytes(b, 1); }

// Accuracy on a dataset held as whole tensors, in batches, without recording a graph.
double accuracy(nn::Module& model, const Tensor& images, const Tensor& labels, Device dev, const Args& args) {
  NoGradGuard no_grad;
  amp::AutocastGuard ac(dev, args.amp == "f16" ? kFloat16 : kBFloat16, args.amp != "none");
  model.eval();
  int64_t correct = 0;
  const int64_t n = images.size(0);
  for (int64_t i = 0; i < n; i += 1000) {
    const int64_t e = std::min(n, i + 1000);
    Tensor logits = model(images.slice(0, i, e).to(dev));
    correct += sum(eq(argmax(logits, 1), labels.slice(0, i, e).to(dev))).cpu().item<int64_t>();
  }
  model.train();
  return static_cast<double>(correct) / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  try {
    if (args.threads > 0) set_num_threads(args.threads);
    Device dev = Device::cpu();
    if (args.device == "cuda" || (args.device == "auto" && cuda::is_available())) dev = Device::cuda();
    else if (args.device != "cpu" && args.device != "auto") usage("--device must be cpu, cuda or auto");
    manual_seed(args.seed);

    data::MNIST train(args.data, data::Split::Train), test(args.data, data::Split::Test);
    // --plan: what one training step will take, worked out before anything is allocated for it.
    memory::Plan plan;
    if (args.plan) plan = memory::plan(dev, [&] { planned_steps(args, dev); });
    if (!args.timeline.empty()) memory::record_history(true);
    // From here on, what training adds to the datasets' memory is measured against the plan.
    const size_t base = bytes_in_use(dev);
    cpu_reset_peak_memory_stats();
    if (dev.is_cuda()) cuda::reset_peak_memory_stats(dev.index());
    nn::Chain model = make_model(args.model);
    model.to(dev);
    optim::Adam opt(model.parameters(), {.lr = args.lr});
    // Mixed precision: the forward and the loss under autocast (the model's own weights stay float32), and for
    // float16 a GradScaler, whose scaled loss keeps small gradients from flushing to zero.
    const bool use_amp = args.amp != "none";
    const DType low = args.amp == "f16" ? kFloat16 : kBFloat16;
    amp::GradScaler scaler({.enabled = args.amp == "f16"});
    // On a GPU: batches built in pinned memory and delivered on the device, the next one's copy overlapping
    // this one's compute (see DataLoader).
    data::DataLoader loader(train, {.batch_size = args.batch_size,
                                    .shuffle = true,
                                    .num_workers = args.workers,
                                    .pin_memory = dev.is_cuda(),
                                    .device = dev,
                                    .seed = args.seed});
    std::cout << model << "\n"
              << args.model << " on " << dev << ", " << get_num_threads() << " threads, batch " << args.batch_size
              << ", Adam lr " << args.lr << ", " << train.size() << " training images"
              << (use_amp ? ", autocast " + args.amp : std::string()) << "\n";
    if (args.plan) std::cout << nn::summary(model, {args.batch_size, 1, 28, 28}) << "\n" << plan.to_string() << "\n";
    size_t train_peak = 0;  // measured over the first epoch's training steps, before evaluation

    std::unique_ptr<SummaryWriter> log;  // --logdir: one point per epoch, `tensorboard --logdir DIR` shows them
    if (!args.logdir.empty()) {
      log = std::make_unique<SummaryWriter>(args.logdir);
      log->add_text("config", args.model + " on " + dev.to_string() + ", batch " + std::to_string(args.batch_size) +
                                  ", Adam lr " + std::to_string(args.lr) + ", amp " + args.amp, 0);
    }
    const int64_t nb = static_cast<int64_t>(loader.size());
    for (int epoch = 1; epoch <= args.epochs; ++epoch) {
      auto t0 = Clock::now();
      // On stderr: redrawn in place on a terminal, one line per 5% into a log.
      ProgressBar bar(nb,
                      {.desc = "epoch " + std::to_string(epoch) + "/" + std::to_string(args.epochs), .unit = "batch"});
      // The loss is summed on the device and read back only when printed: reading it every step would make
      // the host wait for the GPU each time.
      Tensor running_sum = zeros({}, {.device = dev});
      double running = 0;
      int64_t done = 0, seen = 0;
      for (auto [x, y] : loader) {
        Tensor loss;
        {
          amp::AutocastGuard ac(dev, low, use_amp);
          loss = nn::cross_entropy(model(x), y);
        }
        opt.zero_grad();
        scaler.scale(loss).backward();
        scaler.step(opt);  // opt.step(), unless (f16) a gradient overflowed
        scaler.update();
        running_sum = running_sum + loss.detach();
        ++done;
        seen += x.size(0);
        if (bar.due()) {
          running = running_sum.cpu().item<float>();
          bar.set_postfix({{"loss", running / static_cast<double>(done)}});
        }
        bar.update();
      }
      bar.close();
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      if (epoch == 1) train_peak = peak_in_use(dev) - base;
      const double acc = accuracy(model, test.images(), test.labels(), dev, args);
      std::printf("epoch %d: train loss %.4f, test accuracy %.2f%%, %.1f s (%.0f samples/s)\n", epoch,
                  running / static_cast<double>(done), 100 * acc, secs, static_cast<double>(seen) / secs);
      if (log) {
        log->add_scalar("loss/train", running / static_cast<double>(done), epoch);
        log->add_scalar("accuracy/test", acc, epoch);
        log->add_scalar("lr", args.lr, epoch);
        log->add_scalar("samples_per_second", static_cast<double>(seen) / secs, epoch);
        // device-agnostic: cuda::max_memory_allocated reads 0 without a GPU
        log->add_scalar("memory/peak_mib",
                        static_cast<double>(dev.is_cuda() ? cuda::max_memory_allocated(dev.index())
                                                          : cpu_memory_stats().peak_bytes_in_use) /
                            1048576,
                        epoch);
        for (const auto& [name, p] : model.named_parameters()) log->add_histogram(name, p, epoch);
        log->flush();
      }
    }
    if (log) {
      log->close();
      std::cout << "TensorBoard logs: " << log->file_path() << " (tensorboard --logdir " << args.logdir << ")\n";
    }
    // Peak memory of training and evaluation (docs/benchmarks.md compares it with and without --amp).
    if (dev.is_cuda())
      std::printf("peak memory: %.1f MiB allocated on %s\n",
                  static_cast<double>(cuda::max_memory_allocated(dev.index())) / 1048576, dev.to_string().c_str());
    else
      std::printf("peak memory: %.1f MiB in use by tensors\n",
                  static_cast<double>(cpu_memory_stats().peak_bytes_in_use) / 1048576);
    if (args.plan)
      std::printf("training-step peak: planned %s, measured %s (%+.1f%%)\n", mib(plan.peak_bytes).c_str(),
                  mib(train_peak).c_str(),
                  100.0 * (static_cast<double>(train_peak) - static_cast<double>(plan.peak_bytes)) /
                      static_cast<double>(plan.peak_bytes));
    if (!args.timeline.empty()) {
      memory::record_history(false);
      memory::dump_snapshot(args.timeline);
      std::cout << "memory timeline: " << args.timeline << " (" << memory::snapshot().allocations.size()
                << " allocations; python3 scripts/plot_memory.py " << args.timeline << " timeline.png)\n";
    }
    if (dev.is_cuda()) std::cout << cuda::memory_summary(dev);
    if (!args.save.empty()) {
      nn::save(model, args.save);
      std::cout << "saved " << args.save << "\n";
    }
  } catch (const Error& e) {
    std::cerr << "ember_mnist: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
