// Fuzz target: the .npy reader (header parsing, dtype resolution, size checks, decoding), in memory and mapped.
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_clean([&] { (void)ember::data::parse_npy(data, size, "fuzz.npy"); });
  fuzz::expect_clean([&] { (void)ember::data::load_npy(fuzz::as_file(data, size), {.mmap = true}); });
  return 0;
}
