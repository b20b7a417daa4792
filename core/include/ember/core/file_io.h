// defines: the file primitives every reader and writer of Ember goes through, so that none of them can hang,
// leave half a file or read a corrupt one without saying so:
//   - open_for_reading: a regular file or an IOError — a FIFO, a socket, a directory or a device is refused before
//     anything is read from it (opening a FIFO for reading would otherwise wait forever for a writer);
//   - write_atomically: a temporary file beside the target, fsync'ed and renamed over it, the folder fsync'ed; a
//     crash leaves the old file or the new one, never a part. Temporary files are named "<path>.tmp.<pid>.<n>" and
//     locked by their writer (an open-file-description lock, which the kernel drops when the writer dies, and
//     which NFS honours across hosts); the next save to the same path removes the ones no writer holds that are
//     over a minute old (what a killed writer left);
//   - crc32c: CRC-32C (Castagnoli), the checksum of the checkpoint, npz and TensorBoard event files;
//   - valid_utf8: what a JSON header may hold.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace ember {

// Opens `path` read-only (close-on-exec) and returns its descriptor, or throws IOError naming `who` (the user's
// call) and the path: "<who>: <path> is a FIFO, not a regular file". The caller closes the descriptor.
int open_for_reading(const std::string& path, const char* who);

// The whole content of a regular file (opened as open_for_reading does), or IOError naming `who`; a file larger
// than max_bytes is refused before it is read.
std::string read_file(const std::string& path, const char* who, size_t max_bytes = size_t{1} << 30);

// Writes `path` atomically: `write` gets the temporary file's descriptor (and name, for messages) and writes the
// whole content, e.g. with write_all; an exception from it removes the temporary file and propagates. The file is
// created with mode 0644 (less the umask).
void write_atomically(const std::string& path, const char* who,
                      const std::function<void(int fd, const std::string& tmp_path)>& write);
// Writes n bytes to fd (retrying short writes and EINTR), or throws IOError "<who>: writing <path> failed (...)".
void write_all(int fd, const void* data, size_t n, const std::string& path, const char* who);
// Removes the temporary files of write_atomically(path) that no live writer holds and that are over a minute old;
// returns how many. write_atomically calls it; exposed for tests and tools.
int remove_stale_temp_files(const std::string& path);

// CRC-32C of n bytes, continuing from `crc` (the CRC of the bytes before them; 0 to start).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// Whether `s` is well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
bool valid_utf8(std::string_view s);

}  // namespace ember
