// The op definition table (autograd/op_def.h) and its entry wrapper: every name once, grad_fn names, autocast
// rules, out-of-memory messages and create_graph refusals all come from the table (issue 33, item 1).
#include <set>
#include <string>

#include "ember/autograd/op_def.h"
#include "test_util.h"

using namespace ember;
namespace opdef = autograd::opdef;
using autograd::Autocast;
using autograd::OpDef;

namespace {
const OpDef kAll[] = {
#define EMBER_X(Name, ...) opdef::Name,
    EMBER_AUTOGRAD_OPS(EMBER_X)
#undef EMBER_X
};

// the elementwise kernels' definitions (op_list.h)
constexpr OpDef kExp = opdef::of(UnaryOp::Exp), kLog = opdef::of(UnaryOp::Log), kTanh = opdef::of(UnaryOp::Tanh),
                kSin = opdef::of(UnaryOp::Sin), kCos = opdef::of(UnaryOp::Cos), kSqrt = opdef::of(UnaryOp::Sqrt),
                kSquare = opdef::of(UnaryOp::Square), kAbs = opdef::of(UnaryOp::Abs), kMish = opdef::of(UnaryOp::Mish),
                kHardswish = opdef::of(UnaryOp::Hardswish), kMul = opdef::of(BinaryOp::Mul),
                kAdd = opdef::of(BinaryOp::Add), kPow = opdef::of(BinaryOp::Pow);

}  // namespace

TEST(OpDef, EachNameOnceAndTheKernelNamesAgree) {
  std::set<std::string> seen;
  for (const OpDef& d : kAll) {
    EXPECT_TRUE(seen.insert(d.name).second) << d.name << " is defined twice";
    EXPECT_FALSE(std::string(d.name).empty());
  }
  // the elementwise kernels' ops are defined by op_list.h's rows, whose names core's messages use too
  for (UnaryOp op : kAllUnaryOps) {
    EXPECT_STREQ(opdef::of(op).name, name(op));
    EXPECT_TRUE(seen.insert(name(op)).second) << name(op) << " is in both tables";
  }
  for (BinaryOp op : kAllBinaryOps) {
    EXPECT_STREQ(opdef::of(op).name, name(op));
    EXPECT_TRUE(seen.insert(name(op)).second) << name(op) << " is in both tables";
  }
  EXPECT_GT(seen.size(), 90u);  // every public differentiable op, in one of the two tables
  EXPECT_EQ(opdef::of(UnaryOp::Exp).autocast, Autocast::kFp32);
  EXPECT_EQ(opdef::of(UnaryOp::Tanh).autocast, Autocast::kKeep);
  EXPECT_EQ(opdef::of(BinaryOp::Pow).autocast, Autocast::kFp32);
}

TEST(OpDef, GradFnNamesComeFromTheTable) {
  const Tensor x = randn({3, 4}).requires_grad_(true);
  const Tensor w = randn({5, 4}).requires_grad_(true);
  const std::pair<Tensor, const OpDef*> cases[] = {
      {exp(x), &kExp},
      {x * x, &kMul},
      {x + 1.0, &kAdd},
      {tanh(x), &kTanh},
      {mish(x), &kMish},
      {softmax(x, 1), &opdef::softmax},
      {linear(x, w), &opdef::linear},
      {x.sum(), &opdef::sum},
      {x.mean({0}), &opdef::mean},
      {x.reshape({12}), &opdef::reshape},
      {x.t(), &opdef::transpose},  // a 2-D t() is transpose(0, 1)
      {x.clone(), &opdef::clone},
      {x.to(kFloat64), &opdef::to},
      {cat({x, x}, 0), &opdef::cat},
      {layer_norm(x, {4}), &opdef::layer_norm},
      {autograd::checkpoint([](const std::vector<Tensor>& in) { return in[0] * 2.0; }, {x}), &opdef::checkpoint},
  };
  for (const auto& [y, def] : cases) EXPECT_EQ(y.grad_fn_name(), def->name);
}

