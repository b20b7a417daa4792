// defines: CudaBackend's attention, forward and backward, on kernels/attention.cu (contracts in
// core/include/ember/core/backend.h; raw::attention has checked shapes, dtypes and devices).
#include <algorithm>

#include "cuda_backend.h"
#include "cudnn_attention.h"
#include "ember/core/error.h"
#include "ember/core/raw_ops.h"
#include "kernel_args.h"
#include "kernels/launch.h"

namespace ember::cuda {
namespace {

using detail::OnDevice;

// The kernels keep a row's vectors in registers, up to 256 elements.
void check_width(const AttentionParams& p) {
  EMBER_CHECK_VALUE(p.d <= 256 && p.dv <= 256,
                    "scaled_dot_product_attention: head sizes up to 256 on CUDA, got d = ", p.d, " and dv = ", p.dv,
                    " (split the heads further)");
  // the launch grid: (batch * heads) x (blocks of rows; the kernels walk any number of them)
  EMBER_CHECK_VALUE(p.batch_heads < (int64_t{1} << 31), "scaled_dot_product_attention: batch * heads = ", p.batch_heads,
                    " exceeds the CUDA launch grid (2^31 - 1)");
}

const void* mask_ptr(const Tensor& mask) { return mask.defined() ? mask.data_ptr() : nullptr; }

// The kernels read contiguous [BH, T, d] q, k, v: a strided one (heads of a fused projection) is copied first.
Tensor packed(const Tensor& t, int64_t* stride, int64_t rows) {
  Tensor c = raw::contiguous(t);
  stride[2] = c.size(-1);
  stride[1] = rows * stride[2];
  stride[0] = c.size(1) * stride[1];
  return c;
}

}  // namespace

// float16 / bfloat16 without a mask tensor go to cuDNN's fused flash attention when it serves them
// (cudnn_attention.h; the rule in docs/attention.md), everything else to the own kernels.
void CudaBackend::attention(const AttentionArgs& a) {
  const Tensor &out = a.out, &lse = a.lse, &q = a.q, &k = a.k, &v = a.v, &mask = a.mask;
  const AttentionParams& p = a.p;
  if (detail::cudnn_attention_takes(q, k, v, mask, p) && detail::cudnn_attention_forward(a)) return;
  check_width(p);
  OnDevice on(out);
  AttentionParams pc = p;
  const Tensor qc = packed(q, pc.q_stride, p.tq), kc = packed(k, pc.k_stride, p.tk), vc = packed(v, pc.v_stride, p.tk);
  kernels::launch_attention(q.dtype(), out.data_ptr(), lse.data_ptr(), qc.data_ptr(), kc.data_ptr(), vc.data_ptr(),
                            mask_ptr(mask), pc, on.stream);
}

void CudaBackend::attention_backward(const AttentionGradArgs& a) {
  const Tensor &gq = a.gq, &gk = a.gk, &gv = a.gv, &gout = a.gout, &q = a.q, &k = a.k, &v = a.v, &out = a.out,
               &lse = a.lse, &mask = a.mask;
  const AttentionParams& p = a.p;
  if (detail::cudnn_attention_takes(q, k, v, mask, p) && detail::cudnn_attention_backward(a)) return;
  check_width(p);
  OnDevice on(gq);
  // D[i] = sum(gout[i] * out[i]) in lse's dtype (float32, float64 for float64): the softmax backward's row term
  const Tensor dsum = raw::contiguous(
      raw::sum(raw::binary(BinaryOp::Mul, raw::cast(gout, lse.dtype()), raw::cast(out, lse.dtype())), {-1}));
  AttentionParams pc = p;
  const Tensor qc = packed(q, pc.q_stride, p.tq), kc = packed(k, pc.k_stride, p.tk), vc = packed(v, pc.v_stride, p.tk);
  kernels::launch_attention_backward(q.dtype(), gq.data_ptr(), gk.data_ptr(), gv.data_ptr(), gout.data_ptr(),
                                     qc.data_ptr(), kc.data_ptr(), vc.data_ptr(), lse.data_ptr(), dsum.data_ptr(),
                                     mask_ptr(mask), pc, on.stream);
}

}  // namespace ember::cuda
