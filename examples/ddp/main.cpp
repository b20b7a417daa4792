// Data-parallel training of the MNIST MLP on real Fashion-MNIST, one process per rank (docs/distributed.md):
//   mpirun -np 2 build/examples/ember_ddp [--epochs 2] [--data /usr/share/datasets/fashion-mnist]
// Each rank trains on its DistributedSampler shard with one thread; DistributedDataParallel averages the
// gradients; rank 0 prints the loss, samples/s over all ranks, and the test accuracy of the shared model.
#include <ember/ember.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

using namespace ember;

int main(int argc, char** argv) {
  std::string root = "/usr/share/datasets/fashion-mnist";
  int epochs = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--epochs") == 0) epochs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--data") == 0) root = argv[i + 1];
  }
  dist::init();
  set_num_threads(1);  // one core per rank
  const int rank = dist::rank(), world = dist::world_size();

  manual_seed(0);  // DDP broadcasts rank 0's weights anyway
  nn::Chain model{nn::Flatten(), nn::Dense(784, 128, nn::relu), nn::Dense(128, 10)};
  dist::DistributedDataParallel ddp(model);
  optim::Adam opt(ddp.parameters(), {.lr = 1e-3});

  data::MNIST train(root, data::Split::Train), test(root, data::Split::Test);
  data::DataLoader loader(train, {.batch_size = 64,
                                  .sampler = std::make_shared<data::DistributedSampler>(
                                      rank, world, data::DistributedSamplerOptions{.seed = 1})});
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    Tensor loss_sum = zeros({1});
    int64_t batches = 0;
    for (auto [x, y] : loader) {
      opt.zero_grad();
      Tensor loss = nn::cross_entropy(ddp(x), y);
      loss.backward();
      opt.step();
      loss_sum.add_(loss.detach().reshape({1}));
      ++batches;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    dist::all_reduce(loss_sum, {.op = dist::ReduceOp::Avg});
    // Accuracy of the (identical) model on the test set, each rank on its shard, summed.
    NoGradGuard no_grad;
    Tensor correct = zeros({1});
    data::DataLoader test_loader(
        test, {.batch_size = 1000,
               .sampler = std::make_shared<data::DistributedSampler>(
                   rank, world, data::DistributedSamplerOptions{.shuffle = false, .drop_last = true})});
    for (auto [x, y] : test_loader) correct.add_(sum(eq(argmax(model(x), 1), y).to(kFloat32)).reshape({1}));
    dist::all_reduce(correct);
    const double tested = static_cast<double>(test.size() / world * world);
    if (rank == 0)
      std::printf("epoch %d: loss %.4f, %.0f samples/s on %d ranks, test accuracy %.2f%%\n", epoch,
                  loss_sum.item<float>() / static_cast<double>(batches),
                  static_cast<double>(loader.size() * 64 * world) / secs, world,
                  100.0 * correct.item<float>() / tested);
  }
  dist::finalize();
  return 0;
}
