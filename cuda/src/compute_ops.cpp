// defines: CudaBackend's compute ops: each checks nothing raw_ops has checked (contracts in
// core/include/ember/core/backend.h), prepares its arguments and calls a launcher of kernels/ (own kernels),
// cublas_matmul (blas.cpp) or the cuDNN convolutions (dnn.cpp). Every op runs on the current stream of its
// tensors' device; float16/bfloat16 compute in float (inside the kernels, or through float32 temporaries).
#include <initializer_list>
#include <vector>

#include "compute_internal.h"
#include "cuda_backend.h"
#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"
#include "kernel_args.h"
#include "kernels/launch.h"

namespace ember::cuda {
namespace {

using detail::kernel_args;
using detail::KernelArgs;
using detail::OnDevice;

// Scratch memory from the caching allocator on the current stream of `dev` (kept until the Tensor dies).
Tensor scratch(int64_t bytes, Device dev) { return empty({bytes}, {.dtype = kUInt8, .device = dev}); }

// Adds dim (size, stride) to a reduction walk (dim_walk.h, as the CPU backend's); throws past kMaxDims.
void walk_add(kernels::Walk& w, int64_t size, int64_t stride) {
  EMBER_CHECK_DEVICE(w.add(size, stride), "reduce: more than ", kernels::kMaxDims,
                     " dims that cannot be merged (make the input contiguous first)");
}

bool is_reduced(DType dt) { return dt == kFloat16 || dt == kBFloat16; }

}  // namespace

void CudaBackend::unary(UnaryOp op, const Tensor& out, const Tensor& x) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  KernelArgs k = kernel_args(name(op), {&out, &x});
  kernels::launch_unary(op, k.operands[0], k.operands[1], k.layout, on.stream);
}

void CudaBackend::clamp(const Tensor& out, const Tensor& x, double lo, double hi) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  KernelArgs k = kernel_args("clamp", {&out, &x});
  kernels::launch_clamp(k.operands[0], k.operands[1], lo, hi, k.layout, on.stream);
}

void CudaBackend::binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  KernelArgs k = kernel_args(name(op), {&out, &a, &b});
  kernels::launch_binary(op, k.operands[0], k.operands[1], k.operands[2], k.layout,
                         on.stream);
}

void CudaBackend::where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  KernelArgs k = kernel_args("where", {&out, &cond, &a, &b});
  kernels::launch_where(k.operands[0], k.operands[1], k.operands[2], k.operands[3], k.layout, on.stream);
}

void CudaBackend::reduce(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims) {
  if (out.numel() == 0) return;
  std::vector<bool> is_red(static_cast<size_t>(x.dim()), false);
  for (int64_t d : dims) is_red[static_cast<size_t>(d)] = true;
  kernels::Walk kept, red;
  for (int64_t d = 0; d < x.dim(); ++d) walk_add(is_red[static_cast<size_t>(d)] ? red : kept, x.size(d), x.stride(d));
  if (red.numel == 0) {  // an empty dim: sum 0, prod 1 (max/min/arg are refused by raw::reduce)
    fill(out, op == ReduceOp::Prod ? 1.0 : 0.0);
    return;
  }
  OnDevice on(out);
  const int64_t ws_bytes = kernels::reduce_workspace_bytes(op, kept.numel, red.numel);
  Tensor ws = ws_bytes ? scratch(ws_bytes, out.device()) : Tensor();
  KernelArgs k = kernel_args("reduce", {&out});
  k.operands[1].data = x.data_ptr();
  k.operands[1].type = x.dtype();
  kernels::launch_reduce(op, k.operands[0], k.operands[1], kept, red, ws_bytes ? ws.data_ptr() : nullptr, on.stream);
}

void CudaBackend::matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  if (a.size(2) == 0) {  // an empty inner dim: a sum of nothing
    fill(out, 0);
    return;
  }
  if (is_floating(out.dtype())) return detail::cublas_matmul(out, a, b);
  OnDevice on(out);
  const int64_t sa[3] = {a.stride(0), a.stride(1), a.stride(2)}, sb[3] = {b.stride(0), b.stride(1), b.stride(2)};
  kernels::launch_matmul_int(out.dtype(), out.data_ptr(), a.data_ptr(), b.data_ptr(), out.size(0),
                             out.size(1), out.size(2), a.size(2), sa, sb, on.stream);
}

