// defines: the elementwise raw ops (binary with broadcasting and type promotion, unary, clamp, where), the
// copy family (copy_, fill_, cast, contiguous, clone, to_device) and check_writable.
#include "op_utils.h"

namespace ember {
namespace detail {
void check_writable(const char* op, const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    EMBER_CHECK(t.stride(d) != 0 || t.size(d) <= 1, Error, op, ": cannot write into ", describe(t),
                ": it is an expanded view whose elements share memory (stride 0 at dim ", d, "); clone() it first");
}
}  // namespace detail

namespace raw {
using detail::describe;
using detail::kernel_view;

namespace {
// The dtype a binary op computes in.
DType compute_dtype(BinaryOp op, DType dt) {
  if (is_float_op(op) && !is_floating(dt)) return kFloat32;  // true division, as PyTorch
  return dt;
}

void check_binary_dtype(BinaryOp op, DType dt, const Tensor& a) {
  EMBER_CHECK_DTYPE(!(dt == kBool && (op == BinaryOp::Sub || op == BinaryOp::Pow)), name(op),
                    ": not supported for bool tensors (got ", describe(a), "); use logical ops or convert first");
}

// A 0-dim tensor holding `s` in `dt` on `dev` (broadcasts against anything).
Tensor scalar_tensor(Scalar s, DType dt, Device dev) {
  Tensor t = detail::new_tensor({}, dt, dev);
  backend_for(dev).fill(t, s.value);
  return t;
}

// dtype of `tensor op scalar`: the tensor's, unless an integer tensor meets a non-integer scalar (float32),
// or a bool tensor meets an integer in arithmetic (int64).
DType scalar_result_dtype(const Tensor& t, Scalar s, BinaryOp op) {
  if (!is_floating(t.dtype()) && !s.integral) return kFloat32;
  if (t.dtype() == kBool && !is_comparison(op) && s.integral && !s.boolean) return kInt64;
  return t.dtype();
}

Tensor run_binary(BinaryOp op, const Tensor& a, const Tensor& b, DType dt) {
  const char* opn = name(op);
  check_binary_dtype(op, dt, a);
  dt = compute_dtype(op, dt);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), opn);
  const MemoryFormat f = detail::output_format(shape, {&a, &b});
  Tensor out = detail::new_tensor(shape, is_comparison(op) ? kBool : dt, a.device(), f);
  backend_for(a.device())
      .binary(op, kernel_view(out, f), kernel_view(expand(cast(a, dt), shape), f),
              kernel_view(expand(cast(b, dt), shape), f));
  return out;
}
}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  detail::check_defined(name(op), a, "a");
  detail::check_defined(name(op), b, "b");
  detail::check_same_device(name(op), a, b);
  return run_binary(op, a, b, promote_types(a.dtype(), b.dtype()));
}

Tensor binary(BinaryOp op, const Tensor& a, Scalar b) {
  detail::check_defined(name(op), a, "a");
  DType dt = scalar_result_dtype(a, b, op);
  return run_binary(op, a, scalar_tensor(b, dt, a.device()), dt);
}

Tensor binary(BinaryOp op, Scalar a, const Tensor& b) {
  detail::check_defined(name(op), b, "b");
  DType dt = scalar_result_dtype(b, a, op);
  return run_binary(op, scalar_tensor(a, dt, b.device()), b, dt);
}

