// defines: ProgressBar (progress.h): the line, when it is drawn (terminal: by time; log: by 5% steps), and the
// terminal redraw that blanks what a shorter line leaves behind.
#include "ember/logging/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "ember/core/error.h"

namespace ember {
namespace {

constexpr int64_t kPlainSteps = 20;    // plain lines: one per 5%
constexpr double kPlainInterval = 10;  // plain lines with an unknown total: one per 10 s

// "mm:ss", or "h:mm:ss" from an hour on.
std::string clock_text(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else std::snprintf(buf, sizeof buf, "%02lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  return buf;
}

// "13.20it/s", "2.50s/it" below one per second, "?it/s" before anything is measured.
std::string rate_text(double rate, const std::string& unit) {
  char buf[64];
  if (!(rate > 0) || !std::isfinite(rate)) return "?" + unit + "/s";
  if (rate < 1) std::snprintf(buf, sizeof buf, "%.2fs/%s", 1 / rate, unit.c_str());
  else std::snprintf(buf, sizeof buf, "%.2f%s/s", rate, unit.c_str());
  return buf;
}

bool is_terminal(std::FILE* f) { return ::isatty(::fileno(f)) == 1; }

}  // namespace

ProgressBar::ProgressBar(int64_t total, ProgressOptions opts)
    : total_(total), opts_(std::move(opts)), out_(opts_.out ? opts_.out : stderr), start_(Clock::now()) {
  EMBER_CHECK_VALUE(total >= 0, "ProgressBar: total must be >= 0 (0: unknown), got ", total);
  EMBER_CHECK_VALUE(opts_.width >= 1 && opts_.width <= 1000, "ProgressBar: width must be in [1, 1000], got ",
                    opts_.width);
  EMBER_CHECK_VALUE(opts_.min_interval >= 0, "ProgressBar: min_interval must be >= 0 seconds, got ",
                    opts_.min_interval);
  redraw_ = opts_.redraw.value_or(is_terminal(out_));
}

ProgressBar::~ProgressBar() {
  try {
    close();
  } catch (...) {  // only bad_alloc can come here; a destructor does not throw
  }
}

double ProgressBar::elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

bool ProgressBar::due(int64_t n) const {
  if (closed_) return false;
  const int64_t next = n_ + n;
  if (redraw_) return (total_ > 0 && next >= total_) || last_draw_ < 0 || elapsed() - last_draw_ >= opts_.min_interval;
  if (total_ == 0) return elapsed() - std::max(0.0, last_draw_) >= kPlainInterval;
  return std::min(kPlainSteps, next * kPlainSteps / total_) > printed_step_;
}

void ProgressBar::update(int64_t n) {
  EMBER_CHECK_VALUE(n >= 0, "ProgressBar::update: n must be >= 0, got ", n);
  if (closed_) return;
  const bool draw_now = due(n);
  n_ += n;
  if (draw_now) draw();
}

void ProgressBar::set_postfix(const std::map<std::string, double>& values) {
  std::string s;
  char buf[64];
  for (const auto& [k, v] : values) {
    std::snprintf(buf, sizeof buf, "%.4g", v);
    s += (s.empty() ? "" : ", ") + k + "=" + buf;
  }
  postfix_ = s;
}

void ProgressBar::set_postfix(const std::map<std::string, std::string>& values) {
  std::string s;
  for (const auto& [k, v] : values) s += (s.empty() ? "" : ", ") + k + "=" + v;
  postfix_ = s;
}

void ProgressBar::set_description(const std::string& desc) { opts_.desc = desc; }

std::string ProgressBar::line() const {
  const double t = elapsed();
  const double rate = t > 0 ? static_cast<double>(n_) / t : 0;
  std::string s = opts_.desc.empty() ? "" : opts_.desc + ": ";
  const std::string tail = ", " + rate_text(rate, opts_.unit) + (postfix_.empty() ? "" : ", " + postfix_) + "]";
  if (total_ == 0) return s + std::to_string(n_) + opts_.unit + " [" + clock_text(t) + tail;
  const int64_t done = std::min(n_, total_);
  const int64_t filled = opts_.width * done / total_;
  char pct[16];
  std::snprintf(pct, sizeof pct, "%3lld%%|", static_cast<long long>(n_ * 100 / total_));
  const std::string eta = rate > 0 ? clock_text(static_cast<double>(total_ - done) / rate) : "?";
  return s + pct + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(opts_.width - filled), ' ') + "| " + std::to_string(n_) + "/" +
         std::to_string(total_) + " [" + clock_text(t) + "<" + eta + tail;
}

void ProgressBar::draw() {
  const std::string text = line();
  if (redraw_) {
    // Spaces over whatever of a longer previous line would remain.
    const size_t pad = last_len_ > text.size() ? last_len_ - text.size() : 0;
    std::fprintf(out_, "\r%s%s", text.c_str(), std::string(pad, ' ').c_str());
    last_len_ = text.size();
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
    if (total_ > 0) printed_step_ = std::min(kPlainSteps, n_ * kPlainSteps / total_);
  }
  last_draw_ = elapsed();
  std::fflush(out_);
}

void ProgressBar::close() {
  if (closed_) return;
  const bool plain_done = !redraw_ && total_ > 0 && printed_step_ == std::min(kPlainSteps, n_ * kPlainSteps / total_);
  if (!plain_done) draw();  // the final state, unless that exact line is the last one printed
  if (redraw_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
  closed_ = true;
}

}  // namespace ember
