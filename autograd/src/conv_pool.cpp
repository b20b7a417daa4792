// defines: the public conv2d, max_pool2d and avg_pool2d of ops.h, recording their backward when an input
// requires grad, and adaptive_avg_pool2d (a composite of two matmuls).
#include <limits>

#include "ember/autograd/engine.h"
#include "ember/autograd/ops.h"
#include "ember/core/factory.h"
#include "grad_utils.h"

namespace ember {

namespace {
// The composites a create_graph pass differentiates instead of the fused kernels (autograd::grads_by_recompute),
// built of differentiable ops: each window offset (i, j) of the kernel reads one strided slice of the padded input.
// The window comes from the raw ops' own resolution of the arguments (raw::conv_params / pool_params), and the output
// size from the forward's output.
struct Window {
  int64_t kh, kw, sh, sw, ph, pw;
  int64_t oh, ow;  // the output's height and width
};
Window conv_window(const Conv2dParams& p, const Tensor& w, const Shape& out) {
  return {w.size(2), w.size(3), p.stride_h, p.stride_w, p.pad_h, p.pad_w, out[2], out[3]};
}
Window pool_window(const Pool2dParams& p, const Shape& out) {
  return {p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w, out[2], out[3]};
}
// The [N, C, OH, OW] slice of the padded input xp that kernel offset (i, j) reads.
Tensor offset_slice(const Tensor& xp, const Window& win, int64_t i, int64_t j) {
  return xp.slice(2, i, i + (win.oh - 1) * win.sh + 1, win.sh).slice(3, j, j + (win.ow - 1) * win.sw + 1, win.sw);
}
Tensor padded(const Tensor& x, const Window& win, double value) {
  return win.ph == 0 && win.pw == 0 ? x : pad(x, {win.pw, win.pw, win.ph, win.ph}, value);
}

// conv2d as one [N, OH, OW, C] x [C, K] product per kernel offset, summed.
Tensor conv2d_composite(const Tensor& x, const Tensor& w, const Tensor& b, const Window& win) {
  const Tensor xp = padded(x, win, 0.0);
  Tensor acc;
  for (int64_t i = 0; i < win.kh; ++i)
    for (int64_t j = 0; j < win.kw; ++j) {
      const Tensor term = matmul(offset_slice(xp, win, i, j).permute({0, 2, 3, 1}), w.select(3, j).select(2, i).t());
      acc = acc.defined() ? acc + term : term;
    }
  Tensor y = acc.permute({0, 3, 1, 2});
  return b.defined() ? y + b.reshape({1, b.size(0), 1, 1}) : y;
}
// max (of -inf padding: never chosen over an element) or average (over the whole window, padding included, as
// the kernels) of the kernel offsets' slices. Ties between offsets share the gradient here, where the fused
// backward gives it to the first maximum: the two agree wherever the maximum is unique.
Tensor pool2d_composite(const Tensor& x, const Window& win, bool is_max) {
  const Tensor xp = padded(x, win, is_max ? -std::numeric_limits<double>::infinity() : 0.0);
  Tensor acc;
  for (int64_t i = 0; i < win.kh; ++i)
    for (int64_t j = 0; j < win.kw; ++j) {
      const Tensor s = offset_slice(xp, win, i, j);
      acc = !acc.defined() ? s : is_max ? maximum(acc, s) : acc + s;
    }
  return is_max ? acc : acc * (1.0 / static_cast<double>(win.kh * win.kw));
}
}  // namespace

// --- convolution family
Tensor conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, std::vector<int64_t> s,
              std::vector<int64_t> p) {
  OpEntry op(opdef::conv2d);
  const Tensor &x = op.in(x_in), &w = op.in(w_in), &b = op.in(b_in);  // autocast
  Tensor y = raw::conv2d(x, w, b, s, p);
  if (!op.needs_grad({&x, &w, &b})) return y;
  const bool nx = x.requires_grad(), nw = w.requires_grad(), nb = b.defined() && b.requires_grad();
  op.record({x, w, b}, {y})
      .backward([s, p, nx, nw, nb, sx = save(x), sw = save(w), sb = save(b)](const Grads& g) -> Grads {
        if (autograd::create_graph_enabled()) {  // differentiable again: through the composite
          const Tensor xv = sx.get(), wv = sw.get();
          const Window win = conv_window(raw::conv_params(xv, wv, s, p), wv, g[0].shape());
          return autograd::grads_by_recompute(
              {xv, wv, sb.get()},
              [&](const std::vector<Tensor>& in) { return conv2d_composite(in[0], in[1], in[2], win); }, g[0]);
        }
        raw::Conv2dGrads r = raw::conv2d_backward(g[0], sx.get(), sw.get(), s, p, nx, nw, nb);
        return {r.x, r.w, r.b};
      });
  return y;
}
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p) {
  OpEntry op(opdef::max_pool2d);
  Tensor y = raw::max_pool2d(x, k, s, p);
  if (!op.needs_grad({&x})) return y;
  op.record({x}, {y}).backward([k, s, p, sx = save(x)](const Grads& g) -> Grads {
    if (autograd::create_graph_enabled()) {  // differentiable again: through the composite
      const Tensor xv = sx.get();
      const Window win = pool_window(raw::pool_params(opdef::max_pool2d.name, xv, k, s, p), g[0].shape());
      return autograd::grads_by_recompute(
          {xv}, [&](const std::vector<Tensor>& in) { return pool2d_composite(in[0], win, true); }, g[0]);
    }
    return {raw::max_pool2d_backward(g[0], sx.get(), k, s, p)};
  });
  return y;
}
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p) {
  OpEntry op(opdef::avg_pool2d);
  Tensor y = raw::avg_pool2d(x, k, s, p);
  if (!op.needs_grad({&x})) return y;
  op.record({x}, {y}).backward([k, s, p, sx = save(x)](const Grads& g) -> Grads {
    if (autograd::create_graph_enabled()) {  // differentiable again: through the composite
      const Tensor xv = sx.get();
      const Window win = pool_window(raw::pool_params(opdef::avg_pool2d.name, xv, k, s, p), g[0].shape());
      return autograd::grads_by_recompute(
          {xv}, [&](const std::vector<Tensor>& in) { return pool2d_composite(in[0], win, false); }, g[0]);
    }
    return {raw::avg_pool2d_backward(g[0], sx.get(), k, s, p)};
  });
  return y;
}

