// Fashion-MNIST classified with tensor ops alone (no training): nearest class mean and 1-nearest-neighbour
// by one big distance GEMM.
// Usage: ember_knn [--data DIR] [--knn-test N] [--threads T]
#include <ember/ember.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

using namespace ember;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
// Squared distances [n, m] between the rows of a [n, d] and b [m, d]: |a|^2 + |b|^2 - 2 a b^T.
Tensor sq_distances(const Tensor& a, const Tensor& b) {
  Tensor an = sum(a * a, {1}, true);      // [n, 1]
  Tensor bn = sum(b * b, {1}, true).t();  // [1, m]
  return an + bn - 2 * matmul(a, b.t());
}
}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/usr/share/datasets/fashion-mnist";
  int64_t knn_test = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--data") dir = argv[i + 1];
    else if (a == "--knn-test") knn_test = std::atoll(argv[i + 1]);
    else if (a == "--threads") set_num_threads(std::atoi(argv[i + 1]));
    else {
      std::cerr << "unknown flag " << a << "\n";
      return 2;
    }
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    // Images as float32 in [0, 1], one row of 784 pixels per image; labels as int64.
    Tensor xtr = data::read_idx(dir + "/train-images-idx3-ubyte.gz").to(kFloat32).reshape({-1, 784}) / 255;
    Tensor ytr = data::read_idx(dir + "/train-labels-idx1-ubyte.gz").to(kInt64);
    Tensor xte = data::read_idx(dir + "/t10k-images-idx3-ubyte.gz").to(kFloat32).reshape({-1, 784}) / 255;
    Tensor yte = data::read_idx(dir + "/t10k-labels-idx1-ubyte.gz").to(kInt64);
    std::cout << "Fashion-MNIST: train " << xtr.shape() << ", test " << xte.shape() << " (read in " << seconds_since(t0)
              << " s, " << get_num_threads() << " threads)\n";

    // (1) Nearest class mean: the mean image of each class, then the closest mean for each test image.
    t0 = std::chrono::steady_clock::now();
    Tensor onehot = eq(ytr.unsqueeze(1), arange(10).unsqueeze(0)).to(kFloat32);  // [60000, 10]
    Tensor means = matmul(onehot.t(), xtr) / sum(onehot, {0}).unsqueeze(1);      // [10, 784]
    Tensor pred = argmin(sq_distances(xte, means), 1);
    double acc = mean(eq(pred, yte).to(kFloat32)).item();
    std::cout << "nearest class mean: test accuracy " << 100 * acc << "% (" << seconds_since(t0) << " s)\n";

    // (2) 1-nearest neighbour on the first knn_test test images: one [n, 60000] distance matrix by GEMM.
    t0 = std::chrono::steady_clock::now();
    knn_test = std::min<int64_t>(knn_test, xte.size(0));
    Tensor xq = xte.slice(0, 0, knn_test), yq = yte.slice(0, 0, knn_test);
    Tensor nn = argmin(sq_distances(xq, xtr), 1);
    double acc_knn = mean(eq(index_select(ytr, 0, nn), yq).to(kFloat32)).item();
    double secs = seconds_since(t0);
    std::cout << "1-nearest neighbour (" << knn_test << " test images): accuracy " << 100 * acc_knn << "% (" << secs
              << " s, " << 2.0 * knn_test * 60000 * 784 / secs / 1e9 << " GFLOP/s in the distance GEMM and friends)\n";
    std::cout << "first predictions: " << index_select(ytr, 0, nn).slice(0, 0, 10) << "\n";
    std::cout << cpu_memory_summary();
  } catch (const Error& e) {
    std::cerr << "ember_knn: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
