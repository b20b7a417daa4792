// defines: the losses — cross_entropy (class indices), logitcrossentropy (one-hot or soft targets, Flux's name),
// mse_loss, binary_cross_entropy_with_logits (each one autograd node computed from logits in a numerically stable
// way), and PyTorch's nll_loss, l1_loss, huber_loss, smooth_l1_loss and cross_entropy with options (reduction,
// ignore_index, label_smoothing, class weights; composites of differentiable ops); onehotbatch; and clip_grad_norm_.
#pragma once
#include <vector>

#include "ember/core/tensor.h"

namespace ember::nn {

// How a loss reduces its per-element values, as PyTorch's reduction = "none" | "mean" | "sum".
enum class Reduction { None, Mean, Sum };

struct LossOptions {
  Reduction reduction = Reduction::Mean;
};
// ignore_index: targets equal to it add nothing and are not counted by the mean. weight: one per class ([C], the
// log-probabilities' dtype converted), undefined for all 1; the mean divides by the weights of the targets.
struct NllLossOptions {
  Reduction reduction = Reduction::Mean;
  int64_t ignore_index = -100;
  Tensor weight = {};
};
// label_smoothing in [0, 1]: the target is (1 - s) one-hot + s / C uniform, as PyTorch's (1.10 on).
struct CrossEntropyOptions {
  Reduction reduction = Reduction::Mean;
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Tensor weight = {};
};
struct HuberLossOptions {
  double delta = 1.0;  // > 0: quadratic below it, linear above
  Reduction reduction = Reduction::Mean;
};
struct SmoothL1LossOptions {
  double beta = 1.0;  // >= 0 (0 is l1_loss): quadratic / beta below it, linear above
  Reduction reduction = Reduction::Mean;
};

// logits [N, C], targets kInt64 [N] with values in [0, C): the mean over the batch, one fused node (no
// ignore_index: every target must be a class; the options overload below has PyTorch's -100).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);
// torch.nn.functional.cross_entropy with class indices: logits [N, C] (targets [N]), [N, C, d1, ...] (targets
// [N, d1, ...]) or [C] (a 0-dim target); nll_loss(log_softmax(logits, class dim)) plus label smoothing.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& opts);
// torch.nn.functional.nll_loss: -log_probs[i, targets[i]] (times the class weight), shapes as cross_entropy's.
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, const NllLossOptions& opts = {});
// logits [N, C], targets [N, C] (rows of probabilities, e.g. onehotbatch(labels, C)). As in PyTorch, soft
// targets that require grad get a gradient too (here and in binary_cross_entropy_with_logits).
Tensor logitcrossentropy(const Tensor& logits, const Tensor& targets);
// Elementwise losses of pred and a target of the same shape (floating pred; the target gets a gradient too when it
// requires one): (pred - target)^2; |pred - target|; Huber: d^2 / 2 below delta, delta (|d| - delta / 2) above;
// smooth L1: d^2 / (2 beta) below beta, |d| - beta / 2 above (huber_loss / delta).
Tensor mse_loss(const Tensor& pred, const Tensor& target, const LossOptions& opts = {});
Tensor l1_loss(const Tensor& pred, const Tensor& target, const LossOptions& opts = {});
Tensor huber_loss(const Tensor& pred, const Tensor& target, const HuberLossOptions& opts = {});
Tensor smooth_l1_loss(const Tensor& pred, const Tensor& target, const SmoothL1LossOptions& opts = {});
// mean of max(x, 0) - x t + log(1 + exp(-|x|)); targets in [0, 1], same shape as logits.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets);

// labels (integer [N]) -> float32 [N, num_classes] with a single 1 per row.
Tensor onehotbatch(const Tensor& labels, int64_t num_classes);

// Scales the gradients of params so that their global L2 norm is at most max_norm; returns the norm before.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace ember::nn