namespace {
// The [out, in] matrix whose row i averages PyTorch's adaptive bin i: inputs floor(i * in / out) to
// ceil((i + 1) * in / out) - 1 (neighbouring bins overlap when out does not divide in).
Tensor bin_means(int64_t out, int64_t in, const TensorOptions& opts) {
  std::vector<double> m(static_cast<size_t>(out * in), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const int64_t start = i * in / out, end = ((i + 1) * in + out - 1) / out;
    for (int64_t j = start; j < end; ++j) m[static_cast<size_t>(i * in + j)] = 1.0 / static_cast<double>(end - start);
  }
  return tensor(m, {out, in}, opts);
}
}  // namespace

// Averaging bins is linear in x: y = Ph x Pw^T with the bin matrices of the rows and the columns, two matmuls that
// autograd differentiates (twice) and both devices run.
Tensor adaptive_avg_pool2d(const Tensor& x_in, std::vector<int64_t> output_size) {
  OpEntry op(opdef::adaptive_avg_pool2d);
  autograd::check_defined(op.name(), x_in, "x");
  EMBER_CHECK_SHAPE(x_in.dim() == 3 || x_in.dim() == 4, op.name(), ": expected x [N, C, H, W] or [C, H, W], got ",
                    x_in.dtype(), x_in.shape());
  EMBER_CHECK_DTYPE(is_floating(x_in.dtype()), op.name(), ": expected a floating-point tensor, got ", x_in.dtype(),
                    x_in.shape());
  EMBER_CHECK_VALUE(output_size.size() == 1 || output_size.size() == 2, op.name(),
                    ": output_size takes 1 or 2 values, got ", Shape(output_size));
  const int64_t oh = output_size[0], ow = output_size.back();
  EMBER_CHECK_VALUE(oh >= 0 && ow >= 0, op.name(), ": output_size must be non-negative, got ", Shape(output_size));
  const int64_t h = x_in.size(-2), w = x_in.size(-1);
  EMBER_CHECK_SHAPE(h > 0 && w > 0, op.name(), ": expected a non-empty H and W, got ", x_in.dtype(), x_in.shape());
  const Tensor x = autograd::composite_input(op.name(), x_in);  // 16-bit floats in float32
  const TensorOptions opts{.dtype = x.dtype(), .device = x.device()};
  const Tensor ph = bin_means(oh, h, opts), pw_t = bin_means(ow, w, opts).t();
  // the cheaper order: rows first costs oh*H*W + oh*W*ow multiply-adds, columns first H*W*ow + oh*H*ow
  const bool rows_first = oh * w * (h + ow) <= h * ow * (w + oh);
  const Tensor y = rows_first ? matmul(matmul(ph, x), pw_t) : matmul(ph, matmul(x, pw_t));
  return autograd::composite_result(y, x_in);
}

}  // namespace ember