void CudaBackend::softmax(const Tensor& out, const Tensor& x_in, int64_t dim, bool log) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  const Tensor x = raw::contiguous(x_in);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  kernels::launch_softmax(x.dtype(), out.data_ptr(), x.data_ptr(), outer, x.size(dim), inner, log,
                          on.stream);
}

// float16 / bfloat16 convolutions run in float32 (as on the CPU); cuDNN takes float32 and float64.
void CudaBackend::conv2d(const Tensor& out, const Tensor& x_in, const Tensor& w_in, const Tensor& b,
                         const Conv2dParams& p) {
  if (out.numel() == 0) return;
  if (is_reduced(out.dtype())) {
    Tensor tmp = empty(out.shape(), {.dtype = kFloat32, .device = out.device()});
    conv2d(tmp, raw::cast(x_in, kFloat32), raw::cast(w_in, kFloat32), b.defined() ? raw::cast(b, kFloat32) : b, p);
    copy(out, tmp);
    return;
  }
  OnDevice on(out);
  const Tensor x = raw::contiguous(x_in), w = raw::contiguous(w_in);
  if (x.numel() == 0 || w.numel() == 0) fill(out, 0);  // no input channels: only the bias
  else detail::cudnn_conv2d(out, x, w, p);
  if (b.defined()) binary(BinaryOp::Add, out, out, raw::expand(raw::reshape(b, {1, b.numel(), 1, 1}), out.shape()));
}

void CudaBackend::conv2d_backward(const Tensor& gy_in, const Tensor& x_in, const Tensor& w_in, const Tensor& gx,
                                  const Tensor& gw, const Tensor& gb, const Conv2dParams& p) {
  if (is_reduced(x_in.dtype())) {
    auto f32 = [](const Tensor& t) { return t.defined() ? empty(t.shape(), {.dtype = kFloat32, .device = t.device()}) : t; };
    Tensor gxf = f32(gx), gwf = f32(gw), gbf = f32(gb);
    conv2d_backward(raw::cast(gy_in, kFloat32), raw::cast(x_in, kFloat32), raw::cast(w_in, kFloat32), gxf, gwf, gbf, p);
    if (gx.defined()) copy(gx, gxf);
    if (gw.defined()) copy(gw, gwf);
    if (gb.defined()) copy(gb, gbf);
    return;
  }
  OnDevice on(gy_in);
  const Tensor gy = raw::contiguous(gy_in), x = raw::contiguous(x_in), w = raw::contiguous(w_in);
  if (gy.numel() == 0 || x.numel() == 0 || w.numel() == 0) {  // some extent is 0: the gradients are 0
    if (gx.defined()) fill(gx, 0);
    if (gw.defined()) fill(gw, 0);
  } else {
    detail::cudnn_conv2d_backward(gy, x, w, gx, gw, p);
  }
  if (gb.defined()) reduce(ReduceOp::Sum, raw::view(gb, {1, gb.numel(), 1, 1}), gy, {0, 2, 3});
}

namespace {
kernels::PoolShape pool_shape(const Tensor& x, const Tensor& y, const Pool2dParams& p) {
  kernels::PoolShape s;
  s.nc = x.size(0) * x.size(1);
  s.h = x.size(2);
  s.w = x.size(3);
  s.oh = y.size(2);
  s.ow = y.size(3);
  s.kh = p.kernel_h;
  s.kw = p.kernel_w;
  s.sh = p.stride_h;
  s.sw = p.stride_w;
  s.ph = p.pad_h;
  s.pw = p.pad_w;
  return s;
}
}  // namespace

void CudaBackend::pool2d(PoolKind kind, const Tensor& out, const Tensor& x_in, const Pool2dParams& p) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  const Tensor x = raw::contiguous(x_in);
  kernels::launch_pool2d(kind == PoolKind::Max, out.dtype(), out.data_ptr(), x.data_ptr(),
                         pool_shape(x, out, p), on.stream);
}