Tensor& binary_(BinaryOp op, Tensor& self, const Tensor& other_in) {
  const char* opn = name(op);
  detail::check_defined(opn, self, "self");
  detail::check_defined(opn, other_in, "other");
  detail::check_same_device(opn, self, other_in);
  EMBER_CHECK(!is_comparison(op), Error, opn, "_: comparisons have no in-place form");
  DType dt = compute_dtype(op, promote_types(self.dtype(), other_in.dtype()));
  EMBER_CHECK_DTYPE(dt == self.dtype() || is_floating(self.dtype()) || (!is_floating(dt) && self.dtype() != kBool), opn,
                    "_: result dtype ", dt, " cannot be stored in ", describe(self), " in place");
  check_binary_dtype(op, self.dtype(), self);
  Shape shape = broadcast_shapes(self.shape(), other_in.shape(), opn);
  EMBER_CHECK_SHAPE(shape == self.shape(), opn, "_: the result shape ", shape, " differs from the in-place target ",
                    describe(self), " (other is ", describe(other_in), ")");
  detail::check_writable(opn, self);
  // Reading `other` while writing `self` is safe only if they are the same view or do not share memory.
  Tensor other =
      (detail::shares_storage(self, other_in) && !detail::same_view(self, other_in)) ? clone(other_in) : other_in;
  const MemoryFormat f = self.suggest_memory_format();
  const Tensor target = kernel_view(self, f);
  backend_for(self.device()).binary(op, target, target, kernel_view(expand(cast(other, self.dtype()), shape), f));
  self.impl()->bump_version();
  return self;
}

Tensor& binary_(BinaryOp op, Tensor& self, Scalar other) {
  detail::check_defined(name(op), self, "self");
  // same dtype rules as out of place, so e.g. bool_tensor.add_(2) is refused instead of storing true
  Tensor s = scalar_tensor(other, scalar_result_dtype(self, other, op), self.device());
  return binary_(op, self, s);
}

Tensor unary(UnaryOp op, const Tensor& x) {
  detail::check_defined(name(op), x, "x");
  EMBER_CHECK_DTYPE(!(x.dtype() == kBool && op == UnaryOp::Neg), "neg: not supported for bool tensors (got ",
                    describe(x), "); use logical_not");
  DType dt = is_float_op(op) && !is_floating(x.dtype()) ? kFloat32 : x.dtype();
  const MemoryFormat f = x.suggest_memory_format();
  Tensor out = detail::new_tensor(x.shape(), dt, x.device(), f);
  backend_for(x.device()).unary(op, kernel_view(out, f), kernel_view(cast(x, dt), f));
  return out;
}

Tensor& unary_(UnaryOp op, Tensor& self) {
  detail::check_defined(name(op), self, "self");
  EMBER_CHECK_DTYPE(!is_float_op(op) || is_floating(self.dtype()), name(op),
                    "_: needs a floating tensor in place, got ", describe(self));
  EMBER_CHECK_DTYPE(!(self.dtype() == kBool && op == UnaryOp::Neg), "neg_: not supported for bool tensors");
  detail::check_writable(name(op), self);
  const Tensor target = kernel_view(self, self.suggest_memory_format());
  backend_for(self.device()).unary(op, target, target);
  self.impl()->bump_version();
  return self;
}

Tensor clamp(const Tensor& x, double lo, double hi) {
  detail::check_defined("clamp", x, "x");
  EMBER_CHECK_VALUE(!(lo > hi), "clamp: min ", lo, " is greater than max ", hi);
  EMBER_CHECK_DTYPE(x.dtype() != kBool, "clamp: not supported for bool tensors");
  const MemoryFormat f = x.suggest_memory_format();
  Tensor out = detail::new_tensor(x.shape(), x.dtype(), x.device(), f);
  backend_for(x.device()).clamp(kernel_view(out, f), kernel_view(x, f), lo, hi);
  return out;
}

Tensor& clamp_(Tensor& self, double lo, double hi) {
  detail::check_defined("clamp_", self, "self");
  EMBER_CHECK_VALUE(!(lo > hi), "clamp_: min ", lo, " is greater than max ", hi);
  EMBER_CHECK_DTYPE(self.dtype() != kBool, "clamp_: not supported for bool tensors");
  detail::check_writable("clamp_", self);
  const Tensor target = kernel_view(self, self.suggest_memory_format());
  backend_for(self.device()).clamp(target, target, lo, hi);
  self.impl()->bump_version();
  return self;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  detail::check_defined("where", cond, "cond");
  detail::check_defined("where", a, "a");
  detail::check_defined("where", b, "b");
  detail::check_same_device("where", cond, a);
  detail::check_same_device("where", a, b);
  EMBER_CHECK_DTYPE(cond.dtype() == kBool, "where: condition must be a bool tensor, got ", describe(cond));
  DType dt = promote_types(a.dtype(), b.dtype());
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  const MemoryFormat f = detail::output_format(shape, {&a, &b, &cond});
  Tensor out = detail::new_tensor(shape, dt, a.device(), f);
  backend_for(a.device())
      .where(kernel_view(out, f), kernel_view(expand(cond, shape), f), kernel_view(expand(cast(a, dt), shape), f),
             kernel_view(expand(cast(b, dt), shape), f));
  return out;
}

