// The cross-check of torch_train.cpp (bench/train_table.sh runs both): the smallest libtorch program for the MLP
// configs — a Sequential of Linear/ReLU on random [batch, 784] inputs, cross-entropy, Adam 1e-3 — written the way
// a libtorch user would, with nothing shared with the other drivers. If the two disagree, a harness is wrong.
//   ember_torch_minimal --batch 64|256 --hidden 128|1024 --threads N
// Prints: torch-minimal batch hidden threads samples_per_s
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  int64_t batch = 64, hidden = 128;
  int threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--batch")) batch = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--hidden")) hidden = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
  }
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  torch::nn::Sequential model = hidden == 1024
                                    ? torch::nn::Sequential(torch::nn::Linear(784, 1024), torch::nn::ReLU(),
                                                            torch::nn::Linear(1024, 1024), torch::nn::ReLU(),
                                                            torch::nn::Linear(1024, 10))
                                    : torch::nn::Sequential(torch::nn::Linear(784, hidden), torch::nn::ReLU(),
                                                            torch::nn::Linear(hidden, 10));
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
  const torch::Tensor x = torch::rand({160, batch, 784});
  const torch::Tensor y = torch::randint(0, 10, {160, batch}, torch::kInt64);
  auto step = [&](int64_t i) {
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x[i % 160]), y[i % 160]);
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
