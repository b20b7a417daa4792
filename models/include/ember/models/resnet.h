// defines: models::ResNet — torchvision's ResNet (v1.5: the stride of a bottleneck on its 3x3 convolution) with
// torchvision's layout and parameter names ("conv1", "bn1", "layer1.0.conv1", "layer1.0.downsample.0", ..., "fc"),
// so a torchvision or timm state dict saved as safetensors loads by name (models::load_pretrained).
//
//   auto net = models::resnet50({.num_classes = 10});
//   Tensor logits = net(images);                         // images [N, 3, H, W] -> [N, 10]
//   models::load_pretrained(net, "resnet50.safetensors");
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "ember/nn/containers.h"
#include "ember/nn/layers.h"
#include "ember/nn/module.h"

namespace ember::models {

struct ResNetOptions {
  int64_t num_classes = 1000;
};

// Two 3x3 convolutions and the shortcut (ResNet-18/34); expansion 1.
class BasicBlock : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t in, int64_t planes, int64_t stride);
  Tensor forward(const Tensor& x) override;

 private:
  nn::Conv2d conv1_, conv2_;
  nn::BatchNorm2d bn1_, bn2_;
  nn::Chain downsample_;  // empty: the identity
};

// 1x1 down, 3x3 (with the stride), 1x1 up to 4x the planes, and the shortcut (ResNet-50/101); expansion 4.
class Bottleneck : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in, int64_t planes, int64_t stride);
  Tensor forward(const Tensor& x) override;

 private:
  nn::Conv2d conv1_, conv2_, conv3_;
  nn::BatchNorm2d bn1_, bn2_, bn3_;
  nn::Chain downsample_;
};

class ResNet : public nn::Module {
 public:
  enum class BlockKind { Basic, Bottleneck };
  // blocks: how many blocks each of the four stages has ({2, 2, 2, 2} is ResNet-18, {3, 4, 6, 3} with
  // bottlenecks ResNet-50).
  ResNet(BlockKind kind, std::array<int64_t, 4> blocks, ResNetOptions opts = {});
  // x [N, 3, H, W], floating -> logits [N, num_classes].
  Tensor forward(const Tensor& x) override;
  const std::string& arch() const { return arch_; }  // "resnet50", or "resnet" for a custom depth
  // Activation checkpointing by stage (timm's name): each of layer1..layer4 keeps only its input for backward and
  // runs its forward again there (autograd::checkpoint).
  ResNet& set_grad_checkpointing(bool enable = true);

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Chain layer1_, layer2_, layer3_, layer4_;
  nn::Dense fc_;
  std::string arch_;
  bool checkpoint_ = false;
};

ResNet resnet18(ResNetOptions opts = {});
ResNet resnet34(ResNetOptions opts = {});
ResNet resnet50(ResNetOptions opts = {});
ResNet resnet101(ResNetOptions opts = {});

}  // namespace ember::models
