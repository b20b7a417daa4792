// Fuzz target: the .npz reader (ZIP directory, ZIP64 fields, inflate, CRC, then each member's .npy).
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_clean([&] { (void)ember::data::parse_npz(data, size, "fuzz.npz"); });
  return 0;
}
