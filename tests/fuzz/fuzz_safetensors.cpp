// Fuzz target: the safetensors reader (length prefix, JSON header, dtypes, shapes, offsets).
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_clean([&] {
    std::map<std::string, std::string> meta;
    (void)ember::nn::load_tensors(fuzz::as_file(data, size), &meta);
  });
  return 0;
}