void CudaBackend::pool2d_backward(PoolKind kind, const Tensor& gx, const Tensor& gy_in, const Tensor& x_in,
                                  const Pool2dParams& p) {
  if (gx.numel() == 0) return;
  OnDevice on(gx);
  const Tensor x = raw::contiguous(x_in), gy = raw::contiguous(gy_in);
  // the kernel writes every element of gx (0 where no window routes a gradient)
  kernels::launch_pool2d_backward(kind == PoolKind::Max, gx.dtype(), gx.data_ptr(), gy.data_ptr(),
                                  x.data_ptr(), pool_shape(x, gy, p), on.stream);
}

void CudaBackend::index_select(const Tensor& out, const Tensor& x_in, int64_t dim, const Tensor& index_in) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  const Tensor x = raw::contiguous(x_in), index = raw::contiguous(index_in);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  kernels::launch_index_select(out.data_ptr(), x.data_ptr(), static_cast<const int64_t*>(index.data_ptr()), outer,
                               x.size(dim), index.numel(), inner, static_cast<int>(x.itemsize()), on.stream);
}

void CudaBackend::index_add(const Tensor& out, int64_t dim, const Tensor& index_in, const Tensor& src_in) {
  if (src_in.numel() == 0) return;
  // Atomics exist for float32/64 and int32/64: the other types add in a wider one (float32 for the reduced
  // floats, as on the CPU; int32 for uint8 and bool, converted back with the same wrap / != 0 rules).
  const DType dt = out.dtype();
  if (is_reduced(dt) || dt == kUInt8 || dt == kBool) {
    const DType wide = is_reduced(dt) ? kFloat32 : kInt32;
    Tensor tmp = raw::cast(out, wide);
    index_add(tmp, dim, index_in, raw::cast(src_in, wide));
    copy(out, tmp);
    return;
  }
  OnDevice on(out);
  const Tensor src = raw::contiguous(src_in), index = raw::contiguous(index_in);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.size(d);
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.size(d);
  kernels::launch_index_add(dt, out.data_ptr(), src.data_ptr(),
                            static_cast<const int64_t*>(index.data_ptr()), outer, out.size(dim), index.numel(), inner,
                            on.stream);
}

void CudaBackend::random(RandomKind kind, const Tensor& out, double lo, double hi, PhiloxState state) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  kernels::launch_random(kind, out.dtype(), out.data_ptr(), out.numel(), lo, hi, state.seed, state.offset,
                         on.stream);
}

namespace {
void check_step(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor& p = **ts.begin();
  EMBER_INTERNAL_ASSERT(p.dtype() == kFloat32 || p.dtype() == kFloat64, op,
                        ": the fused update takes float32 or float64, got ", p.dtype());
  for (const Tensor* t : ts)
    EMBER_INTERNAL_ASSERT(!t->defined() || (t->is_contiguous() && t->device() == p.device() && t->dtype() == p.dtype()),
                          op, " takes contiguous tensors of one dtype on one device");
}
}  // namespace

void CudaBackend::sgd_step(const SgdStepArgs& a) {
  check_step("sgd_step", {&a.param, &a.grad, &a.momentum_buf});
  OnDevice on(a.param);
  kernels::launch_sgd(a.param.dtype(), a.param.data_ptr(), a.grad.data_ptr(),
                      a.momentum_buf.defined() ? a.momentum_buf.data_ptr() : nullptr, a.param.numel(), a.hyper,
                      on.stream);
}

void CudaBackend::adam_step(const AdamStepArgs& a) {
  check_step("adam_step", {&a.param, &a.grad, &a.exp_avg, &a.exp_avg_sq});
  OnDevice on(a.param);
  kernels::launch_adam(a.param.dtype(), a.param.data_ptr(), a.grad.data_ptr(), a.exp_avg.data_ptr(),
                       a.exp_avg_sq.data_ptr(), a.param.numel(), a.hyper, on.stream);
}

}  // namespace ember::cuda
