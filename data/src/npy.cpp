// defines: the .npy header parser, load_npy / parse_npy / save_npy. The format: "\x93NUMPY", a version byte pair,
// a little-endian header length (2 bytes in 1.0, 4 in 2.0/3.0), then a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces to a multiple of 64, then the data.
#include "ember/data/npy.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "bits.h"
#include "ember/core/factory.h"
#include "ember/core/file_io.h"
#include "ember/core/raw_ops.h"
#include "mapped_file.h"

namespace ember::data {
namespace {

using ember::detail::str;

// A recursive-descent reader for the one dict literal a .npy header holds. Every failure is an IOError that
// quotes the header, so a user can see what the writer produced.
class HeaderDict {
 public:
  HeaderDict(std::string text, const std::string& what) : s_(std::move(text)), what_(what) {}

  void parse(NpyHeader& h) {
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = quoted();
      expect(':');
      if (key == "descr") {
        skip_space();
        if (peek() != '\'' && peek() != '"') fail("a structured or object 'descr' (only plain numeric dtypes load)");
        h.descr = quoted();
        seen_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        seen_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        seen_shape = true;
      } else {
        fail("an unknown key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      skip_space();
      if (peek() != '}') fail("',' or '}' after a value");
    }
    expect('}');
    if (!seen_descr || !seen_order || !seen_shape) fail("all of 'descr', 'fortran_order' and 'shape'");
  }

 private:
  [[noreturn]] void fail(const std::string& wanted) const {
    std::string shown = s_.substr(0, 200);
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
    throw IOError(str("load_npy: ", what_, ": malformed .npy header (expected ", wanted, " at character ", i_, "): \"",
                      shown, s_.size() > 200 ? "..." : "", "\""));
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("'") + c + "'");
    ++i_;
  }
  std::string quoted() {
    skip_space();
    const char q = peek();
    if (q != '\'' && q != '"') fail("a quoted string");
    const size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos || end - i_ > 64) fail("a closing quote");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    fail("True or False");
  }
  Shape tuple() {
    expect('(');
    Shape shape;
    for (;;) {
      skip_space();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') fail("a non-negative integer size");
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        v = v * 10 + (peek() - '0');
        if (v > (int64_t{1} << 48)) fail("a size below 2^48");
        ++i_;
      }
      skip_space();
      if (peek() == 'L') ++i_;  // Python 2 writers
      if (shape.size() >= 32) fail("at most 32 dims");
      shape.push_back(v);
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != ')') fail("',' or ')' in the shape");
    }
    ++i_;
    return shape;
  }

  std::string s_;
  const std::string& what_;
  size_t i_ = 0;
};

// The Ember dtype a NumPy descr ("<f4") loads as.
void resolve_dtype(NpyHeader& h, const std::string& what) {
  const std::string& d = h.descr;
  auto unsupported = [&](const char* why) {
    throw IOError(str("load_npy: ", what, ": NumPy dtype '", d, "' ", why,
                      " (loadable: float32, float64, float16, int64, int32, uint8, bool; int8, int16, uint16 and "
                      "uint32 load widened)"));
  };
  if (d.size() < 3 || d.size() > 4 || std::string("<>|=").find(d[0]) == std::string::npos)
    unsupported("is not a plain numeric dtype");
  const char order = d[0], kind = d[1];
  const std::string width = d.substr(2);
  int n = 0;
  for (char c : width) {
    if (c < '0' || c > '9') unsupported("is not a plain numeric dtype");
    n = n * 10 + (c - '0');
  }
  h.file_itemsize = static_cast<size_t>(n);
  struct Row {
    char kind;
    int size;
    DType dtype;
    bool widened;
  };
  static constexpr Row kRows[] = {
      {'f', 4, kFloat32, false}, {'f', 8, kFloat64, false}, {'f', 2, kFloat16, false}, {'i', 8, kInt64, false},
      {'i', 4, kInt32, false},   {'u', 1, kUInt8, false},   {'b', 1, kBool, false},    {'i', 1, kInt32, true},
      {'i', 2, kInt32, true},    {'u', 2, kInt32, true},    {'u', 4, kInt64, true},
  };
  for (const Row& r : kRows) {
    if (r.kind == kind && r.size == n) {
      h.dtype = r.dtype;
      h.widened = r.widened;
      const bool big = order == '>' || (order == '=' && std::endian::native == std::endian::big);
      h.swap_bytes = n > 1 && big != (std::endian::native == std::endian::big);
      if (order == '|' && n > 1) unsupported("has no byte order ('|') but a multi-byte width");
      return;
    }
  }
  unsupported(kind == 'u' && n == 8 ? "(uint64) has no Ember dtype that holds all its values"
              : kind == 'c'         ? "(complex) is not supported"
                                    : "is not supported");
}

