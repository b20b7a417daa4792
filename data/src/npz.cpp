// defines: load_npz / parse_npz, a ZIP reader just large enough for NumPy's archives: the central directory
// (with ZIP64 sizes and offsets), stored and deflated members (zlib's raw inflate), CRC-32 checked. Every size
// is checked against the bytes that are there before anything is allocated; a deflated member may not declare
// more than deflate can expand its compressed bytes to (about 1032:1), so a forged size cannot allocate.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "bits.h"
#include "ember/data/npy.h"
#include "mapped_file.h"

namespace ember::data {
namespace {

using ember::detail::str;

using detail::load_le;

struct Archive {
  const unsigned char* p;
  size_t size;
  const std::string& what;

  [[noreturn]] void fail(const std::string& why) const { throw IOError(str("load_npz: ", what, ": ", why)); }
  // The n bytes at off, or an IOError naming what was being read.
  const unsigned char* at(uint64_t off, uint64_t n, const char* part) const {
    if (off > size || n > size - off)
      fail(str("truncated or corrupt archive (the ", part, " at byte ", off, " runs past the end, ", size, " bytes)"));
    return p + off;
  }
};

struct Entry {
  std::string name;
  int method = 0;
  uint32_t crc = 0;
  uint64_t csize = 0, usize = 0, local = 0;
};

// Where the central directory is and how many entries it has (classic or ZIP64 end record).
void find_directory(const Archive& a, uint64_t& entries, uint64_t& cd_off, uint64_t& cd_size) {
  if (a.size < 22) a.fail("not a ZIP archive (too short for an end-of-central-directory record)");
  int64_t eocd = -1;
  const size_t lowest = a.size > 22 + 65535 ? a.size - 22 - 65535 : 0;
  for (size_t i = a.size - 22 + 1; i-- > lowest;)
    if (load_le(a.p + i, 4) == 0x06054b50) {
      eocd = static_cast<int64_t>(i);
      break;
    }
  if (eocd < 0) a.fail("not a ZIP archive (no end-of-central-directory record)");
  const unsigned char* e = a.p + eocd;
  entries = load_le(e + 10, 2);
  cd_size = load_le(e + 12, 4);
  cd_off = load_le(e + 16, 4);
  if (entries == 0xffff || cd_size == 0xffffffff || cd_off == 0xffffffff) {
    // ZIP64: a locator just before the classic record points at the 64-bit record.
    if (eocd < 20) a.fail("ZIP64 archive without its locator");
    const unsigned char* loc = a.p + eocd - 20;
    if (load_le(loc, 4) != 0x07064b50) a.fail("ZIP64 archive without its locator");
    const unsigned char* z = a.at(load_le(loc + 8, 8), 56, "ZIP64 end record");
    if (load_le(z, 4) != 0x06064b50) a.fail("bad ZIP64 end record signature");
    entries = load_le(z + 32, 8);
    cd_size = load_le(z + 40, 8);
    cd_off = load_le(z + 48, 8);
  }
  a.at(cd_off, cd_size, "central directory");
  if (entries > cd_size / 46) a.fail(str("the directory claims ", entries, " entries in ", cd_size, " bytes"));
}

std::vector<Entry> read_directory(const Archive& a) {
  uint64_t entries = 0, off = 0, cd_size = 0;
  find_directory(a, entries, off, cd_size);
  std::vector<Entry> out;
  out.reserve(entries);
  for (uint64_t k = 0; k < entries; ++k) {
    const unsigned char* c = a.at(off, 46, "directory entry");
    if (load_le(c, 4) != 0x02014b50) a.fail(str("bad directory entry signature at byte ", off));
    Entry e;
    const uint64_t flags = load_le(c + 8, 2);
    if (flags & 1) a.fail("encrypted members are not supported");
    e.method = static_cast<int>(load_le(c + 10, 2));
    e.crc = static_cast<uint32_t>(load_le(c + 16, 4));
    e.csize = load_le(c + 20, 4);
    e.usize = load_le(c + 24, 4);
    const uint64_t nlen = load_le(c + 28, 2), xlen = load_le(c + 30, 2), clen = load_le(c + 32, 2);
    e.local = load_le(c + 42, 4);
    const unsigned char* name = a.at(off + 46, nlen + xlen + clen, "directory entry");
    e.name.assign(reinterpret_cast<const char*>(name), nlen);
    // ZIP64 extra field (id 1): the 64-bit values of whichever of usize, csize, local are saturated, in order.
    for (uint64_t x = nlen; x + 4 <= nlen + xlen;) {
      const uint64_t id = load_le(name + x, 2), len = load_le(name + x + 2, 2);
      if (x + 4 + len > nlen + xlen) a.fail(str("member ", e.name, ": corrupt extra field"));
      if (id == 1) {
        const unsigned char* v = name + x + 4;
        uint64_t used = 0;
        for (uint64_t* field : {&e.usize, &e.csize, &e.local}) {
          if (*field != 0xffffffff) continue;
          if (used + 8 > len) a.fail(str("member ", e.name, ": short ZIP64 extra field"));
          *field = load_le(v + used, 8);
          used += 8;
        }
      }
      x += 4 + len;
    }
    out.push_back(std::move(e));
    off += 46 + nlen + xlen + clen;
  }
  return out;
}

// The member's bytes: a pointer into the archive when stored, else inflated into `buf`.
std::pair<const unsigned char*, size_t> member_bytes(const Archive& a, const Entry& e,
                                                     std::vector<unsigned char>& buf) {
  const unsigned char* l = a.at(e.local, 30, "local header");
  if (load_le(l, 4) != 0x04034b50) a.fail(str("member ", e.name, ": bad local header signature"));
  const uint64_t start = e.local + 30 + load_le(l + 26, 2) + load_le(l + 28, 2);
  const unsigned char* src = a.at(start, e.csize, "member data");
  const unsigned char* out = nullptr;
  if (e.method == 0) {
    if (e.csize != e.usize) a.fail(str("member ", e.name, ": stored with ", e.csize, " bytes but declares ", e.usize));
    out = src;
  } else if (e.method == 8) {
    // Deflate expands at most ~1032:1; a larger declared size is a forgery and must not be allocated.
    if (e.usize / 1032 > e.csize + 1)
      a.fail(str("member ", e.name, ": declares ", e.usize, " bytes from ", e.csize,
                 " compressed (not possible with deflate)"));
    // The output buffer grows as inflate fills it (doubling from 64 KiB, never past the declared size), so memory
    // follows the data actually there, not the size the directory claims.
    buf.clear();
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) a.fail("zlib could not start inflating");
    uint64_t in_left = e.csize, produced = 0;
    z.next_in = const_cast<unsigned char*>(src);
    int rc = Z_OK;
    while (rc == Z_OK) {
      if (produced == buf.size() && buf.size() < e.usize)
        buf.resize(static_cast<size_t>(std::min<uint64_t>(e.usize, std::max<uint64_t>(2 * buf.size(), 1 << 16))));
      // zlib counts in 32-bit units: feed large members in pieces.
      const uInt in_chunk = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
      const uInt out_chunk = static_cast<uInt>(std::min<uint64_t>(buf.size() - produced, 1u << 30));
      z.next_out = buf.data() + produced;
      z.avail_in = in_chunk;
      z.avail_out = out_chunk;
      rc = inflate(&z, Z_NO_FLUSH);
      in_left -= in_chunk - z.avail_in;
      produced += out_chunk - z.avail_out;
      z.next_in = const_cast<unsigned char*>(src) + (e.csize - in_left);
      // No progress possible: out of input, or the declared size is reached and the stream wants more room.
      if (rc == Z_OK && in_chunk - z.avail_in == 0 && out_chunk - z.avail_out == 0) rc = Z_BUF_ERROR;
    }
    inflateEnd(&z);
    const uint64_t out_left = e.usize - produced;
    if (rc != Z_STREAM_END || out_left != 0)
      a.fail(str("member ", e.name, ": corrupt deflate data (",
                 rc == Z_STREAM_END ? "size differs from the declared one"
                 : z.msg            ? z.msg
                                    : "ended early",
                 ")"));
    out = buf.data();
  } else {
    a.fail(str("member ", e.name, ": compression method ", e.method, " is not supported (stored or deflated only)"));
  }
  uLong crc = crc32_z(0L, Z_NULL, 0);
  crc = crc32_z(crc, out, e.usize);
  if (crc != e.crc) a.fail(str("member ", e.name, ": CRC-32 mismatch (corrupt data)"));
  return {out, e.usize};
}

}  // namespace

