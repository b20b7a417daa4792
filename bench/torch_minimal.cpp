// The cross-check of torch_train.cpp (bench/train_table.sh runs both): the smallest libtorch program for the MLP
// configs — libtorch's own MNIST reader, a Sequential of Linear/ReLU on [batch, 784] inputs, cross-entropy, Adam
// 1e-3 — written the way a libtorch user would, with nothing shared with the other drivers. If the two disagree,
// a harness is wrong.
//   ember_torch_minimal --data DIR --batch 64|256 --hidden 128|1024 --threads N
// DIR holds the uncompressed Fashion-MNIST training files (train-images-idx3-ubyte, train-labels-idx1-ubyte), as
// torch::data::datasets::MNIST reads them. Prints: torch-minimal batch hidden threads samples_per_s
// (Use real images: libtorch on this workload runs ~25% slower on uniform random inputs than on images.)
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  int64_t batch = 64, hidden = 128;
  int threads = 1;
  const char* dir = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--data")) dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--batch")) batch = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--hidden")) hidden = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
  }
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  torch::nn::Sequential model =
      hidden == 1024
          ? torch::nn::Sequential(torch::nn::Linear(784, 1024), torch::nn::ReLU(), torch::nn::Linear(1024, 1024),
                                  torch::nn::ReLU(), torch::nn::Linear(1024, 10))
          : torch::nn::Sequential(torch::nn::Linear(784, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, 10));
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
  if (!dir) {
    std::fprintf(stderr, "ember_torch_minimal: --data DIR (uncompressed Fashion-MNIST) is required\n");
    return 2;
  }
  torch::data::datasets::MNIST mnist(dir);  // images [60000, 1, 28, 28] in [0, 1], labels int64
  const int64_t nb = 10240 / batch;
  const torch::Tensor x = mnist.images().slice(0, 0, nb * batch).reshape({nb, batch, 784}).contiguous();
  const torch::Tensor y = mnist.targets().slice(0, 0, nb * batch).reshape({nb, batch}).contiguous();
  auto step = [&](int64_t i) {
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x[i % nb]), y[i % nb]);
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < 20; ++i) step(i);
  // about three seconds of steps, whatever the size
  int64_t steps = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double secs = 0;
  while (secs < 3.0) {
    step(steps++);
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::printf("torch-minimal %lld %lld %d %.0f\n", static_cast<long long>(batch), static_cast<long long>(hidden),
              threads, static_cast<double>(steps * batch) / secs);
  return 0;
}