template <class T>
T load_swapped(const unsigned char* p, bool swap) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  if (swap) {
    if constexpr (sizeof(T) == 2) v = std::bit_cast<T>(__builtin_bswap16(std::bit_cast<uint16_t>(v)));
    if constexpr (sizeof(T) == 4) v = std::bit_cast<T>(__builtin_bswap32(std::bit_cast<uint32_t>(v)));
    if constexpr (sizeof(T) == 8) v = std::bit_cast<T>(__builtin_bswap64(std::bit_cast<uint64_t>(v)));
  }
  return v;
}

// Copies n elements in file layout into dst (laid out as h.dtype), converting width and byte order.
void decode(const NpyHeader& h, const unsigned char* src, void* dst, size_t n) {
  if (h.dtype == kBool) {
    // A C++ bool must hold 0 or 1: any other byte would be undefined behaviour later.
    auto* out = static_cast<unsigned char*>(dst);
    for (size_t i = 0; i < n; ++i) out[i] = src[i] != 0;
    return;
  }
  if (!h.widened) {
    std::memcpy(dst, src, n * h.file_itemsize);
    if (!h.swap_bytes) return;
    auto* p = static_cast<unsigned char*>(dst);
    const size_t w = h.file_itemsize;
    for (size_t i = 0; i < n; ++i)
      for (size_t a = 0, b = w - 1; a < b; ++a, --b) std::swap(p[i * w + a], p[i * w + b]);
    return;
  }
  // By kind and the width resolve_dtype parsed, never by the descr's spelling ("<u02" is a uint16 too).
  const char kind = h.descr[1];
  auto widen = [&]<class From, class To>() {
    auto* out = static_cast<To*>(dst);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<To>(load_swapped<From>(src + i * sizeof(From), h.swap_bytes));
  };
  if (kind == 'i' && h.file_itemsize == 1) widen.template operator()<int8_t, int32_t>();
  else if (kind == 'i' && h.file_itemsize == 2) widen.template operator()<int16_t, int32_t>();
  else if (kind == 'u' && h.file_itemsize == 2) widen.template operator()<uint16_t, int32_t>();
  else if (kind == 'u' && h.file_itemsize == 4) widen.template operator()<uint32_t, int64_t>();
  else throw InternalError(str("load_npy: no widening for '", h.descr, "'"));
}

Shape reversed(const Shape& s) {
  Shape r;
  for (size_t i = s.size(); i-- > 0;) r.push_back(s[i]);
  return r;
}

std::vector<int64_t> reverse_dims(size_t n) {
  std::vector<int64_t> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<int64_t>(n - 1 - i);
  return d;
}

}  // namespace

NpyHeader parse_npy_header(const void* data, size_t size, const std::string& what) {
  const auto* p = static_cast<const unsigned char*>(data);
  static constexpr unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  EMBER_CHECK(size >= 10 && std::memcmp(p, kMagic, 6) == 0, IOError, "load_npy: ", what,
              ": not a .npy file (it must start with \"\\x93NUMPY\")");
  const int major = p[6];
  EMBER_CHECK(major >= 1 && major <= 3, IOError, "load_npy: ", what, ": unsupported .npy format version ", major, ".",
              int{p[7]}, " (supported: 1.0, 2.0, 3.0)");
  const size_t preamble = major == 1 ? 10 : 12;
  EMBER_CHECK(size >= preamble, IOError, "load_npy: ", what, ": file is truncated (ended in the header)");
  const size_t hlen = detail::load_le(p + 8, major == 1 ? 2 : 4);
  EMBER_CHECK(hlen <= size - preamble, IOError, "load_npy: ", what, ": file is truncated (the header declares ", hlen,
              " bytes, ", size - preamble, " follow)");
  NpyHeader h;
  HeaderDict(std::string(reinterpret_cast<const char*>(p + preamble), hlen), what).parse(h);
  resolve_dtype(h, what);
  h.data_offset = preamble + hlen;
  // The element count, and the span (zeros counted as one: what strides are made of), must not overflow.
  size_t numel = 1, span = itemsize(h.dtype);
  for (int64_t s : h.shape)
    EMBER_CHECK(!__builtin_mul_overflow(numel, static_cast<size_t>(s), &numel) &&
                    !__builtin_mul_overflow(span, static_cast<size_t>(std::max<int64_t>(s, 1)), &span) &&
                    span < (size_t{1} << 62),
                IOError, "load_npy: ", what, ": shape ", h.shape, " overflows");
  EMBER_CHECK(!__builtin_mul_overflow(numel, h.file_itemsize, &h.data_bytes), IOError, "load_npy: ", what, ": shape ",
              h.shape, " overflows");
  EMBER_CHECK(h.data_bytes <= size - h.data_offset, IOError, "load_npy: ", what, ": file is truncated (shape ", h.shape,
              " of '", h.descr, "' needs ", h.data_bytes, " data bytes, ", size - h.data_offset, " follow)");
  return h;
}