std::map<std::string, Tensor> parse_npz(const void* data, size_t size, const std::string& what) {
  const Archive a{static_cast<const unsigned char*>(data), size, what};
  std::map<std::string, Tensor> out;
  std::vector<unsigned char> buf;
  const std::vector<Entry> entries = read_directory(a);
  // Members may not share or overlap their bytes (CPython's zipfile refuses that too): a directory of many entries
  // pointing at one compressed member would otherwise inflate it again and again (an "overlapping zip bomb").
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const Entry& e : entries) {
    const unsigned char* l = a.at(e.local, 30, "local header");
    const uint64_t end = e.local + 30 + load_le(l + 26, 2) + load_le(l + 28, 2) + e.csize;
    spans.emplace_back(e.local, end);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second)
      a.fail(str("members overlap (bytes ", spans[i].first, " and ", spans[i - 1].first, "): not a valid archive"));
  for (const Entry& e : entries) {
    if (e.name.size() < 4 || e.name.compare(e.name.size() - 4, 4, ".npy") != 0) continue;  // not an array
    const std::string key = e.name.substr(0, e.name.size() - 4);
    if (out.contains(key)) a.fail(str("member ", e.name, " appears twice"));
    auto [bytes, n] = member_bytes(a, e, buf);
    out.emplace(key, parse_npy(bytes, n, what + ":" + e.name));
  }
  return out;
}

std::map<std::string, Tensor> load_npz(const std::string& path) {
  auto file = detail::MappedFile::open(path, detail::MappedFile::Mode::ReadOnly, "load_npz");
  return parse_npz(file->data(), file->size(), path);
}

}  // namespace ember::data
