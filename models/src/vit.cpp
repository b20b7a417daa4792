// defines: models::ViT (vit.h): timm's vision_transformer.py for vit_base_patch16_224 on one page.
#include "ember/models/vit.h"

#include "ember/autograd/grad_mode.h"
#include "ember/autograd/ops.h"
#include "ember/core/factory.h"
#include "ember/nn/init.h"
#include "model_checks.h"

namespace ember::models {

ViTAttention::ViTAttention(int64_t dim, int64_t heads, bool qkv_bias)
    : heads_(heads), qkv_(dim, 3 * dim, nn::identity, {.bias = qkv_bias}), proj_(dim, dim) {
  register_module("qkv", qkv_);
  register_module("proj", proj_);
}

Tensor ViTAttention::forward(const Tensor& x) {
  const int64_t n = x.size(0), t = x.size(1), d = x.size(2);
  // [N, T, 3 D] -> [3, N, heads, T, D / heads]: q, k and v of every head
  const Tensor qkv = qkv_(x).reshape({n, t, 3, heads_, d / heads_}).permute({2, 0, 3, 1, 4});
  const Tensor y = scaled_dot_product_attention(qkv.select(0, 0), qkv.select(0, 1), qkv.select(0, 2));
  return proj_(y.transpose(1, 2).reshape({n, t, d}));
}

ViTMlp::ViTMlp(int64_t dim, int64_t hidden) : fc1_(dim, hidden), fc2_(hidden, dim) {
  register_module("fc1", fc1_);
  register_module("fc2", fc2_);
}

Tensor ViTMlp::forward(const Tensor& x) { return detail::dense_gelu_dense(fc1_, fc2_, x, GeluApproximate::None); }

ViTBlock::ViTBlock(const ViTConfig& c)
    : norm1_(c.dim, {.eps = c.layer_norm_eps}),
      norm2_(c.dim, {.eps = c.layer_norm_eps}),
      attn_(c.dim, c.heads, c.qkv_bias),
      mlp_(c.dim, c.dim * c.mlp_ratio) {
  register_module("norm1", norm1_);
  register_module("attn", attn_);
  register_module("norm2", norm2_);
  register_module("mlp", mlp_);
}

Tensor ViTBlock::forward(const Tensor& x) {
  const Tensor h = x + attn_(norm1_(x));
  return h + mlp_(norm2_(h));
}

PatchEmbed::PatchEmbed(int64_t patch, int64_t dim) : proj_(3, dim, patch, {.stride = patch}) {
  register_module("proj", proj_);
}

Tensor PatchEmbed::forward(const Tensor& x) { return proj_(x).flatten(2).transpose(1, 2); }

namespace {
ViTConfig checked(const ViTConfig& c) {
  const char* who = "models::ViT";
  EMBER_CHECK_VALUE(c.patch_size > 0 && c.image_size > 0 && c.image_size % c.patch_size == 0, who, ": image_size ",
                    c.image_size, " must be a positive multiple of patch_size ", c.patch_size);
  EMBER_CHECK_VALUE(c.dim > 0 && c.heads > 0 && c.dim % c.heads == 0, who, ": dim ", c.dim,
                    " must be a positive multiple of heads ", c.heads);
  EMBER_CHECK_VALUE(c.depth > 0 && c.mlp_ratio > 0 && c.num_classes > 0, who,
                    ": depth, mlp_ratio and num_classes must be positive, got ", c.depth, ", ", c.mlp_ratio, ", ",
                    c.num_classes);
  return c;
}
}  // namespace

ViT::ViT(ViTConfig config)
    : config_(checked(config)),
      patch_embed_(config_.patch_size, config_.dim),
      norm_(config_.dim, {.eps = config_.layer_norm_eps}),
      head_(config_.dim, config_.num_classes) {
  const int64_t grid = config_.image_size / config_.patch_size;
  // timm's initialisation: the class token near zero, positions and Linear weights N(0, 0.02) (timm truncates at
  // 2 sigma; untruncated here), biases zero.
  cls_token_ = register_parameter("cls_token", zeros({1, 1, config_.dim}));
  pos_embed_ = register_parameter("pos_embed", zeros({1, grid * grid + 1, config_.dim}));
  register_module("patch_embed", patch_embed_);
  for (int64_t i = 0; i < config_.depth; ++i) blocks_.push_back(ViTBlock(config_));
  register_module("blocks", blocks_);
  register_module("norm", norm_);
  register_module("head", head_);
  NoGradGuard g;
  nn::init::normal_(cls_token_, 0.0, 1e-6);
  nn::init::normal_(pos_embed_, 0.0, 0.02);
  apply([](nn::Module& m) {
    if (auto* d = dynamic_cast<nn::Dense*>(&m)) {
      nn::init::normal_(d->weight(), 0.0, 0.02);
      if (d->bias().defined()) d->bias().zero_();
    }
  });
}

Tensor ViT::forward(const Tensor& x) {
  const char* who = "models::ViT";
  detail::check_images(who, x, 3);
  const int64_t p = config_.patch_size, s = config_.image_size;
  EMBER_CHECK_SHAPE(x.size(2) % p == 0 && x.size(3) % p == 0, who, ": images of ", x.size(2), " x ", x.size(3),
                    " are not divided by the patch size ", p, " (shape ", x.shape(), ")");
  EMBER_CHECK_SHAPE(x.size(2) == s && x.size(3) == s, who, ": expected ", s, " x ", s, " images (the positions are ",
                    "learned for that grid), got ", x.size(2), " x ", x.size(3));
  const int64_t n = x.size(0);
  Tensor h = patch_embed_(x);
  h = cat({cls_token_.to(h.dtype()).expand({n, 1, config_.dim}), h}, 1) + pos_embed_;
  for (nn::Module& b : blocks_) h = checkpoint_ ? detail::checkpointed(b, h) : b(h);
  return head_(norm_(h).select(1, 0));
}

ViT& ViT::set_grad_checkpointing(bool enable) {
  checkpoint_ = enable;
  return *this;
}

ViT vit_b16(ViTOptions opts) {
  return ViT({.image_size = 224, .patch_size = 16, .dim = 768, .depth = 12, .heads = 12, .mlp_ratio = 4,
              .num_classes = opts.num_classes});
}

}  // namespace ember::models
