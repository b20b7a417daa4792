// Fuzz target: read_idx (IDX header, gzip or plain, through zlib's gzread).
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_clean([&] { (void)ember::data::read_idx(fuzz::as_file(data, size)); });
  return 0;
}
