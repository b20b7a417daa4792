// defines: CudaBackend's conv2d (cuDNN, cudnn.cpp) and pooling (kernels/pool.cu), forward and backward
// (contracts in core/include/ember/core/backend.h; each checks nothing raw_ops has checked and runs on the
// current stream of its tensors' device).
#include "compute_internal.h"
#include "cuda_backend.h"
#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"
#include "ember/internal/conv_channels_last.h"
#include "kernel_args.h"
#include "kernels/launch.h"

namespace ember::cuda {
namespace {

using detail::OnDevice;

}  // namespace

// float16 / bfloat16 convolutions run in cuDNN's 16-bit kernels (tensor cores, float accumulation) where the GPU
// has them (detail::cudnn_takes), else in float32 as on the CPU.
void CudaBackend::conv2d(const Tensor& out, const Tensor& x_in, const Tensor& w_in, const Tensor& b,
                         const Conv2dParams& p) {
  if (out.numel() == 0) return;
  if (is_reduced_float(out.dtype()) && !detail::cudnn_takes(out.dtype(), out.device().index())) {
    Tensor tmp = empty(out.shape(), {.dtype = kFloat32, .device = out.device()});
    conv2d(tmp, raw::cast(x_in, kFloat32), raw::cast(w_in, kFloat32), b.defined() ? raw::cast(b, kFloat32) : b, p);
    copy(out, tmp);
    return;
  }
  OnDevice on(out);
  // one dtype for cuDNN's three descriptors (a no-op when the raw op has promoted them already), and one layout:
  // the output's, NCHW or channels-last (the raw op allocates all three in one)
  const MemoryFormat f = out.suggest_memory_format();
  const Tensor x = raw::contiguous(raw::cast(x_in, out.dtype()), f),
               w = raw::contiguous(raw::cast(w_in, out.dtype()), f);
  if (x.numel() == 0 || w.numel() == 0) fill(out, 0);  // no input channels: only the bias
  else detail::cudnn_conv2d(out, x, w, p);
  if (b.defined()) binary(BinaryOp::Add, out, out, raw::expand(raw::reshape(b, {1, b.numel(), 1, 1}), out.shape()));
}

void CudaBackend::conv2d_backward(const Conv2dGradArgs& a) {
  const Tensor &gx = a.gx, &gw = a.gw, &gb = a.gb, &gy_in = a.gy, &x_in = a.x, &w_in = a.w;
  const Conv2dParams& p = a.p;
  if (is_reduced_float(x_in.dtype()) && !detail::cudnn_takes(x_in.dtype(), x_in.device().index())) {
    auto f32 = [](const Tensor& t) {
      return t.defined() ? empty(t.shape(), {.dtype = kFloat32, .device = t.device()}) : t;
    };
    Tensor gxf = f32(gx), gwf = f32(gw), gbf = f32(gb);
    conv2d_backward({.gx = gxf,
                     .gw = gwf,
                     .gb = gbf,
                     .gy = raw::cast(gy_in, kFloat32),
                     .x = raw::cast(x_in, kFloat32),
                     .w = raw::cast(w_in, kFloat32),
                     .p = p});
    if (gx.defined()) copy(gx, gxf);
    if (gw.defined()) copy(gw, gwf);
    if (gb.defined()) copy(gb, gbf);
    return;
  }
  OnDevice on(gy_in);
  const DType dt = x_in.dtype();
  // x and gx share cuDNN's descriptor, as do w and gw: each pair in one layout (the raw op's, NCHW or channels-last)
  const MemoryFormat f = ember::detail::conv_memory_format(x_in, w_in);
  const Tensor gy = raw::contiguous(raw::cast(gy_in, dt), f), x = raw::contiguous(x_in, f),
               w = raw::contiguous(raw::cast(w_in, dt), f);
  auto in_layout = [&](const Tensor& g) {  // g itself when dense in f, else a buffer that is
    return !g.defined() || g.is_contiguous(f) ? g : empty(g.shape(), {.dtype = g.dtype(), .device = g.device()}, f);
  };
  const Tensor gxl = in_layout(gx), gwl = in_layout(gw);
  if (gy.numel() == 0 || x.numel() == 0 || w.numel() == 0) {  // some extent is 0: the gradients are 0
    if (gx.defined()) fill(gx, 0);
    if (gw.defined()) fill(gw, 0);
  } else {
    detail::cudnn_conv2d_backward(gy, x, w, gxl, gwl, p);
    if (gx.defined() && !gxl.is_same(gx)) copy(gx, gxl);
    if (gw.defined() && !gwl.is_same(gw)) copy(gw, gwl);
  }
  if (gb.defined()) reduce(ReduceOp::Sum, raw::view(gb, {1, gb.numel(), 1, 1}), gy, {0, 2, 3});
}

namespace {
// x, y: [N, C, H, W] and [N, C, OH, OW] (either may be the output), both dense in `f`.
kernels::PoolShape pool_shape(const Tensor& x, const Tensor& y, const Pool2dParams& p, MemoryFormat f) {
  kernels::PoolShape s;
  s.nc = x.size(0) * x.size(1);
  s.c = x.size(1);
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
  s.channels_last = f == MemoryFormat::ChannelsLast;
  return s;
}
}  // namespace

void CudaBackend::pool2d(PoolKind kind, const Tensor& out, const Tensor& x_in, const Pool2dParams& p) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  const MemoryFormat f = ember::detail::pool_memory_format(x_in, out);  // memory::plan plans the same copies
  EMBER_INTERNAL_ASSERT(out.is_contiguous(f), "pool2d: the output must be dense in NCHW or channels-last");
  const Tensor x = raw::contiguous(x_in, f);
  kernels::launch_pool2d(kind == PoolKind::Max, out.dtype(), out.data_ptr(), x.data_ptr(), pool_shape(x, out, p, f),
                         on.stream);
}

void CudaBackend::pool2d_backward(PoolKind kind, const Tensor& gx, const Tensor& gy_in, const Tensor& x_in,
                                  const Pool2dParams& p) {
  if (gx.numel() == 0) return;
  OnDevice on(gx);
  const MemoryFormat f = ember::detail::pool_memory_format(x_in, gx);
  EMBER_INTERNAL_ASSERT(gx.is_contiguous(f), "pool2d_backward: the gradient must be dense in NCHW or channels-last");
  const Tensor x = raw::contiguous(x_in, f), gy = raw::contiguous(gy_in, f);
  // the kernel writes every element of gx (0 where no window routes a gradient)
  kernels::launch_pool2d_backward(kind == PoolKind::Max, gx.dtype(), gx.data_ptr(), gy.data_ptr(), x.data_ptr(),
                                  pool_shape(x, gy, p, f), on.stream);
}

}  // namespace ember::cuda
