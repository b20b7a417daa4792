// models::ViT: timm's names and ViT-B/16's size, bad input, and parity with timm's VisionTransformer (a small random
// one in float64: logits and every gradient; vit_base_patch16_224's forward in float32) with `make models-ref`.
#include "model_ref.h"

using namespace ember;
using models_test::close;

TEST(ViT, TimmNamesAndSize) {
  auto vit = models::vit_b16();
  EXPECT_EQ(vit.num_parameters(), 86567656);  // timm's vit_base_patch16_224
  std::map<std::string, Shape> s;
  for (const auto& [n, t] : vit.state_dict()) s.emplace(n, t.shape());
  for (const auto& [name, shape] : std::map<std::string, Shape>{{"cls_token", {1, 1, 768}},
                                                                {"pos_embed", {1, 197, 768}},
                                                                {"patch_embed.proj.weight", {768, 3, 16, 16}},
                                                                {"blocks.0.norm1.weight", {768}},
                                                                {"blocks.0.attn.qkv.weight", {2304, 768}},
                                                                {"blocks.0.attn.qkv.bias", {2304}},
                                                                {"blocks.11.attn.proj.weight", {768, 768}},
                                                                {"blocks.5.mlp.fc1.weight", {3072, 768}},
                                                                {"blocks.5.mlp.fc2.bias", {768}},
                                                                {"norm.bias", {768}},
                                                                {"head.weight", {1000, 768}}}) {
    ASSERT_TRUE(s.count(name)) << name;
    EXPECT_EQ(s.at(name), shape) << name;
  }
  EXPECT_EQ(s.size(), 152u);
}

TEST(ViT, ForwardAndBadInput) {
  manual_seed(0);
  models::ViT vit({.image_size = 32, .patch_size = 8, .dim = 32, .depth = 2, .heads = 4, .mlp_ratio = 2,
                   .num_classes = 3});
  EXPECT_EQ(vit(randn({2, 3, 32, 32})).shape(), Shape({2, 3}));
  EXPECT_THROW_MSG(vit(randn({2, 4, 32, 32})), ShapeError, "models::ViT", "3 channels");
  EXPECT_THROW_MSG(vit(randn({2, 3, 30, 32})), ShapeError, "models::ViT", "not divided by the patch size 8");
  EXPECT_THROW_MSG(vit(randn({2, 3, 40, 40})), ShapeError, "models::ViT", "expected 32 x 32 images");
  EXPECT_THROW_MSG(models::ViT({.image_size = 30, .patch_size = 8}), ValueError, "multiple of patch_size");
  EXPECT_THROW_MSG(models::ViT({.dim = 30, .heads = 4}), ValueError, "multiple of heads");
}

TEST(ViT, MatchesTimmInFloat64) {
  std::string why;
  const std::string dir = models_test::run_reference("vit", &why);
  if (dir.empty()) GTEST_SKIP() << why;
  models::ViT vit({.image_size = 32, .patch_size = 8, .dim = 64, .depth = 2, .heads = 4, .mlp_ratio = 4,
                   .num_classes = 10});
  vit.to(kFloat64);
  EXPECT_TRUE(models::load_pretrained(vit, dir + "/model.safetensors").complete());
  auto in = models_test::read_all(dir + "/inputs.safetensors");
  auto want = models_test::read_all(dir + "/expected.safetensors");
  Tensor x = in.at("x").clone().requires_grad_();
  const Tensor out = vit(x);
  EXPECT_TRUE(close(out, want.at("out"), 1e-6));
  (out * in.at("gy")).sum().backward();
  EXPECT_TRUE(close(x.grad(), want.at("grad.input"), 1e-6)) << "input gradient";
  size_t compared = 0;
  for (const auto& [n, p] : vit.named_parameters()) {
    ASSERT_TRUE(want.count("grad." + n)) << n;
    EXPECT_TRUE(close(p.grad(), want.at("grad." + n), 1e-6)) << n;
    ++compared;
  }
  EXPECT_EQ(compared, 32u);
}

TEST(ViT, FullSizeForwardMatchesTimm) {
  std::string why;
  const std::string dir = models_test::run_reference("vit-full", &why);
  if (dir.empty()) GTEST_SKIP() << why;
  auto vit = models::vit_b16();
  models::load_pretrained(vit, dir + "/model.safetensors");
  vit.eval();
  NoGradGuard g;
  const Tensor out = vit(models_test::read_all(dir + "/inputs.safetensors").at("x"));
  EXPECT_TRUE(close(out, models_test::read_all(dir + "/expected.safetensors").at("out"), 1e-4));
}
