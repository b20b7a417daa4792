// A user's program built against an installed ember (see CMakeLists.txt beside it): it trains a small model on
// the CPU and says whether CUDA is usable here, and why not. It must start and train on a machine without any
// CUDA library (the install test runs it with the CUDA plugin removed).
#include <ember/ember.h>

#include <cmath>
#include <iostream>

using namespace ember;

int main() {
  manual_seed(1);
  Tensor x = randn({256, 8}), y = argmax(x.slice(1, 0, 3), 1);  // label: the largest of 3 features
  nn::Chain model{nn::Dense(8, 32, nn::relu), nn::Dense(32, 3)};
  optim::Adam opt(model.parameters(), {.lr = 1e-2});
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    Tensor loss = nn::cross_entropy(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  if (!(last < 0.5 * first)) {
    std::cerr << "the loss did not fall: " << first << " -> " << last << "\n";
    return 1;
  }
  std::cout << "cuda: " << (cuda::is_available() ? "available" : "unavailable (" + cuda::unavailable_reason() + ")")
            << "\n";
  std::cout << "consumer ok: ember " << EMBER_VERSION << ", loss " << first << " -> " << last << "\n";
  return 0;
}
