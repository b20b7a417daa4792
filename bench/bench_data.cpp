// Input-pipeline throughput (docs/benchmarks.md, "Data"): what the loader delivers per second when no model
// consumes it.
//   1. MmapDataset: a 1 GiB float32 .npy ([N, 3072], CIFAR-sized rows) written here, read through the DataLoader
//      (batch 256; sequential and shuffled order; 0 and 2 workers), in GB/s, with the resident-set growth; next to
//      load_npy (reading the whole file) and a plain memcpy of the same bytes, the machine's ceiling. The file was
//      just written, so it is in the page cache: this measures the mapping and the copy, not the disk.
//   2. CIFAR-10 augmentation (RandomCrop 32 pad 4, flip, ToFloat, Normalize) over 50,000 uint8 3x32x32 images, in
//      samples/s on 0, 1 and 2 workers.
// Each figure is the median of 3 epochs. Usage: ember_bench_data [dir for the temporary file, default /tmp]
#include <ember/ember.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "timing.h"

using namespace ember;
namespace T = ember::data::transforms;
using Clock = std::chrono::steady_clock;

namespace {

size_t rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmRSS:") {
      size_t kb = 0;
      f >> kb;
      return kb * 1024;
    }
    std::getline(f, key);
  }
  return 0;
}

// Median seconds of 3 runs of f.
template <class F>
double median_seconds(F&& f) {
  std::vector<double> t;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[1];
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : "/tmp";
  const std::string path = (dir / ("ember_bench_data_" + std::to_string(::getpid()) + ".npy")).string();
  set_num_threads(1);
  std::printf("threads: 1 compute thread; loader workers as listed\n\n");

  // 1. Memory-mapped reading.
  const int64_t rows = (int64_t{1} << 30) / (3072 * 4), cols = 3072;
  {
    manual_seed(0);
    data::save_npy(path, randn({rows, cols}));
  }
  const double gib = static_cast<double>(rows * cols * 4) / 1e9;
  std::printf("%-44s %10s %14s\n", "1 GiB float32 .npy (page cache warm)", "GB/s", "RSS growth MiB");
  {
    std::vector<char> a(static_cast<size_t>(rows * cols * 4)), b(a.size());
    std::memset(a.data(), 1, a.size());
    std::memset(b.data(), 2, b.size());
    const double s = median_seconds([&] { std::memcpy(b.data(), a.data(), a.size()); });
    std::printf("%-44s %10.2f %14s\n", "memcpy of the same bytes (ceiling)", gib / s, "-");
  }
  {
    const double s = median_seconds([&] { (void)data::load_npy(path); });
    std::printf("%-44s %10.2f %14s\n", "load_npy (whole file)", gib / s, "-");
  }
  for (bool shuffle : {false, true})
    for (int workers : {0, 2}) {
      data::MmapDataset ds(path);
      data::DataLoader loader(ds, {.batch_size = 256, .shuffle = shuffle, .num_workers = workers});
      const size_t before = rss_bytes();
      size_t peak = before;
      const double s = median_seconds([&] {
        for (auto [x, y] : loader) peak = std::max(peak, rss_bytes());
      });
      char label[64];
      std::snprintf(label, sizeof label, "MmapDataset, %s, %d workers", shuffle ? "shuffled" : "sequential", workers);
      std::printf("%-44s %10.2f %14.0f\n", label, gib / s, static_cast<double>(peak - before) / 1048576.0);
    }
  std::filesystem::remove(path);

  // 2. CIFAR-10 augmentation.
  std::printf("\n%-44s %10s\n", "CIFAR-10 augmentation, 50,000 images", "samples/s");
  const Tensor images = randint(0, 256, {50000, 3, 32, 32}, {.dtype = kUInt8});
  data::Transformed train(data::TensorDataset(images, randint(0, 10, {50000})),
                          T::Compose{T::RandomCrop(32, {.padding = 4}), T::RandomHorizontalFlip(), T::ToFloat(),
                                     T::Normalize({0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616})});
  for (int workers : {0, 1, 2}) {
    data::DataLoader loader(
        train, {.batch_size = 128, .shuffle = true, .num_workers = workers, .persistent_workers = workers > 0});
    const double s = median_seconds([&] {
      for (auto [x, y] : loader) (void)x;
    });
    std::printf("%-44s %10.0f\n", (std::to_string(workers) + " workers").c_str(), 50000.0 / s);
  }
  std::printf("\npeak RSS %.0f MiB\n", bench::peak_rss_mib());
  return 0;
}
