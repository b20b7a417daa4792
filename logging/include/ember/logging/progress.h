// defines: ProgressBar, a training progress bar as tqdm draws it, written to stderr:
//
//   epoch 1:  45%|#############                | 45/100 [00:03<00:04, 13.20it/s, loss=0.3127]
//
// On a terminal the line is redrawn in place (at most every `min_interval` seconds, and at the end); into a log (a
// file or a pipe) it prints a plain line at the first update and each time another 5% is done (21 lines). With an
// unknown total (0) it shows the count and the rate only.
//
//   ember::ProgressBar bar(loader.size(), {.desc = "epoch 1"});
//   for (auto& batch : loader) {
//     ...
//     if (bar.due()) bar.set_postfix({{"loss", loss.item<double>()}});  // read the loss back only when drawn
//     bar.update();
//   }
//   bar.close();  // (the destructor closes too)
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

namespace ember {

struct ProgressOptions {
  std::string desc;            // before the bar: "epoch 1"
  std::string unit = "it";     // the rate's unit: "13.20it/s"
  double min_interval = 0.1;   // seconds between redraws on a terminal (0: every update)
  int width = 30;              // characters of the bar itself
  std::FILE* out = nullptr;    // where to write; null: stderr
  std::optional<bool> redraw;  // redraw in place (a terminal) or print plain lines; unset: whether `out` is a tty
};

class ProgressBar {
 public:
  // total: the updates that make 100%; 0 when unknown. Throws ValueError when total < 0.
  explicit ProgressBar(int64_t total, ProgressOptions opts = {});
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // n more done (n >= 0; ValueError otherwise); draws when due. Past the total is allowed, as tqdm's.
  void update(int64_t n = 1);
  // Whether update(n) will draw: read values for the postfix (a loss on the GPU costs a host wait) only then.
  bool due(int64_t n = 1) const;
  // Shown after the rate: "loss=0.3127, acc=0.91" (numbers with 4 significant digits), or text as it is.
  void set_postfix(const std::map<std::string, double>& values);
  void set_postfix(const std::map<std::string, std::string>& values);
  void set_description(const std::string& desc);
  // Draws the final state and ends the line; later updates are ignored. Safe to call twice.
  void close();

  int64_t n() const { return n_; }
  int64_t total() const { return total_; }
  // The line as it would be drawn now (without the carriage return).
  std::string line() const;

 private:
  using Clock = std::chrono::steady_clock;
  double elapsed() const;
  void draw();

  int64_t total_;
  ProgressOptions opts_;
  std::FILE* out_;
  bool redraw_;
  int64_t n_ = 0;
  std::string postfix_;
  Clock::time_point start_;
  double last_draw_ = -1;      // seconds since start of the last terminal redraw; -1: none yet
  int64_t printed_step_ = -1;  // plain lines: the last 5% step printed
  bool closed_ = false;
  size_t last_len_ = 0;  // length of the last terminal line, to blank what a shorter one leaves
};

}  // namespace ember
