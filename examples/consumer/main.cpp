// A user's program built against an installed ember (see CMakeLists.txt beside it).
#include <ember/ember.h>

#include <cmath>
#include <iostream>

int main() {
  ember::manual_seed(1);
  ember::Tensor x = ember::randn({8, 4});
  ember::Tensor w = ember::randn({3, 4});
  ember::Tensor y = ember::softmax(ember::linear(x, w, ember::zeros({3})), 1);
  // each row of a softmax sums to one
  double worst = 0;
  for (double s : ember::sum(y, {1}).to_vector<double>()) worst = std::max(worst, std::fabs(s - 1.0));
  if (worst > 1e-5) {
    std::cerr << "softmax rows do not sum to 1 (worst error " << worst << ")\n";
    return 1;
  }
  std::cout << "consumer ok: ember " << EMBER_VERSION << ", y " << y.shape() << "\n";
  return 0;
}
