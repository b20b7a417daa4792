// A training progress bar for the examples: redrawn in place on a terminal (every `tty_every` steps), printed
// every quarter of the epoch into a log.
//   epoch 2 [===============               ] 20/40  loss 3.2592  58435 tokens/s  ETA 00:00
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

namespace examples {

// "mm:ss"
inline std::string hms(double s) {
  char buf[32];
  const int t = static_cast<int>(s + 0.5);
  std::snprintf(buf, sizeof buf, "%02d:%02d", t / 60, t % 60);
  return buf;
}

class ProgressBar {
 public:
  explicit ProgressBar(int64_t tty_every = 10) : tty_(::isatty(STDOUT_FILENO)), every_(tty_every) {}
  bool tty() const { return tty_; }
  // Whether step `done` of `total` is drawn (so that the caller reads its loss back only then).
  bool due(int64_t done, int64_t total) const {
    const bool last = done == total;
    return tty_ ? done % every_ == 0 || last : done % std::max<int64_t>(1, total / 4) == 0 || last;
  }
  // rate in `unit` per second; secs = time since the epoch started.
  void draw(int epoch, int64_t done, int64_t total, double loss, double rate, const char* unit, double secs) const {
    const int width = 30, filled = static_cast<int>(width * done / total);
    std::printf("%sepoch %d [%s%s] %lld/%lld  loss %.4f  %.0f %s/s  ETA %s%s", tty_ ? "\r" : "", epoch,
                std::string(static_cast<size_t>(filled), '=').c_str(),
                std::string(static_cast<size_t>(width - filled), ' ').c_str(), static_cast<long long>(done),
                static_cast<long long>(total), loss, rate, unit,
                hms(secs / static_cast<double>(done) * static_cast<double>(total - done)).c_str(), tty_ ? "" : "\n");
    std::fflush(stdout);
  }

 private:
  bool tty_;
  int64_t every_;
};

}  // namespace examples