Tensor parse_npy(const void* data, size_t size, const std::string& what) {
  const NpyHeader h = parse_npy_header(data, size, what);
  const bool fortran = h.fortran_order && h.shape.size() > 1;
  Tensor t = empty(fortran ? reversed(h.shape) : h.shape, {.dtype = h.dtype});
  if (t.numel() > 0)
    decode(h, static_cast<const unsigned char*>(data) + h.data_offset, t.data_ptr(), static_cast<size_t>(t.numel()));
  return fortran ? raw::contiguous(raw::permute(t, reverse_dims(h.shape.size()))) : t;
}

Tensor load_npy(const std::string& path, NpyLoadOptions options) {
  using detail::MappedFile;
  if (!options.mmap) {
    auto file = MappedFile::open(path, MappedFile::Mode::ReadOnly, "load_npy");
    return parse_npy(file->data(), file->size(), path);
  }
  auto file = MappedFile::open(path, MappedFile::Mode::CopyOnWrite, "load_npy");
  const NpyHeader h = parse_npy_header(file->data(), file->size(), path);
  EMBER_CHECK(!h.widened && !h.swap_bytes, IOError, "load_npy: ", path, ": cannot map '", h.descr, "' data (it needs ",
              h.widened ? "widening" : "byte swapping", " to become ", h.dtype, "); load it without .mmap");
  unsigned char* base = file->mutable_data() + h.data_offset;
  EMBER_CHECK(reinterpret_cast<uintptr_t>(base) % itemsize(h.dtype) == 0, IOError, "load_npy: ", path,
              ": cannot map: the data starts at byte ", h.data_offset, ", not aligned to its ", itemsize(h.dtype),
              "-byte items; load it without .mmap");
  const bool fortran = h.fortran_order && h.shape.size() > 1;
  const Shape stored = fortran ? reversed(h.shape) : h.shape;
  if (h.data_bytes == 0) return empty(h.shape, {.dtype = h.dtype});
  if (h.dtype == kBool) {
    // Checked once here so that the mapped bytes are valid bools (a scan of the data; bool arrays are rare).
    for (size_t i = 0; i < h.data_bytes; ++i)
      EMBER_CHECK(base[i] <= 1, IOError, "load_npy: ", path, ": bool data holds byte ", int{base[i]}, " at element ", i,
                  " (only 0 and 1 are bools); load it without .mmap to normalise it");
  }
  Tensor t = from_blob(base, stored, {.dtype = h.dtype}, [file](void*) {});
  return fortran ? raw::permute(t, reverse_dims(h.shape.size())) : t;
}

void save_npy(const std::string& path, const Tensor& t) {
  EMBER_CHECK_VALUE(t.defined(), "save_npy: ", path, ": the tensor is undefined");
  const char* descr = nullptr;
  switch (t.dtype()) {
    case kFloat32:
      descr = "<f4";
      break;
    case kFloat64:
      descr = "<f8";
      break;
    case kFloat16:
      descr = "<f2";
      break;
    case kInt64:
      descr = "<i8";
      break;
    case kInt32:
      descr = "<i4";
      break;
    case kUInt8:
      descr = "|u1";
      break;
    case kBool:
      descr = "|b1";
      break;
    case kBFloat16:
      throw DTypeError(str("save_npy: ", path, ": NumPy has no bfloat16 dtype; save t.to(kFloat32) instead"));
  }
  static_assert(std::endian::native == std::endian::little, "save_npy writes the host's bytes as little-endian");
  Tensor host = raw::contiguous(t.device().is_cpu() ? t : raw::to_device(t, Device::cpu()));
  std::string dict = str("{'descr': '", descr, "', 'fortran_order': False, 'shape': (");
  for (size_t i = 0; i < t.shape().size(); ++i) dict += str(i ? ", " : "", t.shape()[i]);
  dict += t.shape().size() == 1 ? ",), }" : "), }";
  // Pad with spaces and end with '\n' so that the data starts on a 64-byte boundary (what NumPy writes).
  const bool v2 = dict.size() + 1 + 10 > 65535;
  const size_t preamble = v2 ? 12 : 10;
  dict.append(63 - (preamble + dict.size()) % 64, ' ');
  dict += '\n';
  std::string head("\x93NUMPY", 6);
  head += static_cast<char>(v2 ? 2 : 1);
  head += '\0';
  for (int i = 0; i < (v2 ? 4 : 2); ++i) head += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  // Atomically, as save() does: a crash or a full disk leaves the old file (or the new one), never a part.
  write_atomically(path, "save_npy", [&](int fd, const std::string& tmp) {
    write_all(fd, head.data(), head.size(), tmp, "save_npy");
    write_all(fd, dict.data(), dict.size(), tmp, "save_npy");
    if (host.numel() > 0)
      write_all(fd, host.data_ptr(), static_cast<size_t>(host.numel()) * itemsize(host.dtype()), tmp, "save_npy");
  });
}

}  // namespace ember::data
