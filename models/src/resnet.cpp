// defines: models::ResNet (resnet.h): torchvision's resnet.py on one page — the blocks, the stages, the stem and
// the head, with torchvision's initialisation (He normal for convolutions, fan out; BatchNorm at 1 and 0).
#include "ember/models/resnet.h"

#include "ember/autograd/grad_mode.h"
#include "ember/autograd/ops.h"
#include "ember/nn/init.h"
#include "model_checks.h"

namespace ember::models {
namespace {

nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(in, out, 3, {.stride = stride, .padding = 1, .bias = false});
}
nn::Conv2d conv1x1(int64_t in, int64_t out, int64_t stride = 1) {
  return nn::Conv2d(in, out, 1, {.stride = stride, .padding = 0, .bias = false});
}

// The shortcut's projection when the block changes the shape: a strided 1x1 convolution and its BatchNorm
// ("downsample.0", "downsample.1"); none (the identity) otherwise.
nn::Chain shortcut(int64_t in, int64_t out, int64_t stride) {
  if (stride == 1 && in == out) return nn::Chain{};
  return nn::Chain{conv1x1(in, out, stride), nn::BatchNorm2d(out)};
}

}  // namespace

BasicBlock::BasicBlock(int64_t in, int64_t planes, int64_t stride)
    : conv1_(conv3x3(in, planes, stride)),
      conv2_(conv3x3(planes, planes, 1)),
      bn1_(planes, {.relu = true}),
      bn2_(planes),
      downsample_(shortcut(in, planes, stride)) {
  register_module("conv1", conv1_);
  register_module("bn1", bn1_);
  register_module("conv2", conv2_);
  register_module("bn2", bn2_);
  if (downsample_.size() > 0) register_module("downsample", downsample_);
}

Tensor BasicBlock::forward(const Tensor& x) {
  const Tensor identity = downsample_.size() > 0 ? downsample_(x) : x;
  const Tensor h = bn1_(conv1_(x));  // BatchNorm+ReLU in one pass
  return relu(bn2_(conv2_(h)) + identity);
}

Bottleneck::Bottleneck(int64_t in, int64_t planes, int64_t stride)
    : conv1_(conv1x1(in, planes)),
      conv2_(conv3x3(planes, planes, stride)),
      conv3_(conv1x1(planes, planes * kExpansion)),
      bn1_(planes, {.relu = true}),
      bn2_(planes, {.relu = true}),
      bn3_(planes * kExpansion),
      downsample_(shortcut(in, planes * kExpansion, stride)) {
  register_module("conv1", conv1_);
  register_module("bn1", bn1_);
  register_module("conv2", conv2_);
  register_module("bn2", bn2_);
  register_module("conv3", conv3_);
  register_module("bn3", bn3_);
  if (downsample_.size() > 0) register_module("downsample", downsample_);
}

Tensor Bottleneck::forward(const Tensor& x) {
  const Tensor identity = downsample_.size() > 0 ? downsample_(x) : x;
  const Tensor h = bn2_(conv2_(bn1_(conv1_(x))));  // each BatchNorm+ReLU in one pass
  return relu(bn3_(conv3_(h)) + identity);
}

namespace {

// One stage: `count` blocks of `planes`, the first with the stride (and the projection shortcut).
template <class Block>
nn::Chain stage(int64_t& in, int64_t planes, int64_t count, int64_t stride) {
  nn::Chain s;
  for (int64_t i = 0; i < count; ++i) {
    s.push_back(Block(in, planes, i == 0 ? stride : 1));
    in = planes * Block::kExpansion;
  }
  return s;
}

nn::Chain make_stage(ResNet::BlockKind kind, int64_t& in, int64_t planes, int64_t count, int64_t stride) {
  return kind == ResNet::BlockKind::Basic ? stage<BasicBlock>(in, planes, count, stride)
                                          : stage<Bottleneck>(in, planes, count, stride);
}

int64_t checked_classes(const ResNetOptions& o) {
  EMBER_CHECK_VALUE(o.num_classes > 0, "models::ResNet: num_classes must be positive, got ", o.num_classes);
  return o.num_classes;
}

std::string arch_name(ResNet::BlockKind kind, const std::array<int64_t, 4>& b) {
  using A = std::array<int64_t, 4>;
  if (kind == ResNet::BlockKind::Basic && b == A{2, 2, 2, 2}) return "resnet18";
  if (kind == ResNet::BlockKind::Basic && b == A{3, 4, 6, 3}) return "resnet34";
  if (kind == ResNet::BlockKind::Bottleneck && b == A{3, 4, 6, 3}) return "resnet50";
  if (kind == ResNet::BlockKind::Bottleneck && b == A{3, 4, 23, 3}) return "resnet101";
  return "resnet";
}

}  // namespace

ResNet::ResNet(BlockKind kind, std::array<int64_t, 4> blocks, ResNetOptions opts)
    : conv1_(3, 64, 7, {.stride = 2, .padding = 3, .bias = false}),
      bn1_(64, {.relu = true}),
      fc_(512 * (kind == BlockKind::Basic ? BasicBlock::kExpansion : Bottleneck::kExpansion), checked_classes(opts)),
      arch_(arch_name(kind, blocks)) {
  for (int64_t b : blocks) EMBER_CHECK_VALUE(b > 0, "models::ResNet: every stage needs a block, got ", b);
  int64_t in = 64;
  layer1_ = make_stage(kind, in, 64, blocks[0], 1);
  layer2_ = make_stage(kind, in, 128, blocks[1], 2);
  layer3_ = make_stage(kind, in, 256, blocks[2], 2);
  layer4_ = make_stage(kind, in, 512, blocks[3], 2);
  register_module("conv1", conv1_);
  register_module("bn1", bn1_);
  register_module("layer1", layer1_);
  register_module("layer2", layer2_);
  register_module("layer3", layer3_);
  register_module("layer4", layer4_);
  register_module("fc", fc_);
  // torchvision's initialisation: He normal (fan out, relu) for every convolution; BatchNorm weight 1, bias 0
  // (nn::BatchNorm's own); the classifier keeps Linear's default.
  NoGradGuard g;
  apply([](nn::Module& m) {
    if (auto* c = dynamic_cast<nn::Conv2d*>(&m))
      nn::init::kaiming_normal_(c->weight(), {.mode = nn::init::FanOut, .nonlinearity = "relu"});
  });
}

Tensor ResNet::forward(const Tensor& x) {
  detail::check_images("models::ResNet", x, 3);
  Tensor h = max_pool2d(bn1_(conv1_(x)), {3}, {2}, {1});  // bn1: BatchNorm+ReLU in one pass
  for (const nn::Chain* stage : {&layer1_, &layer2_, &layer3_, &layer4_})
    h = checkpoint_ ? detail::checkpointed(*stage, h) : (*stage)(h);
  return fc_(adaptive_avg_pool2d(h, {1}).flatten(1));
}

ResNet& ResNet::set_grad_checkpointing(bool enable) {
  checkpoint_ = enable;
  return *this;
}

ResNet resnet18(ResNetOptions opts) { return ResNet(ResNet::BlockKind::Basic, {2, 2, 2, 2}, opts); }
ResNet resnet34(ResNetOptions opts) { return ResNet(ResNet::BlockKind::Basic, {3, 4, 6, 3}, opts); }
ResNet resnet50(ResNetOptions opts) { return ResNet(ResNet::BlockKind::Bottleneck, {3, 4, 6, 3}, opts); }
ResNet resnet101(ResNetOptions opts) { return ResNet(ResNet::BlockKind::Bottleneck, {3, 4, 23, 3}, opts); }

}  // namespace ember::models
