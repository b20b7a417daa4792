// defines: read_idx. zlib's gzread reads gzip and, transparently, plain files, so one path serves both.
#include "ember/data/idx.h"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "ember/core/factory.h"
#include "ember/core/file_io.h"

namespace ember::data {
namespace {

struct GzFile {
  gzFile f = nullptr;
  ~GzFile() {
    if (f) gzclose(f);
  }
};

// Reads exactly n bytes or throws, naming the file and what was being read.
void read_exact(GzFile& g, const std::string& path, void* dst, size_t n, const char* what) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
    const int got = gzread(g.f, p, chunk);
    if (got < 0) {
      int err = 0;
      const char* msg = gzerror(g.f, &err);
      throw IOError(detail::str("read_idx: ", path, ": corrupt or unreadable data while reading the ", what, " (",
                                msg ? msg : "zlib error", ")"));
    }
    EMBER_CHECK(got > 0, IOError, "read_idx: ", path, ": file is truncated (ended while reading the ", what, ")");
    p += got;
    n -= static_cast<size_t>(got);
  }
}

uint32_t big_endian(const unsigned char* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

}  // namespace

Tensor read_idx(const std::string& path) {
  GzFile g;
  // Opened here, not by gzopen: a FIFO, a directory or a device is refused before any read (a FIFO would block
  // forever waiting for a writer).
  const int fd = open_for_reading(path, "read_idx");
  g.f = gzdopen(fd, "rb");  // owns fd from here on
  if (g.f == nullptr) {
    ::close(fd);
    throw IOError(detail::str("read_idx: cannot read ", path, " (out of memory for zlib's buffers)"));
  }
  // Header: two zero bytes, a type code, the number of dims, then each dim as a big-endian uint32.
  unsigned char magic[4];
  read_exact(g, path, magic, 4, "header");
  EMBER_CHECK(magic[0] == 0 && magic[1] == 0, IOError, "read_idx: ", path,
              ": not an IDX file (the magic number must start with two zero bytes)");
  DType dtype;
  size_t elem = 0;
  switch (magic[2]) {
    case 0x08:
      dtype = kUInt8;
      elem = 1;
      break;
    case 0x0C:
      dtype = kInt32;
      elem = 4;
      break;
    case 0x0D:
      dtype = kFloat32;
      elem = 4;
      break;
    default:
      throw IOError(detail::str("read_idx: ", path, ": unsupported IDX element type 0x", std::hex,
                                static_cast<int>(magic[2]), " (supported: 0x08 uint8, 0x0C int32, 0x0D float32)"));
  }
  const int ndim = magic[3];
  EMBER_CHECK(ndim >= 1 && ndim <= 8, IOError, "read_idx: ", path, ": implausible number of dims ", ndim);
  Shape shape;
  size_t count = 1;
  for (int d = 0; d < ndim; ++d) {
    unsigned char b[4];
    read_exact(g, path, b, 4, "dims");
    const uint32_t s = big_endian(b);
    EMBER_CHECK(s < (1u << 31), IOError, "read_idx: ", path, ": implausible size ", s, " in dim ", d);
    shape.push_back(s);
    count *= s;
    EMBER_CHECK(count < (size_t{1} << 36), IOError, "read_idx: ", path, ": implausibly large (", shape, ")");
  }
  // Read before allocating the tensor, in pieces, so that a forged header declaring gigabytes fails at the end of
  // the actual data instead of allocating the declared size first.
  const size_t bytes = count * elem;
  std::vector<unsigned char> data;
  for (size_t done = 0; done < bytes;) {
    const size_t chunk = std::min<size_t>(bytes - done, size_t{16} << 20);
    data.resize(done + chunk);
    read_exact(g, path, data.data() + done, chunk, "data");
    done += chunk;
  }
  Tensor t = empty(shape, {.dtype = dtype});
  if (bytes > 0) std::memcpy(t.data_ptr(), data.data(), bytes);
  // IDX stores multi-byte values big-endian.
  if (elem == 4) {
    auto* p = static_cast<uint32_t*>(t.data_ptr());
    for (size_t i = 0; i < count; ++i) p[i] = __builtin_bswap32(p[i]);
  }
  return t;
}

}  // namespace ember::data
