// models::ResNet: torchvision's names and parameter counts, bad input, and parity with timm's resnet50 (a small
// random one at 64 x 64 in float64: logits, every gradient and the BatchNorm statistics; the full-size forward at
// 224 in float32) when `make models-ref` installed the reference.
#include "model_ref.h"

using namespace ember;
using models_test::close;

namespace {
std::map<std::string, Shape> shapes_of(const nn::Module& m) {
  std::map<std::string, Shape> out;
  for (const auto& [n, t] : m.state_dict()) out.emplace(n, t.shape());
  return out;
}
}  // namespace

// torchvision's parameter counts (torchvision.models.resnetXX().parameters()) and names.
TEST(ResNet, TorchvisionNamesAndSizes) {
  EXPECT_EQ(models::resnet18().num_parameters(), 11689512);
  EXPECT_EQ(models::resnet34().num_parameters(), 21797672);
  auto r50 = models::resnet50();
  EXPECT_EQ(r50.num_parameters(), 25557032);
  EXPECT_EQ(models::resnet101().num_parameters(), 44549160);
  const auto s = shapes_of(r50);
  for (const auto& [name, shape] : std::map<std::string, Shape>{
           {"conv1.weight", {64, 3, 7, 7}},
           {"bn1.running_var", {64}},
           {"layer1.0.conv1.weight", {64, 64, 1, 1}},
           {"layer1.0.conv3.weight", {256, 64, 1, 1}},
           {"layer1.0.downsample.0.weight", {256, 64, 1, 1}},
           {"layer1.0.downsample.1.num_batches_tracked", {}},
           {"layer2.0.conv2.weight", {128, 128, 3, 3}},  // v1.5: the stride on the 3x3
           {"layer4.2.bn3.bias", {2048}},
           {"fc.weight", {1000, 2048}}}) {
    ASSERT_TRUE(s.count(name)) << name;
    EXPECT_EQ(s.at(name), shape) << name;
  }
  EXPECT_FALSE(s.count("layer1.1.downsample.0.weight"));  // the identity shortcut has no parameters
  EXPECT_EQ(r50.arch(), "resnet50");
  EXPECT_EQ(shapes_of(models::resnet18({.num_classes = 7})).at("fc.weight"), Shape({7, 512}));
}

TEST(ResNet, ForwardAndBadInput) {
  manual_seed(0);
  auto net = models::resnet18({.num_classes = 5});
  net.eval();
  EXPECT_EQ(net(randn({2, 3, 64, 64})).shape(), Shape({2, 5}));
  EXPECT_EQ(net(randn({1, 3, 33, 47})).shape(), Shape({1, 5}));  // any size the stem and stages can take
  EXPECT_THROW_MSG(net(randn({2, 1, 64, 64})), ShapeError, "models::ResNet", "3 channels", "got 1 channels");
  EXPECT_THROW_MSG(net(randn({3, 64, 64})), ShapeError, "models::ResNet", "[N, 3, H, W]");
  EXPECT_THROW_MSG(net(zeros({1, 3, 8, 8}, {.dtype = kUInt8})), DTypeError, "floating point");
  EXPECT_THROW_MSG(models::resnet50({.num_classes = 0}), ValueError, "num_classes");
}

// Loading checks everything before it copies anything: a weight of another shape (a 10-class file into a
// 1000-class model) is an IOError naming it, and the model is as it was.
TEST(ResNet, LoadPretrainedChecksFirst) {
  manual_seed(1);
  auto small = models::resnet18({.num_classes = 10});
  const std::string path = (test::tmpdir("resnet_load") / "r18.safetensors").string();
  nn::save_tensors(path, small.state_dict());
  auto big = models::resnet18();
  const std::vector<float> before = big.state_dict()[0].second.to_vector<float>();
  EXPECT_THROW_MSG(models::load_pretrained(big, path), IOError, "models::load_pretrained", "\"fc.weight\"",
                   "[10, 512]", "[1000, 512]");
  EXPECT_EQ(big.state_dict()[0].second.to_vector<float>(), before);
  // Strict lists what is missing; not strict loads the rest and says so. A "module." prefix is dropped.
  nn::NamedTensors partial;
  for (const auto& [n, t] : small.state_dict())
    if (n.rfind("fc.", 0) != 0 && n.rfind("layer4.", 0) != 0) partial.emplace_back("module." + n, t);
  nn::save_tensors(path, partial);
  auto other = models::resnet18({.num_classes = 10});
  EXPECT_THROW_MSG(models::load_pretrained(other, path), IOError, "missing", "fc.weight", "layer4.1.bn2.bias");
  const nn::LoadResult r = models::load_pretrained(other, path, {.strict = false});
  EXPECT_TRUE(r.unexpected.empty());
  EXPECT_EQ(r.missing.size(), small.state_dict().size() - partial.size());
  EXPECT_EQ(other.state_dict()[0].second.to_vector<float>(), small.state_dict()[0].second.to_vector<float>());
  // Not a library model.
  nn::Chain chain{nn::Dense(2, 2)};
  EXPECT_THROW_MSG(models::load_pretrained(chain, path), ValueError, "not one of the library's");
}

TEST(ResNet, MatchesTimmResNet50InFloat64) {
  std::string why;
  const std::string dir = models_test::run_reference("resnet50", &why);
  if (dir.empty()) GTEST_SKIP() << why;
  auto net = models::resnet50({.num_classes = 10});
  net.to(kFloat64);
  const nn::LoadResult r = models::load_pretrained(net, dir + "/model.safetensors");
  EXPECT_TRUE(r.complete());
  auto in = models_test::read_all(dir + "/inputs.safetensors");
  auto want = models_test::read_all(dir + "/expected.safetensors");
  net.train();
  Tensor x = in.at("x").clone().requires_grad_();
  const Tensor out = net(x);
  EXPECT_TRUE(close(out, want.at("out"), 1e-6));
  (out * in.at("gy")).sum().backward();
  EXPECT_TRUE(close(x.grad(), want.at("grad.input"), 1e-6)) << "input gradient";
  int compared = 0;
  for (const auto& [n, p] : net.named_parameters()) {
    ASSERT_TRUE(want.count("grad." + n)) << n;
    EXPECT_TRUE(close(p.grad(), want.at("grad." + n), 1e-6)) << n;
    ++compared;
  }
  for (const auto& [n, b] : net.named_buffers()) EXPECT_TRUE(close(b, want.at("buffer." + n), 1e-6)) << n;
  EXPECT_EQ(compared, 161);
}

TEST(ResNet, FullSizeForwardMatchesTimm) {
  std::string why;
  const std::string dir = models_test::run_reference("resnet50-full", &why);
  if (dir.empty()) GTEST_SKIP() << why;
  auto net = models::resnet50();
  models::load_pretrained(net, dir + "/model.safetensors");
  net.eval();
  NoGradGuard g;
  const Tensor out = net(models_test::read_all(dir + "/inputs.safetensors").at("x"));
  EXPECT_TRUE(close(out, models_test::read_all(dir + "/expected.safetensors").at("out"), 1e-4));
}