// --- copies

Tensor& copy_(Tensor& dst, const Tensor& src_in, bool non_blocking) {
  detail::check_defined("copy_", dst, "dst");
  detail::check_defined("copy_", src_in, "src");
  Shape shape = broadcast_shapes(dst.shape(), src_in.shape(), "copy_");
  EMBER_CHECK_SHAPE(shape == dst.shape(), "copy_: source ", describe(src_in), " does not broadcast to destination ",
                    describe(dst));
  detail::check_writable("copy_", dst);
  if (dst.numel() == 0) return dst;
  Tensor src = (detail::shares_storage(dst, src_in) && !detail::same_view(dst, src_in)) ? clone(src_in) : src_in;
  // A copy between devices is done by the non-CPU side's backend (it owns the transfer calls).
  Device dev = dst.device().is_cpu() ? src.device() : dst.device();
  backend_for(dev).copy(dst, expand(src, shape), non_blocking);
  dst.impl()->bump_version();
  return dst;
}

Tensor& fill_(Tensor& dst, Scalar v) {
  detail::check_defined("fill_", dst, "dst");
  detail::check_writable("fill_", dst);
  backend_for(dst.device()).fill(dst, v.value);
  dst.impl()->bump_version();
  return dst;
}

Tensor cast(const Tensor& x, DType dtype) {
  detail::check_defined("to", x, "x");
  if (x.dtype() == dtype) return x;
  Tensor out = detail::new_tensor(x.shape(), dtype, x.device(), x.suggest_memory_format());  // copy takes any dst
  backend_for(x.device()).copy(out, x);
  return out;
}

Tensor contiguous(const Tensor& x) {
  detail::check_defined("contiguous", x, "x");
  return x.is_contiguous() ? x : clone(x);
}

Tensor clone(const Tensor& x) { return clone(x, MemoryFormat::Contiguous); }

Tensor contiguous(const Tensor& x, MemoryFormat f) {
  detail::check_defined("contiguous", x, "x");
  EMBER_CHECK_VALUE(f != MemoryFormat::Preserve, "contiguous: preserve_format is not a layout to make (as in ",
                    "PyTorch); ask for Contiguous or ChannelsLast");
  EMBER_CHECK_SHAPE(f != MemoryFormat::ChannelsLast || x.dim() == 4,
                    "contiguous: channels_last needs a 4-D [N, C, H, W] tensor, got ", describe(x));
  return x.is_contiguous(f) ? x : clone(x, f);
}

Tensor clone(const Tensor& x, MemoryFormat f) {
  detail::check_defined("clone", x, "x");
  if (f == MemoryFormat::Preserve) f = x.suggest_memory_format();
  EMBER_CHECK_SHAPE(f != MemoryFormat::ChannelsLast || x.dim() == 4,
                    "clone: channels_last needs a 4-D [N, C, H, W] tensor, got ", describe(x));
  Tensor out = detail::new_tensor(x.shape(), x.dtype(), x.device(), f);
  if (x.numel()) backend_for(x.device()).copy(out, x);
  return out;
}

Tensor to_device(const Tensor& x, Device device, bool non_blocking) {
  detail::check_defined("to", x, "x");
  if (x.device() == device) return x;
  // A channels-last tensor arrives channels-last (as PyTorch's to(); its NHWC views are contiguous: one transfer).
  const MemoryFormat f = x.suggest_memory_format();
  Tensor out = detail::new_tensor(x.shape(), x.dtype(), device, f);  // throws DeviceError if device is unusable
  if (x.numel())
    backend_for(device.is_cpu() ? x.device() : device).copy(kernel_view(out, f), kernel_view(x, f), non_blocking);
  return out;
}

}  // namespace raw
}  // namespace ember
