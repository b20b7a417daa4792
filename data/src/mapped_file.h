// defines: MappedFile, a whole file mapped into memory (read-only, or copy-on-write), unmapped when the last
// shared_ptr to it goes; the readers parse through it and the mmap loaders hand it to tensors as their owner.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

namespace ember::data::detail {

class MappedFile {
 public:
  enum class Mode { ReadOnly, CopyOnWrite };
  // Throws IOError naming `who` and the path when the file cannot be opened, stat'ed or mapped. An empty file
  // maps to data() == nullptr, size() == 0.
  static std::shared_ptr<MappedFile> open(const std::string& path, Mode mode, const char* who);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return static_cast<const unsigned char*>(data_); }
  unsigned char* mutable_data() const { return static_cast<unsigned char*>(data_); }  // CopyOnWrite only
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops this process's page-table entries for the whole mapping (the pages stay in the page cache and come
  // back on the next touch, without I/O): bounds the resident set of a read-only mapping read end to end.
  void release_resident() const;
  // Reads n bytes at `offset` with pread (through the page cache, mapping nothing into this process); IOError
  // naming `who` on failure or end of file.
  void read_at(void* dst, size_t n, size_t offset, const char* who) const;

 private:
  MappedFile() = default;
  int fd_ = -1;  // kept open for read_at
  void* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace ember::data::detail
