// defines: SummaryWriter (summary_writer.h): the event files (named as PyTorch names them, buffered, each record
// written whole or not at all), the histogram of a tensor (NumPy's equal-width bins, as PyTorch's make_histogram),
// and add_scalars' one folder per curve.
#include "ember/logging/summary_writer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "ember/core/error.h"
#include "ember/core/raw_ops.h"
#include "event_format.h"

namespace ember {
namespace {

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// events.out.tfevents.<seconds>.<host>.<pid>.<n><suffix>: n tells apart the files one process opens in a second.
std::string event_file_name(const std::string& suffix) {
  static std::atomic<int> counter{0};
  return "events.out.tfevents." + std::to_string(static_cast<int64_t>(wall_time())) + "." + host_name() + "." +
         std::to_string(::getpid()) + "." + std::to_string(counter++) + suffix;
}

void check_tag(const char* call, const std::string& tag) {
  EMBER_CHECK_VALUE(!tag.empty(), "SummaryWriter::", call, ": the tag is empty");
}

// NumPy's histogram of `v` in `bins` equal-width buckets over [min, max] (the last one closed), as PyTorch's
// make_histogram passes it to TensorBoard: bucket i counts the values up to bucket_limit[i], after a first empty
// bucket at the minimum.
event_format::Histogram histogram_of(const std::vector<double>& v, int bins) {
  event_format::Histogram h;
  h.min = v[0];
  h.max = v[0];
  for (double x : v) {
    h.min = std::min(h.min, x);
    h.max = std::max(h.max, x);
    h.sum += x;
    h.sum_squares += x * x;
  }
  h.num = static_cast<double>(v.size());
  double lo = h.min, hi = h.max;
  if (lo == hi) {  // NumPy widens an empty range by 0.5 on each side
    lo -= 0.5;
    hi += 0.5;
  }
  // Halves: hi - lo itself may overflow for values near the largest double.
  const double half_span = hi / 2 - lo / 2;
  std::vector<double> counts(static_cast<size_t>(bins), 0.0);
  for (double x : v) {
    const double f = (x / 2 - lo / 2) / half_span * bins;
    const int64_t i = f >= bins ? bins - 1 : (f > 0 ? static_cast<int64_t>(f) : 0);
    counts[static_cast<size_t>(i)] += 1;
  }
  h.bucket_limit.push_back(lo);
  h.bucket.push_back(0);
  for (int i = 0; i < bins; ++i) {
    h.bucket_limit.push_back(i + 1 == bins ? hi : lo + 2 * (half_span * (i + 1) / bins));
    h.bucket.push_back(counts[static_cast<size_t>(i)]);
  }
  return h;
}

}  // namespace

// One event file: records are framed, buffered, and appended whole; a failed write is cut back off the file.
class SummaryWriter::EventFile {
 public:
  EventFile(const std::string& dir, const SummaryWriterOptions& opts) : flush_every_(opts.flush_every) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    EMBER_CHECK(!ec, IOError, "SummaryWriter: cannot make the log folder ", dir, ": ", ec.message());
    path_ = (std::filesystem::path(dir) / event_file_name(opts.filename_suffix)).string();
    f_ = std::fopen(path_.c_str(), "wb");
    EMBER_CHECK(f_, IOError, "SummaryWriter: cannot create the event file ", path_, ": ", std::strerror(errno));
    write(event_format::file_version_event(wall_time()));
    flush();
  }
  ~EventFile() {
    try {
      close();
    } catch (const Error& e) {  // a destructor reports instead of throwing
      std::fprintf(stderr, "ember: warning: %s\n", e.what());
    }
  }

  void write(const std::string& event) {
    buffer_ += event_format::frame_record(event);
    if (++pending_ >= flush_every_) flush();
  }

  void flush() {
    if (!f_ || buffer_.empty()) return;
    const bool ok = std::fwrite(buffer_.data(), 1, buffer_.size(), f_) == buffer_.size() && std::fflush(f_) == 0;
    if (!ok) {
      const std::string why = std::strerror(errno);
      // Cut the file back to its last whole record, so a reader never meets half of one.
      std::clearerr(f_);
      if (::ftruncate(::fileno(f_), static_cast<off_t>(written_)) != 0 || std::fseek(f_, 0, SEEK_END) != 0)
        std::fprintf(stderr, "ember: warning: SummaryWriter: could not cut %s back after a failed write\n",
                     path_.c_str());
      buffer_.clear();
      pending_ = 0;
      throw IOError(detail::str("SummaryWriter: writing ", path_, " failed: ", why));
    }
    written_ += buffer_.size();
    buffer_.clear();
    pending_ = 0;
  }

