// defines: operator<< for Tensor, in PyTorch's layout: values (summarised with "..." past 1000 elements),
// then dtype, shape and device. A tensor on another device is copied to the host once, never read
// element by element.
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "op_utils.h"

namespace ember {
namespace {

constexpr int64_t kSummariseAbove = 1000;
constexpr int64_t kEdgeItems = 3;

struct Printer {
  std::vector<double> vals;
  Shape shape, strides;
  bool floating = true, is_bool = false, sci = false, summarise = false;
  int width = 1;

  std::string fmt(double v) const {
    std::ostringstream os;
    if (is_bool) os << (v != 0 ? "true" : "false");
    else if (!floating) os << static_cast<int64_t>(v);
    else if (std::isnan(v)) os << "nan";
    else if (std::isinf(v)) os << (v > 0 ? "inf" : "-inf");
    else if (sci) os << std::scientific << std::setprecision(4) << v;
    else os << std::fixed << std::setprecision(4) << v;
    return os.str();
  }
  // Indices printed along a dim: all, or the first and last kEdgeItems with a gap (-1) between.
  std::vector<int64_t> shown(int64_t n) const {
    std::vector<int64_t> idx;
    if (!summarise || n <= 2 * kEdgeItems) {
      for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    } else {
      for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
      idx.push_back(-1);
      for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
    }
    return idx;
  }
  void rec(std::ostream& os, size_t d, int64_t off, int indent) const {
    if (d == shape.size()) {
      std::string s = fmt(vals[static_cast<size_t>(off)]);
      os << std::string(static_cast<size_t>(std::max<int>(0, width - static_cast<int>(s.size()))), ' ') << s;
      return;
    }
    os << '[';
    auto idx = shown(shape[d]);
    for (size_t k = 0; k < idx.size(); ++k) {
      if (k) {
        os << ',';
        if (d + 1 == shape.size()) os << ' ';
        else os << std::string(shape.size() - d - 1, '\n') << std::string(static_cast<size_t>(indent + 1), ' ');
      }
      if (idx[k] < 0) os << "...";
      else rec(os, d + 1, off + idx[k] * strides[d], indent + 1);
    }
    os << ']';
  }
};

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  Printer p;
  p.shape = t.shape();
  p.strides = contiguous_strides(t.shape());
  p.floating = is_floating(t.dtype());
  p.is_bool = t.dtype() == kBool;
  p.summarise = t.numel() > kSummariseAbove;
  p.vals.resize(static_cast<size_t>(t.numel()));
  copy_to_host_as(t, kFloat64, p.vals.data());  // one copy, whatever the device
  if (p.floating) {
    double mx = 0, mn = INFINITY;
    for (double v : p.vals)
      if (std::isfinite(v) && v != 0) {
        mx = std::max(mx, std::fabs(v));
        mn = std::min(mn, std::fabs(v));
      }
    p.sci = mx >= 1e8 || (mn < 1e-4 && mx > 0);
  }
  for (double v : p.vals) p.width = std::max(p.width, static_cast<int>(p.fmt(v).size()));
  os << "tensor(";
  if (t.numel() == 0) os << "[]";
  else p.rec(os, 0, 0, 7);
  return os << ", dtype=" << t.dtype() << ", shape=" << t.shape() << ", device=" << t.device() << ")";
}

}  // namespace ember
