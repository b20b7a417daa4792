// defines: the reduction raw ops (sum, mean, max, min, var, argmax, argmin, cumsum, sum_to) and softmax/log_softmax.
#include <algorithm>

#include "op_utils.h"

namespace ember::raw {
using detail::describe;

namespace {
// Normalised, sorted, duplicate-free dims; empty means all.
std::vector<int64_t> reduce_dims(const Tensor& x, const std::vector<int64_t>& dims, const char* op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    int64_t n = normalize_dim(d, x.dim(), op);
    if (x.dim() == 0) continue;  // a 0-dim tensor reduces over nothing
    EMBER_CHECK_INDEX(std::find(out.begin(), out.end(), n) == out.end(), op, ": dim ", n, " appears more than once in ",
                      Shape(dims));
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}
Shape kept_shape(const Tensor& x, const std::vector<int64_t>& dims) {
  Shape s = x.shape();
  for (int64_t d : dims) s[static_cast<size_t>(d)] = 1;
  return s;
}
Shape dropped_shape(const Tensor& x, const std::vector<int64_t>& dims) {
  Shape s;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) s.push_back(x.size(d));
  return s;
}
}  // namespace

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim, const char* opname) {
  detail::check_defined(opname, x, "x");
  std::vector<int64_t> dims = reduce_dims(x, dims_in, opname);
  const bool is_arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  if (op != ReduceOp::Sum && op != ReduceOp::Prod) {
    for (int64_t d : dims)
      EMBER_CHECK_INDEX(x.size(d) > 0, opname, ": cannot reduce over dim ", d, " of size 0 (input ", describe(x),
                        "): the result has no identity");
    EMBER_CHECK_INDEX(!(dims.empty() && x.numel() == 0), opname, ": cannot reduce an empty tensor");
  }
  DType dt = x.dtype();
  if (is_arg) dt = kInt64;
  else if ((op == ReduceOp::Sum || op == ReduceOp::Prod) && !is_floating(dt)) dt = kInt64;
  Tensor out = detail::new_tensor(kept_shape(x, dims), dt, x.device());
  backend_for(x.device()).reduce(op, out, x, dims);
  return keepdim ? out : view(out, dropped_shape(x, dims));
}

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(ReduceOp::Sum, x, dims, keepdim, "sum");
}
Tensor max(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(ReduceOp::Max, x, dims, keepdim, "max");
}
Tensor min(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(ReduceOp::Min, x, dims, keepdim, "min");
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  detail::check_defined("mean", x, "x");
  detail::check_floating("mean", x);
  std::vector<int64_t> d = reduce_dims(x, dims, "mean");
  int64_t count = 1;
  for (int64_t k : d) count *= x.size(k);
  Tensor s = reduce(ReduceOp::Sum, x, d, keepdim, "mean");
  backend_for(s.device())
      .binary(BinaryOp::Div, s, s,
              expand(full({}, static_cast<double>(count), {.dtype = s.dtype(), .device = s.device()}), s.shape()));
  return s;
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, int64_t correction) {
  detail::check_defined("var", x, "x");
  detail::check_floating("var", x);
  EMBER_CHECK_VALUE(correction >= 0, "var: correction must be >= 0, got ", correction);
  std::vector<int64_t> d = reduce_dims(x, dims, "var");
  int64_t count = 1;
  for (int64_t k : d) count *= x.size(k);
  Tensor centered = binary(BinaryOp::Sub, x, mean(x, d, true));
  Tensor ss = sum(unary(UnaryOp::Square, centered), d, keepdim);
  // N - correction <= 0 gives inf or nan, as in PyTorch
  return binary(BinaryOp::Div, ss, Scalar(static_cast<double>(std::max<int64_t>(count - correction, 0))));
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined("argmax", x, "x");
  return reduce(ReduceOp::ArgMax, x, {normalize_dim(dim, x.dim(), "argmax")}, keepdim, "argmax");
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined("argmin", x, "x");
  return reduce(ReduceOp::ArgMin, x, {normalize_dim(dim, x.dim(), "argmin")}, keepdim, "argmin");
}