  void close() {
    if (!f_) return;
    std::FILE* f = f_;
    try {
      flush();
    } catch (...) {
      f_ = nullptr;
      std::fclose(f);
      throw;
    }
    f_ = nullptr;
    EMBER_CHECK(std::fclose(f) == 0, IOError, "SummaryWriter: closing ", path_, " failed: ", std::strerror(errno));
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  std::string buffer_;  // framed records not yet written
  int pending_ = 0;
  int flush_every_;
  size_t written_ = 0;  // bytes in the file, all whole records
};

SummaryWriter::SummaryWriter(const std::string& logdir, SummaryWriterOptions opts)
    : logdir_(logdir), opts_(std::move(opts)) {
  EMBER_CHECK_VALUE(!logdir_.empty(), "SummaryWriter: the log folder is empty");
  EMBER_CHECK_VALUE(opts_.flush_every >= 1, "SummaryWriter: flush_every must be >= 1, got ", opts_.flush_every);
  file_ = std::make_unique<EventFile>(logdir_, opts_);
}

SummaryWriter::~SummaryWriter() {
  try {
    close();
  } catch (const Error& e) {
    std::fprintf(stderr, "ember: warning: %s\n", e.what());
  }
}

SummaryWriter::EventFile& SummaryWriter::file() {
  EMBER_CHECK_VALUE(!closed_, "SummaryWriter: used after close() (", logdir_, ")");
  return *file_;
}

SummaryWriter::EventFile& SummaryWriter::scalars_file(const std::string& main_tag, const std::string& key) {
  std::string folder = main_tag + "_" + key;
  for (char& c : folder)
    if (c == '/') c = '_';
  auto& f = scalars_files_[folder];
  if (!f) f = std::make_unique<EventFile>((std::filesystem::path(logdir_) / folder).string(), opts_);
  return *f;
}

const std::string& SummaryWriter::file_path() const { return file_->path(); }

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  check_tag("add_scalar", tag);
  file().write(event_format::scalar_event(wall_time(), step, tag, static_cast<float>(value)));
}

void SummaryWriter::add_scalars(const std::string& main_tag, const std::map<std::string, double>& values,
                                int64_t step) {
  check_tag("add_scalars", main_tag);
  file();  // refuses after close
  for (const auto& [key, v] : values) {
    EMBER_CHECK_VALUE(!key.empty(), "SummaryWriter::add_scalars: a key of '", main_tag, "' is empty");
    scalars_file(main_tag, key).write(event_format::scalar_event(wall_time(), step, main_tag, static_cast<float>(v)));
  }
}

void SummaryWriter::add_histogram(const std::string& tag, const Tensor& values, int64_t step, int bins) {
  check_tag("add_histogram", tag);
  EMBER_CHECK_VALUE(bins >= 1, "SummaryWriter::add_histogram: bins must be >= 1, got ", bins);
  EMBER_CHECK(values.defined(), Error, "SummaryWriter::add_histogram('", tag, "'): the tensor is undefined");
  EMBER_CHECK_VALUE(values.numel() > 0, "SummaryWriter::add_histogram('", tag, "'): the tensor has no elements");
  EMBER_CHECK_DTYPE(values.dtype() != kBool, "SummaryWriter::add_histogram('", tag,
                    "'): bool tensors have no histogram");
  const Tensor host = raw::contiguous(raw::cast(raw::to_device(values, Device::cpu()), kFloat64));
  const double* p = host.data<double>();
  std::vector<double> v(p, p + host.numel());
  for (double x : v)
    EMBER_CHECK_VALUE(std::isfinite(x), "SummaryWriter::add_histogram('", tag, "'): the tensor holds ", x,
                      " (NaN and infinities have no bucket)");
  file().write(event_format::histogram_event(wall_time(), step, tag, histogram_of(v, bins)));
}

void SummaryWriter::add_text(const std::string& tag, const std::string& text, int64_t step) {
  check_tag("add_text", tag);
  file().write(event_format::text_event(wall_time(), step, tag, text));
}

void SummaryWriter::flush() {
  file().flush();
  for (auto& [folder, f] : scalars_files_) f->flush();
}

void SummaryWriter::close() {
  if (closed_) return;
  closed_ = true;
  file_->close();
  for (auto& [folder, f] : scalars_files_) f->close();
}

}  // namespace ember
