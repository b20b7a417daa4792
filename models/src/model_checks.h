// defines: the input checks the models share (images of the channel count a model was built for, token ids) and
// the pieces of forward they share (checkpointed calls, the fused MLP).
#pragma once
#include <string>

#include "ember/autograd/checkpoint.h"
#include "ember/autograd/ops.h"
#include "ember/core/error.h"
#include "ember/nn/layers.h"
#include "ember/nn/module.h"
#include "ember/core/tensor.h"

namespace ember::models::detail {

// x must be a floating [N, channels, H, W] tensor; the error names the model and what it got.
inline void check_images(const char* who, const Tensor& x, int64_t channels) {
  EMBER_CHECK(x.defined(), Error, who, ": the images are undefined");
  EMBER_CHECK_SHAPE(x.dim() == 4, who, ": expected images [N, ", channels, ", H, W], got shape ", x.shape());
  EMBER_CHECK_SHAPE(x.size(1) == channels, who, ": expected images with ", channels, " channels [N, ", channels,
                    ", H, W], got ", x.size(1), " channels (shape ", x.shape(), ")");
  EMBER_CHECK_DTYPE(is_floating(x.dtype()), who, ": images must be floating point, got ", x.dtype());
}

// ids must be an integer [B, T] tensor with 1 <= T <= max_positions.
inline void check_ids(const char* who, const Tensor& ids, int64_t max_positions) {
  EMBER_CHECK(ids.defined(), Error, who, ": the token ids are undefined");
  EMBER_CHECK_SHAPE(ids.dim() == 2, who, ": expected token ids [B, T], got shape ", ids.shape());
  EMBER_CHECK_DTYPE(ids.dtype() == kInt64 || ids.dtype() == kInt32, who, ": token ids must be int64 or int32, got ",
                    ids.dtype());
  EMBER_CHECK_VALUE(ids.size(1) >= 1, who, ": the sequence is empty (shape ", ids.shape(), ")");
  EMBER_CHECK_VALUE(ids.size(1) <= max_positions, who, ": a sequence of ", ids.size(1),
                    " tokens is longer than the model's ", max_positions, " positions");
}

// m(x) through autograd::checkpoint: only x is kept for backward, where m's forward runs again. The closure holds a
// handle on m (modules are shared handles), so it stays valid for the backward.
template <class M>
Tensor checkpointed(const M& m, const Tensor& x) {
  std::shared_ptr<nn::Module> owner = nn::Module::share_handle(m);
  return autograd::checkpoint([owner](const std::vector<Tensor>& in) { return (*owner)(in[0]); }, {x});
}

// fc2(gelu(fc1(x))) for two plain Dense layers as one op (linear_gelu_linear: cuBLASLt's epilogues on CUDA); as
// the three calls when either layer has hooks or checkpointing on, which a direct call of the op would skip.
inline Tensor dense_gelu_dense(const nn::Dense& fc1, const nn::Dense& fc2, const Tensor& x, GeluApproximate form) {
  if (fc1.has_hooks() || fc2.has_hooks() || fc1.checkpointing() || fc2.checkpointing())
    return fc2(gelu(fc1(x), {.approximate = form}));
  return linear_gelu_linear(x, fc1.weight(), fc1.bias(), fc2.weight(), fc2.bias(), {.approximate = form});
}

}  // namespace ember::models::detail