Tensor cumsum(const Tensor& x, int64_t dim, bool reverse) {
  detail::check_defined("cumsum", x, "x");
  const int64_t d = normalize_dim(dim, x.dim(), "cumsum");
  // integers and bools add up in int64 (as PyTorch's); the kernel reads a contiguous copy in the result's dtype
  const DType dt = is_floating(x.dtype()) ? x.dtype() : kInt64;
  const Tensor xc = contiguous(cast(x, dt));
  Tensor out = detail::new_tensor(x.shape(), dt, x.device());
  if (x.dim() == 0) {  // one element: the sum is itself
    backend_for(x.device()).copy(out, xc);
  } else if (out.numel() > 0) {
    backend_for(x.device()).cumsum(out, xc, d, reverse);
  }
  return out;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  detail::check_defined("sum_to", x, "x");
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  EMBER_CHECK_SHAPE(lead >= 0, "sum_to: cannot reduce ", x.shape(), " to the larger rank ", shape);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
      continue;
    }
    const int64_t want = shape[static_cast<size_t>(d - lead)];
    if (want == 1 && x.size(d) != 1) dims.push_back(d);
    else EMBER_CHECK_SHAPE(want == x.size(d), "sum_to: ", x.shape(), " does not broadcast from ", shape);
  }
  Tensor s = dims.empty() ? x : sum(x, dims, true);
  return reshape(s, shape);
}

namespace {
Tensor softmax_impl(const Tensor& x, int64_t dim, bool log, const char* op) {
  detail::check_defined(op, x, "x");
  detail::check_floating(op, x);
  dim = normalize_dim(dim, x.dim(), op);
  Tensor out = empty_like(x);
  if (x.dim() == 0) {  // a single element: softmax 1, log_softmax 0
    backend_for(x.device()).fill(out, log ? 0.0 : 1.0);
    return out;
  }
  backend_for(x.device()).softmax(out, x, dim, log);
  return out;
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true, "log_softmax"); }

namespace {
constexpr const char* kClassCe = "class_cross_entropy";

// logits [N, C] floating and targets [N] integer on its device; the targets as the kernels take them (int64,
// contiguous) and the compute dtype.
Tensor checked_targets(const Tensor& logits, const Tensor& targets) {
  detail::check_defined(kClassCe, logits, "logits");
  detail::check_defined(kClassCe, targets, "targets");
  detail::check_floating(kClassCe, logits);
  EMBER_CHECK_SHAPE(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0), kClassCe,
                    ": expected logits [N, C] and targets [N], got ", describe(logits), " and ", describe(targets));
  EMBER_CHECK_DTYPE(targets.dtype() == kInt64 || targets.dtype() == kInt32, kClassCe,
                    ": targets must be int64 or int32 class indices, got ", describe(targets));
  EMBER_CHECK_DEVICE(targets.device() == logits.device(), kClassCe, ": logits and targets on different devices: ",
                     describe(logits), " and ", describe(targets));
  return contiguous(cast(targets, kInt64));
}
DType stats_dtype(const Tensor& logits) { return logits.dtype() == kFloat64 ? kFloat64 : kFloat32; }
}  // namespace

ClassCrossEntropy class_cross_entropy(const Tensor& logits_in, const Tensor& targets_in) {
  const Tensor targets = checked_targets(logits_in, targets_in);
  const Tensor logits = contiguous(logits_in);
  const int64_t n = logits.size(0);
  ClassCrossEntropy r{detail::new_tensor(Shape{n}, stats_dtype(logits), logits.device()),
                      detail::new_tensor(Shape{n, 2}, stats_dtype(logits), logits.device())};
  if (n > 0) {
    EMBER_CHECK_SHAPE(logits.size(1) > 0, kClassCe, ": logits ", describe(logits), " have no classes");
    backend_for(logits.device()).class_cross_entropy(r.loss, r.stats, logits, targets);
  }
  return r;
}

Tensor class_cross_entropy_backward(const Tensor& logits_in, const Tensor& targets_in, const Tensor& stats,
                                    const Tensor& scale_in) {
  const Tensor targets = checked_targets(logits_in, targets_in);
  const Tensor logits = contiguous(logits_in);
  const int64_t n = logits.size(0);
  EMBER_CHECK_SHAPE(stats.defined() && stats.shape() == Shape({n, 2}) && stats.dtype() == stats_dtype(logits), kClassCe,
                    ": backward expects the forward's statistics [", n, ", 2], got ", describe(stats));
  EMBER_CHECK_SHAPE(scale_in.defined() && (scale_in.numel() == 1 || scale_in.shape() == Shape({n})), kClassCe,
                    ": backward expects one scale or [", n, "], got ", describe(scale_in));
  const Tensor scale = contiguous(cast(scale_in, stats_dtype(logits)));
  Tensor d = detail::new_tensor(logits.shape(), logits.dtype(), logits.device());
  if (d.numel() > 0)
    backend_for(logits.device()).class_cross_entropy_backward(d, logits, targets, contiguous(stats), scale);
  return d;
}

}  // namespace ember::raw
