// Fuzz target: the CIFAR-10 batch-file parser (record size, labels).
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_clean([&] { (void)ember::data::CIFAR10::parse_batch(data, size, "fuzz.bin"); });
  return 0;
}
