// Trains one of the library's vision models (models::ResNet, models::ViT) on CIFAR-10 (the binary version, through
// data::CIFAR10) with random crops and flips, AdamW with a cosine schedule, optionally bf16 autocast and activation
// checkpointing, and reports test accuracy each epoch:
//   ember_vision --data DIR [--model resnet18|resnet50|vit] [--epochs N] [--batch-size N] [--lr X] [--amp none|bf16]
//                [--checkpoint] [--pretrained FILE] [--device cpu|cuda|auto] [--workers N] [--threads N] [--limit N]
// resnet18 / resnet50 are torchvision's networks with 10 classes (on 32 x 32 images their stem leaves 8 x 8 maps);
// vit is a small ViT for 32 x 32 images (patches of 4, width 192, 6 blocks, 3 heads). --pretrained loads a
// torchvision / timm state dict saved as safetensors (models::load_pretrained, non-strict: a 1000-class head is
// left out). Get CIFAR-10 from https://www.cs.toronto.edu/~kriz/cifar.html ("CIFAR-10 binary version").
#include <ember/ember.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

using namespace ember;
namespace T = ember::data::transforms;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string data, model = "resnet18", device = "auto", amp = "none", pretrained;
  int epochs = 10, workers = 2, threads = 0;
  int64_t batch_size = 128, limit = 0;
  double lr = 1e-3, weight_decay = 0.05;
  bool checkpoint = false;
  uint64_t seed = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "ember_vision: " << why << "\n"
            << "usage: ember_vision --data DIR [--model resnet18|resnet50|vit] [--epochs N] [--batch-size N] [--lr X]\n"
            << "                    [--weight-decay X] [--amp none|bf16] [--checkpoint] [--pretrained FILE]\n"
            << "                    [--device cpu|cuda|auto] [--workers N] [--threads N] [--seed N] [--limit N]\n";
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "-h" || k == "--help") usage("help");
    if (k == "--checkpoint") {
      a.checkpoint = true;
      continue;
    }
    if (i + 1 >= argc) usage("missing value for " + k);
    const std::string v = argv[++i];
    try {
      if (k == "--data") a.data = v;
      else if (k == "--model") a.model = v;
      else if (k == "--device") a.device = v;
      else if (k == "--amp") a.amp = v;
      else if (k == "--pretrained") a.pretrained = v;
      else if (k == "--epochs") a.epochs = std::stoi(v);
      else if (k == "--workers") a.workers = std::stoi(v);
      else if (k == "--threads") a.threads = std::stoi(v);
      else if (k == "--batch-size") a.batch_size = std::stoll(v);
      else if (k == "--limit") a.limit = std::stoll(v);
      else if (k == "--lr") a.lr = std::stod(v);
      else if (k == "--weight-decay") a.weight_decay = std::stod(v);
      else if (k == "--seed") a.seed = std::stoull(v);
      else usage("unknown flag " + k);
    } catch (const std::logic_error&) {
      usage("bad value '" + v + "' for " + k);
    }
  }
  if (a.data.empty()) usage("--data DIR is required (the folder with data_batch_1.bin ... test_batch.bin)");
  if (a.model != "resnet18" && a.model != "resnet50" && a.model != "vit") usage("--model: resnet18, resnet50 or vit");
  if (a.amp != "none" && a.amp != "bf16") usage("--amp: none or bf16");
  if (a.epochs < 1 || a.batch_size < 1 || a.workers < 0 || !(a.lr > 0)) usage("bad --epochs/--batch-size/--workers/--lr");
  return a;
}

// The model, with checkpointing by stage or block when asked (the classes' set_grad_checkpointing).
std::shared_ptr<nn::Module> make_model(const Args& a) {
  if (a.model == "vit") {
    auto vit = std::make_shared<models::ViT>(models::ViTConfig{.image_size = 32, .patch_size = 4, .dim = 192,
                                                               .depth = 6, .heads = 3, .mlp_ratio = 4,
                                                               .num_classes = 10});
    vit->set_grad_checkpointing(a.checkpoint);
    return vit;
  }
  auto net = std::make_shared<models::ResNet>(a.model == "resnet18" ? models::resnet18({.num_classes = 10})
                                                                    : models::resnet50({.num_classes = 10}));
  net->set_grad_checkpointing(a.checkpoint);
  return net;
}

// Accuracy over a loader, without recording a graph.
template <class L>
double accuracy(nn::Module& model, L& loader, bool bf16) {
  NoGradGuard no_grad;
  std::optional<amp::AutocastGuard> autocast;
  if (bf16) autocast.emplace(kBFloat16);
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

    std::shared_ptr<nn::Module> model = make_model(args);
    if (!args.pretrained.empty()) {
      const nn::LoadResult r = models::load_pretrained(*model, args.pretrained, {.strict = false});
      std::cout << "loaded " << args.pretrained << ": " << r.missing.size() << " missing, " << r.unexpected.size()
                << " unused\n";
    }
    model->to(dev);
    optim::AdamW opt(model->parameters(), {.lr = args.lr, .weight_decay = args.weight_decay});
    const int64_t nb = train_loader.size();
    optim::CosineAnnealingLR sched(opt, {.T_max = args.epochs * nb});
    std::cout << args.model << " (" << model->num_parameters() << " parameters) on " << dev << ", "
              << get_num_threads() << " threads, batch " << args.batch_size << ", AdamW lr " << args.lr
              << (args.amp == "bf16" ? ", bf16 autocast" : "") << (args.checkpoint ? ", checkpointed" : "") << ", "
              << train.size() << " training / " << test.size() << " test images\n";

    for (int epoch = 1; epoch <= args.epochs; ++epoch) {
      const auto t0 = Clock::now();
      Tensor loss_sum = zeros({}, {.device = dev});  // read back once an epoch: no sync per step
      int64_t steps = 0, seen = 0;
      for (auto [x, y] : train_loader) {
        Tensor loss;
        {
          std::optional<amp::AutocastGuard> autocast;
          if (args.amp == "bf16") autocast.emplace(kBFloat16);
          loss = nn::cross_entropy((*model)(x), y);
        }
        opt.zero_grad();
        loss.backward();
        opt.step();
        sched.step();
        loss_sum = loss_sum + loss.detach().to(kFloat32);
        ++steps;
        seen += x.size(0);
      }
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      const double acc = accuracy(*model, test_loader, args.amp == "bf16");
      std::printf("epoch %d: train loss %.4f, test accuracy %.2f%%, %.1f s (%.0f images/s)\n", epoch,
                  loss_sum.cpu().item<float>() / static_cast<double>(std::max<int64_t>(steps, 1)), 100 * acc, secs,
                  static_cast<double>(seen) / secs);
    }
  } catch (const Error& e) {
    std::cerr << "ember_vision: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
