// defines: what the fuzz targets share: a file holding the fuzzer's bytes, for the readers that take a path
// (an in-memory file from memfd_create, named through /proc/self/fd, so no disk is touched), and `expect_clean`,
// which runs a reader and lets through only ember::Error — anything else (a crash, a sanitizer report, another
// exception type) is a finding.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <ember/ember.h>

namespace fuzz {

// The path of a file whose content is exactly (data, size); reused across inputs.
inline std::string as_file(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("ember_fuzz", 0);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) std::abort();
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

// Runs f; an ember::Error (the readers' documented failure) is fine, nothing else is caught.
template <class F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const ember::Error&) {}
}

}  // namespace fuzz
