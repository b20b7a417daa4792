// defines: models::ViT — the Vision Transformer as timm builds vit_base_patch16_224 (class-token pooling, pre-norm
// blocks, exact GELU), with timm's parameter names ("cls_token", "pos_embed", "patch_embed.proj", "blocks.0.norm1",
// "blocks.0.attn.qkv", "blocks.0.attn.proj", "blocks.0.mlp.fc1", ..., "norm", "head"), so a timm state dict saved as
// safetensors loads by name (models::load_pretrained).
//
//   auto vit = models::vit_b16({.num_classes = 10});
//   Tensor logits = vit(images);                         // images [N, 3, 224, 224] -> [N, 10]
#pragma once
#include <cstdint>

#include "ember/nn/containers.h"
#include "ember/nn/layers.h"
#include "ember/nn/module.h"

namespace ember::models {

struct ViTConfig {
  int64_t image_size = 224, patch_size = 16, dim = 768, depth = 12, heads = 12, mlp_ratio = 4, num_classes = 1000;
  bool qkv_bias = true;
  double layer_norm_eps = 1e-6;
};

// timm's Attention: one qkv projection [3 dim, dim], scaled dot-product attention over the heads, proj.
class ViTAttention : public nn::Module {
 public:
  ViTAttention(int64_t dim, int64_t heads, bool qkv_bias);
  Tensor forward(const Tensor& x) override;  // [N, T, dim]

 private:
  int64_t heads_;
  nn::Dense qkv_, proj_;
};

// timm's Mlp: fc1, GELU, fc2.
class ViTMlp : public nn::Module {
 public:
  ViTMlp(int64_t dim, int64_t hidden);
  Tensor forward(const Tensor& x) override;

 private:
  nn::Dense fc1_, fc2_;
};

// x + attn(norm1(x)), then x + mlp(norm2(x)).
class ViTBlock : public nn::Module {
 public:
  explicit ViTBlock(const ViTConfig& c);
  Tensor forward(const Tensor& x) override;

 private:
  nn::LayerNorm norm1_, norm2_;
  ViTAttention attn_;
  ViTMlp mlp_;
};

// The patches as tokens: a convolution of kernel and stride patch_size ("patch_embed.proj").
class PatchEmbed : public nn::Module {
 public:
  PatchEmbed(int64_t patch, int64_t dim);
  Tensor forward(const Tensor& x) override;  // [N, 3, H, W] -> [N, H W / patch^2, dim]

 private:
  nn::Conv2d proj_;
};

class ViT : public nn::Module {
 public:
  explicit ViT(ViTConfig config = {});
  // images [N, 3, image_size, image_size], floating -> logits [N, num_classes].
  Tensor forward(const Tensor& x) override;
  const ViTConfig& config() const { return config_; }
  // Activation checkpointing by block (timm's name): each block keeps only its input for backward.
  ViT& set_grad_checkpointing(bool enable = true);

 private:
  ViTConfig config_;
  bool checkpoint_ = false;
  Tensor cls_token_, pos_embed_;
  PatchEmbed patch_embed_;
  nn::ModuleList blocks_;
  nn::LayerNorm norm_;
  nn::Dense head_;
};

// ViT-B/16 (timm's vit_base_patch16_224): 224 x 224 images, patches of 16, 12 blocks of width 768, 12 heads.
struct ViTOptions {
  int64_t num_classes = 1000;
};
ViT vit_b16(ViTOptions opts = {});

}  // namespace ember::models
