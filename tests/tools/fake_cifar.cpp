// Writes a small CIFAR-10-format dataset (data_batch_1..5.bin, test_batch.bin: label byte + 3x32x32 uint8) for
// the example's test: class k is a colour (a fixed RGB triple) with a diagonal stripe and noise, learnable in an
// epoch, so the test can ask for accuracy well above chance.
//   ember_fake_cifar DIR [records per file]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ember_fake_cifar DIR [records per file]\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const int per_file = argc > 2 ? std::atoi(argv[2]) : 200;
  std::filesystem::create_directories(dir);
  static const int colour[10][3] = {{200, 40, 40},  {40, 200, 40},   {40, 40, 200},  {200, 200, 40}, {200, 40, 200},
                                    {40, 200, 200}, {120, 120, 120}, {230, 140, 40}, {90, 40, 160},  {20, 20, 20}};
  unsigned state = 12345;
  auto noise = [&] {  // a small LCG: the same files on every platform
    state = state * 1103515245u + 12345u;
    return static_cast<int>((state >> 16) % 61) - 30;
  };
  const char* names[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                         "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
  for (const char* name : names) {
    std::ofstream f(dir / name, std::ios::binary);
    for (int r = 0; r < per_file; ++r) {
      const int k = (r * 7 + 3) % 10;
      f.put(static_cast<char>(k));
      for (int c = 0; c < 3; ++c)
        for (int h = 0; h < 32; ++h)
          for (int w = 0; w < 32; ++w) {
            int v = colour[k][c] + ((h + w + k) % 8 < 2 ? 30 : 0) + noise();
            f.put(static_cast<char>(v < 0 ? 0 : v > 255 ? 255 : v));
          }
    }
    if (!f) {
      std::fprintf(stderr, "ember_fake_cifar: cannot write %s\n", (dir / name).c_str());
      return 1;
    }
  }
  std::printf("wrote %d records per file to %s\n", per_file, dir.c_str());
  return 0;
}
