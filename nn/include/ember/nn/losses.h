// defines: the losses (mean over the batch) — cross_entropy (class indices), logitcrossentropy (one-hot or soft
// targets, Flux's name), mse_loss, binary_cross_entropy_with_logits — each one autograd node computed from
// logits in a numerically stable way; onehotbatch; and clip_grad_norm_.
#pragma once
#include <vector>

#include "ember/core/tensor.h"

namespace ember::nn {

// logits [N, C], targets kInt64 [N] with values in [0, C).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);
// logits [N, C], targets [N, C] (rows of probabilities, e.g. onehotbatch(labels, C)). As in PyTorch, soft
// targets that require grad get a gradient too (here and in binary_cross_entropy_with_logits).
Tensor logitcrossentropy(const Tensor& logits, const Tensor& targets);
Tensor mse_loss(const Tensor& pred, const Tensor& target);
// mean of max(x, 0) - x t + log(1 + exp(-|x|)); targets in [0, 1], same shape as logits.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets);

// labels (integer [N]) -> float32 [N, num_classes] with a single 1 per row.
Tensor onehotbatch(const Tensor& labels, int64_t num_classes);

// Scales the gradients of params so that their global L2 norm is at most max_norm; returns the norm before.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace ember::nn
