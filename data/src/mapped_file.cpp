// defines: MappedFile (POSIX open + fstat + mmap).
#include "mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ember/core/error.h"
#include "ember/core/file_io.h"

namespace ember::data::detail {

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path, Mode mode, const char* who) {
  const int fd = open_for_reading(path, who);  // a regular file, or an IOError naming what it is
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw IOError(ember::detail::str(who, ": cannot read the status of ", path, " (", std::strerror(err), ")"));
  }
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = static_cast<size_t>(st.st_size);
  if (m->size_ > 0) {
    // Copy-on-write is writable: a tensor over it may be written, the file never is.
    const int prot = mode == Mode::ReadOnly ? PROT_READ : PROT_READ | PROT_WRITE;
    void* p = ::mmap(nullptr, m->size_, prot, MAP_PRIVATE, fd, 0);
    const int err = errno;
    m->fd_ = fd;  // closed by the destructor
    EMBER_CHECK(p != MAP_FAILED, IOError, who, ": cannot map ", path, " (", m->size_, " bytes: ", std::strerror(err),
                ")");
    m->data_ = p;
  } else {
    m->fd_ = fd;
  }
  return m;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
}

void MappedFile::read_at(void* dst, size_t n, size_t offset, const char* who) const {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    EMBER_CHECK(got > 0, IOError, who, ": reading ", path_, " at byte ", offset, " failed (",
                got == 0 ? "unexpected end of file" : std::strerror(errno), ")");
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<size_t>(got);
  }
}

void MappedFile::release_resident() const {
  // Only for a mapping never written: MADV_DONTNEED on written copy-on-write pages would discard the writes.
  if (data_) ::madvise(data_, size_, MADV_DONTNEED);
}

}  // namespace ember::data::detail
