// Tests of ProgressBar (ember/logging/progress.h): the line's parts (count/total, percentage, bar, rate, ETA,
// postfix), plain lines into a log (one per 5%, at most 21), redraws in place on a terminal, close, bad input.
// Nothing here asserts on time: rates and ETAs are matched by their form only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "test_util.h"

namespace ember {
namespace {

// Everything written to a temporary FILE*.
class Captured {
 public:
  Captured() : f_(std::tmpfile()) {}
  ~Captured() { std::fclose(f_); }
  std::FILE* file() const { return f_; }
  std::string text() const {
    std::fflush(f_);
    std::rewind(f_);
    std::string s;
    for (int c; (c = std::fgetc(f_)) != EOF;) s += static_cast<char>(c);
    return s;
  }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::string cur;
    for (char c : text()) {
      if (c == '\n') {
        out.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    return out;
  }

 private:
  std::FILE* f_;
};

TEST(ProgressBar, LineHasDescriptionPercentBarCountTimesRateAndPostfix) {
  Captured out;
  ProgressBar bar(40, {.desc = "epoch 1", .width = 10, .out = out.file(), .redraw = false});
  bar.update(10);
  bar.set_postfix({{"loss", 0.312745}, {"acc", 0.5}});
  const std::string line = bar.line();
  EXPECT_TRUE(std::regex_match(line, std::regex(R"(epoch 1:  25%\|## {8}\| 10/40 \[\d\d:\d\d<(\d\d:\d\d|\?), )"
                                                R"((\?|[0-9.]+)(it/s|s/it), acc=0\.5, loss=0\.3127\])")))
      << line;
  bar.close();
}

TEST(ProgressBar, UnknownTotalShowsTheCountAndTheRate) {
  Captured out;
  ProgressBar bar(0, {.unit = "batch", .out = out.file(), .redraw = false});
  bar.update(7);
  EXPECT_TRUE(std::regex_match(bar.line(), std::regex(R"(7batch \[\d\d:\d\d, (\?|[0-9.]+)(batch/s|s/batch)\])")))
      << bar.line();
  bar.close();
  EXPECT_EQ(out.lines().size(), 1u) << out.text();  // the final state, once
}

TEST(ProgressBar, IntoALogItPrintsOneLinePerFivePercentAtMost) {
  Captured out;
  {
    ProgressBar bar(1000, {.out = out.file(), .redraw = false});
    for (int i = 0; i < 1000; ++i) bar.update();
  }  // the destructor closes: the 100% line is already there, so nothing more
  const std::vector<std::string> lines = out.lines();
  ASSERT_EQ(lines.size(), 21u) << out.text();  // the first update (the run has started), then each 5%
  EXPECT_NE(lines.front().find("  0%|"), std::string::npos) << lines.front();
  EXPECT_NE(lines[1].find("  5%|"), std::string::npos) << lines[1];
  EXPECT_NE(lines.back().find("100%|"), std::string::npos) << lines.back();
  EXPECT_NE(lines.back().find("1000/1000"), std::string::npos);
  EXPECT_EQ(out.text().find('\r'), std::string::npos) << "no carriage returns in a log";
}

TEST(ProgressBar, DueSaysWhetherTheNextUpdateDraws) {
  Captured out;
  ProgressBar bar(10, {.out = out.file(), .redraw = false});
  int drawn = 0;
  for (int i = 0; i < 10; ++i) {
    if (bar.due()) ++drawn;
    bar.update();
  }
  EXPECT_EQ(drawn, 10);  // 10 steps of 10%: each crosses a 5% line
  EXPECT_EQ(out.lines().size(), 10u);
  bar.close();
  EXPECT_FALSE(bar.due());
  bar.update();  // ignored after close
  EXPECT_EQ(bar.n(), 10);
}

TEST(ProgressBar, OnATerminalItRedrawsOneLineInPlace) {
  Captured out;
  {
    ProgressBar bar(3, {.desc = "train", .min_interval = 0, .out = out.file(), .redraw = true});
    bar.set_postfix({{"note", std::string("a long postfix at first")}});
    bar.update();
    bar.set_postfix(std::map<std::string, std::string>{});
    bar.update(2);
  }
  const std::string text = out.text();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << "one line, ended at close";
  EXPECT_EQ(std::count(text.begin(), text.end(), '\r'), 3) << text;  // 1/3, 3/3, and the final redraw at close
  const std::string last = text.substr(text.rfind('\r') + 1);
  EXPECT_NE(last.find("train: 100%|"), std::string::npos) << last;
  // the second line (no postfix) is shorter than the first: spaces blank what the first left on the screen
  const size_t r1 = text.find('\r', 1), r2 = text.find('\r', r1 + 1);
  const std::string first = text.substr(1, r1 - 1), second = text.substr(r1 + 1, r2 - r1 - 1);
  EXPECT_GE(second.size(), first.size()) << text;
  EXPECT_EQ(second.back(), ' ') << text;
}

TEST(ProgressBar, BadArgumentsAreValueErrors) {
  EXPECT_THROW_MSG(ProgressBar(-1), ValueError, "ProgressBar", "total");
  EXPECT_THROW_MSG(ProgressBar(5, {.width = 0}), ValueError, "width");
  EXPECT_THROW_MSG(ProgressBar(5, {.min_interval = -1}), ValueError, "min_interval");
  Captured out;
  ProgressBar bar(5, {.out = out.file(), .redraw = false});
  EXPECT_THROW_MSG(bar.update(-2), ValueError, "ProgressBar::update", "-2");
}

}  // namespace
}  // namespace ember
