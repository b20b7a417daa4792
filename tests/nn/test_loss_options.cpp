// Tests PyTorch's option-taking losses — nll_loss, cross_entropy with {reduction, ignore_index, label_smoothing,
// weight}, mse_loss / l1_loss / huber_loss / smooth_l1_loss with their reductions — against numbers computed with
// PyTorch 1.13 on the same inputs (pasted here as literals), their gradients where PyTorch fixes a convention, the
// agreement of the old cross_entropy with the new one, and every bad input (an ember::Error naming the loss and the
// shapes or dtypes). Their gradchecks are rows of tests/support/op_cases.h.
#include <cmath>
#include <string>
#include <vector>

#include "test_util.h"

using namespace ember;
using nn::Reduction;
using test::values;

namespace {

const TensorOptions f64{.dtype = kFloat64};
std::vector<double> V(std::initializer_list<double> v) { return v; }

// The inputs of the PyTorch script: logits [4, 3], targets with one ignored (-100), class weights.
Tensor logits() { return tensor<double>({1.5, -0.5, 0.25, 0.0, 2.0, -1.0, -1.25, 0.5, 3.0, 0.75, 0.75, -2.0}, {4, 3}); }
Tensor targets() { return tensor<int64_t>({0, 2, -100, 1}); }
Tensor weights() { return tensor<double>({0.5, 2.0, 1.25}); }

TEST(LossOptions, NllLossMatchesTorch) {
  const Tensor lp = log_softmax(logits(), 1), y = targets(), w = weights();
  // torch 1.13: F.nll_loss(lp, y, weight=..., reduction=...)
  EXPECT_NEAR(nn::nll_loss(lp, y).item(), 1.415469593133954, 1e-12);  // mean over the 3 targets not ignored
  EXPECT_NEAR(nn::nll_loss(lp, y, {.reduction = Reduction::Sum}).item(), 4.246408779401862, 1e-12);
  EXPECT_TENSOR_NEAR(nn::nll_loss(lp, y, {.reduction = Reduction::None}), Shape({4}),
                     V({0.3519518638028018, 3.1698460195562856, 0.0, 0.7246108960427745}), 1e-12, 1e-12);
  EXPECT_NEAR(nn::nll_loss(lp, y, {.weight = w}).item(), 1.4900013995819485, 1e-12);  // / sum of target weights
  EXPECT_NEAR(nn::nll_loss(lp, y, {.reduction = Reduction::Sum, .weight = w}).item(), 5.587505248432307, 1e-12);
  EXPECT_TENSOR_NEAR(nn::nll_loss(lp, y, {.reduction = Reduction::None, .weight = w}), Shape({4}),
                     V({0.1759759319014009, 3.962307524445357, 0.0, 1.449221792085549}), 1e-12, 1e-12);
  EXPECT_NEAR(nn::nll_loss(lp, tensor<int64_t>({0, 2, 1, 1}), {.ignore_index = 1}).item(), 1.7608989416795437, 1e-12);
  // every target ignored: 0 / 0, NaN as PyTorch's
  EXPECT_TRUE(std::isnan(nn::nll_loss(lp, tensor<int64_t>({-100, -100, -100, -100})).item()));
  // int32 targets, float32 inputs
  EXPECT_NEAR(nn::nll_loss(lp.to(kFloat32), y.to(kInt32)).item(), 1.415469593133954, 1e-6);
}

TEST(LossOptions, CrossEntropyMatchesTorch) {
  const Tensor z = logits(), y = targets(), w = weights();
  // torch 1.13: F.cross_entropy(z, y, weight=..., reduction=..., label_smoothing=...)
  EXPECT_NEAR(nn::cross_entropy(z, y, {}).item(), 1.415469593133954, 1e-12);
  EXPECT_NEAR(nn::cross_entropy(z, y, {.label_smoothing = 0.1}).item(), 1.4376918153561764, 1e-12);
  EXPECT_NEAR(nn::cross_entropy(z, y, {.reduction = Reduction::Sum, .label_smoothing = 0.1}).item(), 4.313075446068529,
              1e-12);
  EXPECT_TENSOR_NEAR(nn::cross_entropy(z, y, {.reduction = Reduction::None, .label_smoothing = 0.1}), Shape({4}),
                     V({0.46028519713613514, 3.0365126862229523, 0.0, 0.8162775627094412}), 1e-12, 1e-12);
  EXPECT_NEAR(nn::cross_entropy(z, y, {.label_smoothing = 0.2, .weight = w}).item(), 1.519539482736794, 1e-12);
  EXPECT_NEAR(nn::cross_entropy(z, y, {.reduction = Reduction::Sum, .label_smoothing = 0.2, .weight = w}).item(),
              5.698273060262978, 1e-12);
  EXPECT_TENSOR_NEAR(nn::cross_entropy(z, y, {.reduction = Reduction::None, .label_smoothing = 0.2, .weight = w}),
                     Shape({4}), V({0.5996020448051544, 3.528974191112024, 0.0, 1.5696968243457996}), 1e-12, 1e-12);
  // [N, C, d] logits with [N, d] targets, and a single [C] row with a 0-dim target
  const Tensor zk = sin(arange(12, f64)).reshape({2, 3, 2}) * 2.0;
  const Tensor yk = tensor<int64_t>({0, 2, -100, 1}, {2, 2});
  EXPECT_NEAR(nn::cross_entropy(zk, yk, {}).item(), 2.2773203498638668, 1e-12);
  EXPECT_TENSOR_NEAR(nn::cross_entropy(zk, yk, {.reduction = Reduction::None, .label_smoothing = 0.3}), Shape({2, 2}),
                     V({1.9687226832210714, 3.262649117956215, 0.0, 1.2234504693350403}), 1e-12, 1e-12);
  EXPECT_NEAR(nn::cross_entropy(z.select(0, 0), tensor<int64_t>({2}, {}), {}).item(), 1.6019518638028019, 1e-12);
}

TEST(LossOptions, CrossEntropyGradientMatchesTorchAndTheOldLoss) {
  // torch 1.13: z.grad of F.cross_entropy(z, y, weight=w, label_smoothing=0.2).backward()
  const Tensor z = logits().requires_grad_();
  nn::cross_entropy(z, targets(), {.label_smoothing = 0.2, .weight = weights()}).backward();
  EXPECT_TENSOR_NEAR(
      z.grad(), Shape({4, 3}),
      V({0.006352200288218587, -0.019057134889698558, 0.01270493460147994, 0.0291761775726426, 0.24570935593822424,
         -0.27488553351086686, 0.0, 0.0, 0.0, 0.23013755317139628, -0.22319578016193709, -0.006941773009459181}),
      1e-12, 1e-12);
  // Without ignored targets, smoothing or weights, the options overload is the old fused loss.
  manual_seed(9);
  const Tensor z1 = randn({6, 5}, f64).requires_grad_(), z2 = z1.detach().clone().requires_grad_();
  const Tensor y = randint(0, 5, {6});
  const Tensor a = nn::cross_entropy(z1, y), b = nn::cross_entropy(z2, y, {});
  EXPECT_NEAR(a.item(), b.item(), 1e-13);
  a.backward();
  b.backward();
  EXPECT_TENSOR_NEAR(z2.grad(), z1.shape(), values(z1.grad()), 1e-14, 1e-12);
}

TEST(LossOptions, ElementwiseLossesMatchTorch) {
  const Tensor p = tensor<double>({0.5, -1.0, 2.5, 0.0, 3.0, -0.2}, {2, 3});
  const Tensor t = tensor<double>({0.0, 0.5, 0.25, 0.1, -1.0, -0.2}, {2, 3});
  const Reduction none = Reduction::None, total = Reduction::Sum;
  // torch 1.13: F.mse_loss / l1_loss / huber_loss / smooth_l1_loss (p, t, reduction=..., delta / beta=...)
  EXPECT_NEAR(nn::mse_loss(p, t).item(), 3.9287500000000004, 1e-12);
  EXPECT_NEAR(nn::mse_loss(p, t, {.reduction = total}).item(), 23.5725, 1e-12);
  EXPECT_TENSOR_NEAR(nn::mse_loss(p, t, {.reduction = none}), p.shape(), V({0.25, 2.25, 5.0625, 0.01, 16.0, 0.0}),
                     1e-12, 1e-12);
  EXPECT_NEAR(nn::l1_loss(p, t).item(), 1.3916666666666666, 1e-12);
  EXPECT_NEAR(nn::l1_loss(p, t, {.reduction = total}).item(), 8.35, 1e-12);
  EXPECT_TENSOR_NEAR(nn::l1_loss(p, t, {.reduction = none}), p.shape(), V({0.5, 1.5, 2.25, 0.1, 4.0, 0.0}), 1e-12,
                     1e-12);
  EXPECT_NEAR(nn::huber_loss(p, t).item(), 1.0633333333333332, 1e-12);
  EXPECT_NEAR(nn::huber_loss(p, t, {.delta = 2.0}).item(), 1.6258333333333335, 1e-12);
  EXPECT_NEAR(nn::huber_loss(p, t, {.reduction = total}).item(), 6.38, 1e-12);
  EXPECT_TENSOR_NEAR(nn::huber_loss(p, t, {.delta = 2.0, .reduction = none}), p.shape(),
                     V({0.125, 1.125, 2.5, 0.005, 6.0, 0.0}), 1e-12, 1e-12);
  EXPECT_NEAR(nn::smooth_l1_loss(p, t).item(), 1.0633333333333332, 1e-12);
  EXPECT_NEAR(nn::smooth_l1_loss(p, t, {.beta = 0.5}).item(), 1.21, 1e-12);
  EXPECT_NEAR(nn::smooth_l1_loss(p, t, {.beta = 0.5, .reduction = total}).item(), 7.26, 1e-12);
  EXPECT_TENSOR_NEAR(nn::smooth_l1_loss(p, t, {.beta = 0.5, .reduction = none}), p.shape(),
                     V({0.25, 1.25, 2.0, 0.01, 3.75, 0.0}), 1e-12, 1e-12);
  EXPECT_NEAR(nn::smooth_l1_loss(p, t, {.beta = 0.0}).item(), 1.3916666666666666, 1e-12);  // = l1_loss
  // gradients, torch 1.13: l1's is 0 where p == t (sign(0)); huber's is d / n below delta, delta sign(d) / n above
  const Tensor pl = p.detach().requires_grad_();
  nn::l1_loss(pl, t).backward();
  EXPECT_TENSOR_NEAR(pl.grad(), p.shape(), V({1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6, 1.0 / 6, 0.0}), 1e-15, 0);
  const Tensor ph = p.detach().requires_grad_();
  nn::huber_loss(ph, t, {.delta = 2.0}).backward();
  EXPECT_TENSOR_NEAR(
      ph.grad(), p.shape(),
      V({0.08333333333333333, -0.25, 0.3333333333333333, -0.016666666666666666, 0.3333333333333333, 0.0}), 1e-15,
      1e-12);
  // the target gets a gradient too
  const Tensor tt = t.detach().requires_grad_();
  nn::mse_loss(p, tt, {.reduction = total}).backward();
  EXPECT_TENSOR_NEAR(tt.grad(), t.shape(), values((t - p) * 2.0), 1e-15, 0);
}

TEST(LossOptions, BadInputsNameTheLossAndTheShapes) {
  const Tensor lp = log_softmax(randn({4, 3}), 1);
  const Tensor y = tensor<int64_t>({0, 1, 2, 0});
  EXPECT_THROW_MSG(nn::nll_loss(lp, tensor<int64_t>({0, 1, 2})), ShapeError, "nll_loss", "[4, 3]", "[3]", "[4]");
  EXPECT_THROW_MSG(nn::nll_loss(lp, y.to(kFloat32)), DTypeError, "nll_loss", "int64", "float32");
  EXPECT_THROW_MSG(nn::nll_loss(lp.to(kInt64), y), DTypeError, "nll_loss", "floating", "int64");
  EXPECT_THROW_MSG(nn::nll_loss(lp, tensor<int64_t>({0, 3, 2, 0})), IndexError, "nll_loss", "[0, 3)", "-100", "3");
  EXPECT_THROW_MSG(nn::nll_loss(lp, tensor<int64_t>({0, -1, 2, 0})), IndexError, "nll_loss", "from -1 to 2");
  EXPECT_THROW_MSG(nn::nll_loss(lp, y, {.weight = ones({2})}), ShapeError, "nll_loss", "weight", "[3]", "[2]");
  EXPECT_THROW_MSG(nn::nll_loss(full({}, 1.0), tensor<int64_t>({0}, {})), ShapeError, "nll_loss", "0-dim");
  EXPECT_THROW_MSG(nn::cross_entropy(randn({4, 3}), y, {.label_smoothing = 1.5}), ValueError, "cross_entropy",
                   "label_smoothing", "1.5");
  EXPECT_THROW_MSG(nn::cross_entropy(randn({4, 3}), tensor<int64_t>({0, 1}), {}), ShapeError, "cross_entropy", "[4, 3]",
                   "[2]");
  EXPECT_THROW_MSG(nn::cross_entropy(randn({4, 3}), tensor<int64_t>({0, 1, 5, 0}), {}), IndexError, "cross_entropy",
                   "[0, 3)");
  EXPECT_THROW_MSG(nn::cross_entropy(zeros({4, 3}, {.dtype = kInt64}), y, {}), DTypeError, "cross_entropy", "int64");
  const Tensor p = randn({2, 3});
  EXPECT_THROW_MSG(nn::l1_loss(p, randn({3, 2})), ShapeError, "l1_loss", "[2, 3]", "[3, 2]");
  EXPECT_THROW_MSG(nn::huber_loss(p, randn({2})), ShapeError, "huber_loss", "[2, 3]", "[2]");
  EXPECT_THROW_MSG(nn::huber_loss(p, p, {.delta = 0.0}), ValueError, "huber_loss", "delta", "0");
  EXPECT_THROW_MSG(nn::smooth_l1_loss(p, p, {.beta = -1.0}), ValueError, "smooth_l1_loss", "beta", "-1");
  EXPECT_THROW_MSG(nn::smooth_l1_loss(zeros({2}, {.dtype = kInt64}), zeros({2}, {.dtype = kInt64})), DTypeError,
                   "smooth_l1_loss", "int64");
  EXPECT_THROW_MSG(nn::mse_loss(p, randn({3}), {.reduction = Reduction::Sum}), ShapeError, "mse_loss", "[2, 3]", "[3]");
  EXPECT_THROW(nn::l1_loss(p, Tensor()), Error);
}

}  // namespace
