// The README's example: a small network trained with Adam on a toy 3-class task.
#include <ember/ember.h>
#include <iostream>
using namespace ember;

int main() {
  manual_seed(0);
  Tensor x = randn({512, 20}), y = argmax(x.slice(1, 0, 3), 1);  // label: the largest of 3 features
  nn::Chain model{nn::Dense(20, 64, nn::relu), nn::Dense(64, 3)};
  optim::Adam opt(model.parameters(), {.lr = 1e-2});
  for (int step = 0; step <= 200; ++step) {
    Tensor loss = nn::cross_entropy(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (step % 50 == 0) std::cout << "step " << step << " loss " << loss.item() << "\n";
  }
  Tensor acc = mean(eq(argmax(model(x), 1), y).to(kFloat32));
  std::cout << "train accuracy " << acc.item() << "\n";
  return acc.item() > 0.9 ? 0 : 1;
}
