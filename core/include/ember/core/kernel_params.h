// defines: the parameter types that the Backend interface (backend.h) hands to kernels unchanged, on the CPU
// and through the CUDA launchers (cuda/src/kernels/launch.h): the kind of a random fill, the optimiser
// hyperparameters of one fused update, and what a row normalisation computes.
// Plain C++17 with no other Ember header: nvcc reads it too.
#pragma once
#include <cstdint>

namespace ember {

// A random fill: Uniform in [lo, hi), Normal(mean lo, std hi), Int uniform in [lo, hi).
enum class RandomKind : unsigned char { Uniform, Normal, Int };

// SGD with momentum, dampening, weight decay and Nesterov (PyTorch's torch.optim.SGD).
struct SgdParams {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  bool first_step = false;  // the momentum buffer is uninitialised: set it to the gradient (torch: buf = clone(g))
};

// Adam (L2 weight decay) or AdamW (decoupled weight decay).
struct AdamParams {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  bool decoupled = false;                             // AdamW: p *= 1 - lr * wd; else Adam: L2, g += wd * p
  double bias_correction1 = 1, bias_correction2 = 1;  // 1 - beta1^t and 1 - beta2^t, t = this parameter's step
};

// A normalisation of each row of x viewed as [rows, cols] (layer_norm's last k dims flattened), with per-column
// weight w and bias b (either may be absent: 1 and 0). LayerNorm: y = (x - mean) * rstd * w + b with
// rstd = 1 / sqrt(var + eps), the biased variance. RmsNorm: the same with mean = 0, not subtracted (so
// rstd = 1 / sqrt(mean(x^2) + eps); torch.nn.functional.rms_norm's math). A new kind is a new enumerator here and its
// case in the two kernels (core/cpu/layer_norm.cpp, cuda/src/kernels/layer_norm.cu): no signature changes anywhere.
enum class RowNormKind : unsigned char { LayerNorm, RmsNorm };
struct RowNorm {
  RowNormKind kind = RowNormKind::LayerNorm;
  int64_t rows = 0, cols = 0;
  double eps = 1e-5;
};
// The weight and bias gradients of a row norm on CUDA (cuda/src/kernels/layer_norm.cu): the rows in chunks of at
// least 64 (at most 512 chunks), each chunk's column sums kept as two doubles per column in a workspace, then added.
// memory::plan allocates the same workspace.
constexpr int64_t row_norm_grad_chunks(int64_t rows) {
  return rows <= 0 ? 0 : ((rows + 63) / 64 < 512 ? (rows + 63) / 64 : 512);
}
constexpr int64_t row_norm_grad_workspace_bytes(int64_t rows, int64_t cols) {
  return row_norm_grad_chunks(rows) * cols * 2 * static_cast<int64_t>(sizeof(double));
}
// BatchNorm's per-channel sums on CUDA (cuda/src/kernels/norm.cu) for x viewed as [n, c, s] with s > 1: each
// channel's n * s elements in parts of at least 16384 (at most 64 parts), one block per part, whose two sums are
// kept as doubles in a workspace and then added in order. [n, c] inputs (s == 1) take no workspace. memory::plan
// allocates the same.
constexpr int64_t batch_norm_parts(int64_t per_channel) {
  return per_channel <= 0 ? 1 : ((per_channel + 16383) / 16384 < 64 ? (per_channel + 16383) / 16384 : 64);
}
// With S == 1 ([rows, C]: BatchNorm1d, or a channels-last [N, C, H, W] seen as its [N*H*W, C] rows), a thread per
// (channel, part of at least 512 rows), up to 1024 parts: one thread per channel alone would leave a GPU idle.
constexpr int64_t batch_norm_column_parts(int64_t rows) {
  return rows <= 512 ? 1 : ((rows + 511) / 512 < 1024 ? (rows + 511) / 512 : 1024);
}
constexpr int64_t batch_norm_workspace_bytes(int64_t n, int64_t c, int64_t s) {
  if (n <= 0) return 0;
  const int64_t parts = s > 1 ? batch_norm_parts(n * s) : batch_norm_column_parts(n);
  return s > 1 || parts > 1 ? c * parts * 2 * static_cast<int64_t>(sizeof(double)) : 0;
}
// The public op a kind is, and its backward (their messages' names).
constexpr const char* name(RowNormKind kind, bool backward = false) {
  switch (kind) {
    case RowNormKind::LayerNorm:
      return backward ? "layer_norm_backward" : "layer_norm";
    case RowNormKind::RmsNorm:
      return backward ? "rms_norm_backward" : "rms_norm";
  }
  return "?";
}

}  // namespace ember

namespace ember {

// The mask of an attention: none, a boolean one (true = the key takes part, as PyTorch's attn_mask), or an
// additive one of the scores' dtype.
enum class AttnMask : unsigned char { None, Bool, Additive };

// Sizes and options of scaled-dot-product attention over q [BH, Tq, d], k [BH, Tk, d], v [BH, Tk, dv]
// (BH = batch * heads). Row i of head bh of q starts at (bh / heads) * q_stride[0] + (bh % heads) * q_stride[1] +
// i * q_stride[2] and its d elements are contiguous (k and v likewise), so the heads of a fused [B, T, 3, H, hd]
// projection are read where they are. A mask, when there is one, is read at
// mask[(bh / heads) * mask_stride[0] + (bh % heads) * mask_stride[1] + i * mask_stride[2] + j * mask_stride[3]]
// (strides in elements; 0 where it broadcasts). Causal keeps key j for query i when j <= i (PyTorch's top-left
// alignment when Tq != Tk).
// The output and the gradients are addressed the same way, through their own strides: out / grad_out [BH, Tq, dv]
// (o_stride, go_stride) and dq, dk, dv (gq_stride, gk_stride, gv_stride). On the CPU they follow the layout of q
// (a head split [B, T, H, hd] viewed as [B, H, T, hd]), so that merging the heads back costs no copy, forward or
// backward; the CUDA kernels take them contiguous and leave these five unread.
struct AttentionParams {
  int64_t batch_heads = 0, heads = 1, tq = 0, tk = 0, d = 0, dv = 0;
  double scale = 1;
  bool causal = false;
  AttnMask mask = AttnMask::None;
  int64_t mask_stride[4] = {0, 0, 0, 0};
  int64_t q_stride[3] = {0, 0, 0}, k_stride[3] = {0, 0, 0}, v_stride[3] = {0, 0, 0};
  int64_t o_stride[3] = {0, 0, 0}, go_stride[3] = {0, 0, 0};
  int64_t gq_stride[3] = {0, 0, 0}, gk_stride[3] = {0, 0, 0}, gv_stride[3] = {0, 0, 0};
};

}  // namespace ember
