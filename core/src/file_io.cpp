// defines: file_io.h — opening for reading, atomic writes with the stale temp-file sweep, CRC-32C, UTF-8 checks.
#include "ember/core/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

#include "ember/core/error.h"

namespace ember {
namespace {

const char* file_kind(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a regular file";
}

// The folder of `path` and its last component.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Whether `name` is one of write_atomically's temporary names for `base`: "<base>.tmp.<digits>.<digits>".
bool is_temp_name(const std::string& name, const std::string& base) {
  const std::string prefix = base + ".tmp.";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string_view rest = std::string_view(name).substr(prefix.size());
  const size_t dot = rest.find('.');
  return dot != std::string_view::npos && all_digits(rest.substr(0, dot)) && all_digits(rest.substr(dot + 1));
}

// A writer holds an open-file-description lock on its temporary file from creation to rename (released by the
// kernel when the writer dies, however it dies). OFD locks conflict between descriptions even within one process,
// and work across hosts on NFS, unlike a pid check.
bool lock_exclusive(int fd) {
  struct flock l {};
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  return ::fcntl(fd, F_OFD_SETLK, &l) == 0;
}

// The temporary file `path` if its writer is gone: unlocked (no live writer holds it) and not modified in the last
// minute (the moment between a writer's create and its lock). Returns whether it was removed.
bool remove_if_abandoned(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const bool old = regular && ::time(nullptr) - st.st_mtime > 60;
  const bool removed = old && lock_exclusive(fd) && ::unlink(path.c_str()) == 0;
  ::close(fd);
  return removed;
}
}  // namespace

int open_for_reading(const std::string& path, const char* who) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below); cleared again afterwards so
  // that reads of the regular file behave as usual.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  EMBER_CHECK(fd >= 0, IOError, who, ": cannot open ", path, " (", std::strerror(errno), ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw IOError(detail::str(who, ": cannot read the status of ", path, " (", std::strerror(e), ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IOError(detail::str(who, ": ", path, " is ", file_kind(st.st_mode), ", not a regular file"));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

std::string read_file(const std::string& path, const char* who, size_t max_bytes) {
  const int fd = open_for_reading(path, who);
  std::string out;
  struct stat st {};
  const bool too_big = ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) > max_bytes;
  char buf[1 << 16];
  while (!too_big) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const int e = errno;
      ::close(fd);
      EMBER_CHECK(got == 0, IOError, who, ": reading ", path, " failed (", std::strerror(e), ")");
      return out;
    }
    if (out.size() + static_cast<size_t>(got) > max_bytes) break;  // grew while being read
    out.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  throw IOError(detail::str(who, ": ", path, " is larger than the ", max_bytes, " bytes expected of it"));
}

void write_all(int fd, const void* data, size_t n, const std::string& path, const char* who) {
  const char* c = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    EMBER_CHECK(w > 0, IOError, who, ": writing ", path, " failed (", w < 0 ? std::strerror(errno) : "no progress",
                ")");
    c += w;
    n -= static_cast<size_t>(w);
  }
}

int remove_stale_temp_files(const std::string& path) {
  const auto [dir, base] = split_path(path);
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (is_temp_name(name, base) && remove_if_abandoned(dir + "/" + name)) ++removed;
  }
  ::closedir(d);
  return removed;
}

void write_atomically(const std::string& path, const char* who,
                      const std::function<void(int fd, const std::string& tmp_path)>& write) {
  remove_stale_temp_files(path);
  // pid + a counter: concurrent saves from several threads or processes never share a temporary file.
  // O_EXCL | O_NOFOLLOW: never reuse a file (a leftover of a reused pid) or follow a link planted at the name.
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  EMBER_CHECK(fd >= 0, IOError, who, ": cannot create ", tmp, " (", std::strerror(errno), ")");
  lock_exclusive(fd);  // held until the rename: a later sweep leaves this file alone while we write it
  try {
    write(fd, tmp);
    EMBER_CHECK(::fsync(fd) == 0, IOError, who, ": fsync of ", tmp, " failed (", std::strerror(errno), ")");
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw IOError(detail::str(who, ": cannot rename ", tmp, " to ", path, " (", std::strerror(e), ")"));
  }
  const int dfd = ::open(split_path(path).first.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // make the rename itself durable
    ::close(dfd);
  }
}

namespace {
// CRC-32C, reflected polynomial 0x82F63B78, one table lookup per byte (where the CPU has no crc32 instruction).
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}
}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
#if defined(__SSE4_2__)
  // The crc32 instruction (SSE4.2, part of the project's x86-64-v3 baseline): 8 bytes a step, ~10 GB/s, so a
  // checkpoint of a few hundred MB is checked in tens of milliseconds.
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
  }
  c = static_cast<uint32_t>(c64);
#endif
  const auto& t = crc_table();
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return ~c;
}

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((b & 0xE0) == 0xC0) len = 2, cp = b & 0x1F;
    else if ((b & 0xF0) == 0xE0) len = 3, cp = b & 0x0F;
    else if ((b & 0xF8) == 0xF0) len = 4, cp = b & 0x07;
    else return false;  // a continuation byte first, or 0xF8..0xFF
    if (i + static_cast<size_t>(len) > n) return false;
    for (int k = 1; k < len; ++k) {
      if ((p[i + static_cast<size_t>(k)] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + static_cast<size_t>(k)] & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};  // shorter forms are overlong
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(len);
  }
  return true;
}

}  // namespace ember
