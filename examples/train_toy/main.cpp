// The README's example: a two-layer network trained with autograd and plain SGD on a toy 3-class task.
#include <ember/ember.h>
#include <iostream>
using namespace ember;

int main() {
  manual_seed(0);
  Tensor x = randn({512, 20}), y = argmax(x.slice(1, 0, 3), 1);            // label: the largest of 3 features
  Tensor onehot = eq(y.unsqueeze(1), arange(3).unsqueeze(0)).to(kFloat32);
  Tensor w1 = (randn({64, 20}) * 0.2).requires_grad_(), b1 = zeros({64}).requires_grad_();
  Tensor w2 = (randn({3, 64}) * 0.2).requires_grad_(), b2 = zeros({3}).requires_grad_();
  for (int step = 0; step <= 300; ++step) {
    Tensor logits = linear(relu(linear(x, w1, b1)), w2, b2);
    Tensor loss = -mean(sum(log_softmax(logits, 1) * onehot, {1}));      // cross-entropy
    loss.backward();
    NoGradGuard no_grad;                                                   // the update is not recorded
    for (Tensor p : {w1, b1, w2, b2}) { p.sub_(p.grad() * 0.5); p.set_grad({}); }
    if (step % 100 == 0) std::cout << "step " << step << " loss " << loss.item() << "\n";
  }
  Tensor acc = mean(eq(argmax(linear(relu(linear(x, w1, b1)), w2, b2), 1), y).to(kFloat32));
  std::cout << "train accuracy " << acc.item() << "\n";
  return acc.item() > 0.9 ? 0 : 1;
}