TEST(OpDef, TheEntryCastsAsTheTableSays) {
  amp::AutocastGuard ac(kBFloat16);
  const Tensor f32 = randn({4, 4}), b16 = randn({4, 4}).to(kBFloat16);
  for (const OpDef& d : kAll) {
    autograd::OpEntry e(d);
    switch (d.autocast) {
      case Autocast::kFp32:
        EXPECT_EQ(e.in(b16).dtype(), kFloat32) << d.name;
        EXPECT_EQ(e.in(f32).dtype(), kFloat32) << d.name;
        break;
      case Autocast::kLower:
        EXPECT_EQ(e.in(f32).dtype(), kBFloat16) << d.name;
        break;
      case Autocast::kPromote: {
        const std::vector<Tensor> both = e.in(std::vector<Tensor>{b16, f32});
        EXPECT_EQ(both[0].dtype(), kFloat32) << d.name;
        EXPECT_EQ(both[1].dtype(), kFloat32) << d.name;
        break;
      }
      case Autocast::kKeep:
        EXPECT_EQ(e.in(b16).dtype(), kBFloat16) << d.name;
        EXPECT_EQ(e.in(f32).dtype(), kFloat32) << d.name;
        break;
    }
    EXPECT_FALSE(e.in(Tensor()).defined()) << d.name << ": an absent tensor stays absent";
  }
  // and the public ops follow
  EXPECT_EQ(exp(b16).dtype(), kFloat32);
  EXPECT_EQ(log_softmax(b16, 1).dtype(), kFloat32);
  EXPECT_EQ(matmul(f32, f32).dtype(), kBFloat16);
  EXPECT_EQ(tanh(b16).dtype(), kBFloat16);
}

// Every op opens its memory scope through the entry, so an out-of-memory error names it — including the unary
// math that had none before the table (exp, log, tanh, sin).
TEST(OpDef, AnOutOfMemoryErrorNamesTheOp) {
  const Tensor x = rand({1 << 20}) + 0.5;  // 4 MiB, positive (log, sqrt)
  const Tensor m = randn({512, 512});
  const std::pair<const OpDef*, std::function<void()>> cases[] = {
      {&kExp, [&] { (void)exp(x); }},
      {&kLog, [&] { (void)log(x); }},
      {&kTanh, [&] { (void)tanh(x); }},
      {&kSin, [&] { (void)sin(x); }},
      {&kCos, [&] { (void)cos(x); }},
      {&kSqrt, [&] { (void)sqrt(x); }},
      {&kSquare, [&] { (void)square(x); }},
      {&kAbs, [&] { (void)abs(x); }},
      {&kMul, [&] { (void)(x * x); }},
      {&kAdd, [&] { (void)(x + 1.0); }},
      {&kPow, [&] { (void)pow(x, 2.0); }},
      {&kMish, [&] { (void)mish(x); }},
      {&kHardswish, [&] { (void)hardswish(x); }},
      {&opdef::clamp, [&] { (void)clamp(x, 0.0, 1.0); }},
      {&opdef::silu, [&] { (void)silu(x); }},
      {&opdef::softmax, [&] { (void)softmax(m, 1); }},
      {&opdef::cumsum, [&] { (void)cumsum(x, 0); }},
      {&opdef::matmul, [&] { (void)matmul(m, m); }},
      {&opdef::clone, [&] { (void)x.clone(); }},
      {&opdef::to, [&] { (void)x.to(kFloat64); }},
  };
  cpu_empty_cache();
  for (const auto& [def, run] : cases) {
    test::CpuLimitGuard limit(cpu_memory_stats().bytes_in_use + (64 << 10));
    const std::string msg = test::oom_message(run);
    EXPECT_NE(msg.find(std::string("during the forward of ") + def->name), std::string::npos)
        << def->name << ": " << msg;
  }
}

// The table's derivative column decides what a create_graph pass accepts.
TEST(OpDef, ACreateGraphPassRefusesAOnceDifferentiableOp) {
  EXPECT_EQ(opdef::checkpoint.derivative, autograd::Derivative::kOnce);
  for (const OpDef& d : kAll)
    if (std::string(d.name) != opdef::checkpoint.name) EXPECT_EQ(d.derivative, autograd::Derivative::kTwice) << d.name;
  const Tensor x = randn({3}).requires_grad_(true);
  const Tensor y = autograd::checkpoint([](const std::vector<Tensor>& in) { return in[0] * in[0]; }, {x}).sum();
  EXPECT_THROW_MSG(autograd::grad({y}, {x}, {.create_graph = true}), Error, opdef::checkpoint.name,
                   "not differentiable");
}
