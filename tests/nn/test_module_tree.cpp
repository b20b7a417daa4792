// The module tree: printing (what is registered, and only that), named_modules / children / modules, apply,
// num_parameters, and the ModuleList / ModuleDict containers with their errors.
#include <sstream>

#include "module_test_util.h"

using namespace ember;

namespace {

using test::names;
using test::Net;

// `hidden` and `w` are members but never registered: nothing sees them.
struct Sneaky : nn::Module {
  nn::Dense seen{2, 2}, hidden{2, 2};
  Tensor w = ones({5});
  Sneaky() { register_module("seen", seen); }
  Tensor forward(const Tensor& x) override { return hidden(seen(x)) * sum(w); }
};

struct Outer : nn::Module {
  nn::Chain block{nn::Dense(4, 3, nn::tanh), nn::relu};
  Net net;
  Outer() {
    register_module("block", block);
    register_module("net", net);
  }
};

// Exposes registration so tests can build trees by hand.
struct Raw : nn::Module {
  using nn::Module::register_module;
  using nn::Module::register_parameter;
};

}  // namespace

namespace app::models {
struct Block : nn::Module {
  Block() { register_module("fc", nn::Dense(2, 2)); }
};
template <class M>
struct Wrap : nn::Module {
  explicit Wrap(const M& m) { register_module("inner", m); }
};
}  // namespace app::models

TEST(ModuleTree, CustomModulePrintsItsRegisteredTree) {
  Net net;
  EXPECT_EQ(net.repr(),
            "Net(\n  (scale): Parameter(float32[3])\n  (count): Buffer(int64[])\n  (fc1): Dense(12 => 8, relu)\n"
            "  (fc2): Dense(8 => 3)\n)");
  std::ostringstream os;
  os << net;
  EXPECT_EQ(os.str(), net.repr() + "  # 134 parameters");
  EXPECT_EQ(net.to_string(), os.str());
}

TEST(ModuleTree, NestedTreesIndent) {
  Outer o;
  EXPECT_EQ(o.repr(),
            "Outer(\n"
            "  (block): Chain(\n"
            "    Dense(4 => 3, tanh),\n"
            "    relu,\n"
            "  )\n"
            "  (net): Net(\n"
            "    (scale): Parameter(float32[3])\n"
            "    (count): Buffer(int64[])\n"
            "    (fc1): Dense(12 => 8, relu)\n"
            "    (fc2): Dense(8 => 3)\n"
            "  )\n"
            ")");
  // A user module inside a Chain prints its own tree there.
  nn::Chain c{Net(), nn::Dense(3, 1)};
  EXPECT_EQ(c.repr(),
            "Chain(\n  Net(\n    (scale): Parameter(float32[3])\n    (count): Buffer(int64[])\n"
            "    (fc1): Dense(12 => 8, relu)\n    (fc2): Dense(8 => 3)\n  ),\n  Dense(3 => 1),\n)");
}

TEST(ModuleTree, UnregisteredMembersAreInvisible) {
  Sneaky s;
  EXPECT_EQ(s.repr(), "Sneaky(\n  (seen): Dense(2 => 2)\n)");
  EXPECT_EQ(s.num_parameters(), 6);  // seen only; hidden's 6 and w's 5 are not counted
  EXPECT_EQ(s.parameters().size(), 2u);
  EXPECT_EQ(names(s.named_modules()), (std::vector<std::string>{"", "seen"}));
  int calls = 0;
  s.apply([&](nn::Module&) { ++calls; });
  EXPECT_EQ(calls, 2);
}

TEST(ModuleTree, TypeNamesDropNamespaces) {
  EXPECT_EQ(app::models::Block().repr(), "Block(\n  (fc): Dense(2 => 2)\n)");
  EXPECT_EQ(app::models::Wrap<nn::Dense>(nn::Dense(1, 1)).repr(), "Wrap<Dense>(\n  (inner): Dense(1 => 1)\n)");
  EXPECT_EQ(Raw().repr(), "Raw()");
  EXPECT_EQ(nn::Module().to_string(), "Module()");  // no parameters: no count
}

TEST(ModuleTree, ParameterCountFormatting) {
  Raw big;
  big.register_parameter("w", zeros({1000, 1000}));
  EXPECT_EQ(big.to_string(), "Raw(\n  (w): Parameter(float32[1000, 1000])\n)  # 1_000_000 parameters");
  Raw one;
  one.register_parameter("w", zeros({1}));
  EXPECT_EQ(one.to_string(), "Raw(\n  (w): Parameter(float32[1])\n)  # 1 parameter");
  EXPECT_EQ(nn::Dense(2, 3).to_string(), "Dense(2 => 3)  # 9 parameters");
  nn::Dense d(30, 33);  // 1_023
  EXPECT_EQ(d.to_string(), "Dense(30 => 33)  # 1_023 parameters");
  // Frozen parameters are marked, and the count says how many still train.
  Net net;
  net.fc1.requires_grad_(false);
  EXPECT_EQ(net.num_parameters(), 134);
  EXPECT_EQ(net.num_parameters(/*trainable_only=*/true), 134 - 104);
  EXPECT_NE(net.to_string().find("# 134 parameters, 30 trainable"), std::string::npos) << net.to_string();
  net.scale.requires_grad_(false);
  EXPECT_NE(net.repr().find("(scale): Parameter(float32[3], frozen)"), std::string::npos) << net.repr();
}

TEST(ModuleTree, NumParametersCountsTiedWeightsOnce) {
  nn::Dense d(3, 3);
  nn::Chain c{d, nn::tanh, d};
  EXPECT_EQ(c.num_parameters(), 12);
  EXPECT_EQ(nn::Chain{nn::relu}.num_parameters(), 0);
}

TEST(ModuleTree, NamedModulesPreOrderWithPaths) {
  Outer o;
  EXPECT_EQ(names(o.named_modules()),
            (std::vector<std::string>{"", "block", "block.0", "block.1", "net", "net.fc1", "net.fc2"}));
  auto nm = o.named_modules();
  EXPECT_EQ(nm[0].second, &o);  // self first
  EXPECT_EQ(nm[2].second->repr(), "Dense(4 => 3, tanh)");
  EXPECT_NE(dynamic_cast<nn::Chain*>(nm[1].second), nullptr);  // children keep their types
  EXPECT_NE(dynamic_cast<Net*>(nm[4].second), nullptr);
  std::vector<nn::Module*> mods = o.modules();
  ASSERT_EQ(mods.size(), nm.size());
  for (size_t i = 0; i < mods.size(); ++i) EXPECT_EQ(mods[i], nm[i].second);

  // A module shared by two parents (or twice in one) is listed once, under its first path.
  nn::Dense shared(3, 3);
  nn::Chain c{shared, nn::tanh, shared};
  EXPECT_EQ(names(c.named_modules()), (std::vector<std::string>{"", "0", "1"}));
  Raw r;
  r.register_module("a", c);
  r.register_module("b", shared);
  EXPECT_EQ(names(r.named_modules()), (std::vector<std::string>{"", "a", "a.0", "a.1"}));
}

TEST(ModuleTree, ChildrenAreDirectOnly) {
  Outer o;
  auto ch = o.children();
  ASSERT_EQ(ch.size(), 2u);
  EXPECT_NE(dynamic_cast<nn::Chain*>(ch[0].get()), nullptr);
  EXPECT_NE(dynamic_cast<Net*>(ch[1].get()), nullptr);
  EXPECT_TRUE(ch[1]->parameters()[0].is_same(o.net.scale));  // a handle on the same module
  EXPECT_TRUE(nn::Dense(1, 1).children().empty());
}

TEST(ModuleTree, ApplyVisitsChildrenFirstEachOnce) {
  Outer o;
  std::vector<std::string> order;
  nn::Module& r = o.apply([&](nn::Module& m) { order.push_back(m.repr().substr(0, m.repr().find('('))); });
  EXPECT_EQ(&r, &o);
  EXPECT_EQ(order, (std::vector<std::string>{"Dense", "relu", "Chain", "Dense", "Dense", "Net", "Outer"}));

  nn::Dense shared(2, 2);
  nn::Chain c{shared, shared, nn::Chain{shared}};
  int dense_calls = 0;
  c.apply([&](nn::Module& m) { dense_calls += dynamic_cast<nn::Dense*>(&m) != nullptr; });
  EXPECT_EQ(dense_calls, 1);

  // The usual use: re-initialise every layer of one kind.
  o.apply([](nn::Module& m) {
    if (auto* d = dynamic_cast<nn::Dense*>(&m)) {
      nn::init::constant_(d->weight(), 0.25);
      nn::init::zeros_(d->bias());
    }
  });
  for (const auto& [n, p] : o.named_parameters()) {
    if (n == "net.scale") continue;
    const double want = n.ends_with("weight") ? 0.25 : 0.0;
    for (double v : test::values(p)) EXPECT_EQ(v, want) << n;
  }
  EXPECT_THROW_MSG(o.apply(nullptr), ValueError, "apply");
}

// --- ModuleList
TEST(ModuleList, HoldsModulesUnderIndexNames) {
  manual_seed(1);
  nn::ModuleList list{nn::Dense(4, 3, nn::relu), nn::relu, nn::Dense(3, 2)};
  EXPECT_EQ(list.size(), 3u);
  EXPECT_FALSE(list.empty());
  EXPECT_EQ(names(list.named_children()), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(names(list.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(list.repr(), "ModuleList(\n  (0): Dense(4 => 3, relu)\n  (1): relu\n  (2): Dense(3 => 2)\n)");
  // Elements are callable through list[i] and keep their types.
  Tensor x = randn({5, 4});
  Tensor y = list[2](list[1](list[0](x)));
  EXPECT_EQ(y.shape(), Shape({5, 2}));
  EXPECT_NE(dynamic_cast<nn::Dense*>(&list[0]), nullptr);
  // Iteration, in order.
  Tensor h = x;
  for (nn::Module& m : list) h = m(h);
  EXPECT_EQ(test::values(h), test::values(y));
  std::vector<std::string> reprs;
  for (auto it = list.begin(); it != list.end(); ++it) reprs.push_back(it->repr());
  EXPECT_EQ(reprs, (std::vector<std::string>{"Dense(4 => 3, relu)", "relu", "Dense(3 => 2)"}));
}

TEST(ModuleList, PushBackIsSharedByCopies) {
  nn::ModuleList list;
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.repr(), "ModuleList()");
  nn::ModuleList alias = list;
  alias.push_back(nn::Dense(2, 2));
  list.append(nn::Dense(2, 1));
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(alias[1].repr(), "Dense(2 => 1)");
  EXPECT_EQ(names(alias.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
}

TEST(ModuleList, InsideAModel) {
  struct Tower : nn::Module {
    nn::ModuleList blocks{nn::Dense(4, 4, nn::relu), nn::Dense(4, 4, nn::relu)};
    Tower() { register_module("blocks", blocks); }
    Tensor forward(const Tensor& x) override {
      Tensor h = x;
      for (nn::Module& b : blocks) h = b(h);
      return h;
    }
  } t;
  EXPECT_EQ(names(t.named_parameters())[2], "blocks.1.weight");
  EXPECT_EQ(t.num_parameters(), 40);
  EXPECT_EQ(t(randn({3, 4})).shape(), Shape({3, 4}));
  t.eval();
  EXPECT_FALSE(t.blocks[1].is_training());
}

TEST(ModuleList, Errors) {
  nn::ModuleList list{nn::Dense(2, 2)};
  EXPECT_THROW_MSG(list[1], IndexError, "ModuleList", "index 1", "1 modules");
  EXPECT_THROW(nn::ModuleList()[0], IndexError);
  EXPECT_THROW_MSG(list(zeros({1, 2})), Error, "ModuleList has no forward()");
}

// --- ModuleDict
TEST(ModuleDict, HoldsModulesUnderKeysInInsertionOrder) {
  nn::ModuleDict heads{{"z_cls", nn::Dense(4, 10)}, {"a_reg", nn::Dense(4, 1)}};
  heads.insert("act", nn::tanh);
  EXPECT_EQ(heads.size(), 3u);
  EXPECT_EQ(heads.keys(), (std::vector<std::string>{"z_cls", "a_reg", "act"}));
  EXPECT_TRUE(heads.contains("a_reg"));
  EXPECT_FALSE(heads.contains("missing"));
  EXPECT_EQ(names(heads.named_parameters()),
            (std::vector<std::string>{"z_cls.weight", "z_cls.bias", "a_reg.weight", "a_reg.bias"}));
  EXPECT_EQ(heads.repr(), "ModuleDict(\n  (z_cls): Dense(4 => 10)\n  (a_reg): Dense(4 => 1)\n  (act): tanh\n)");
  Tensor x = randn({2, 4});
  EXPECT_EQ(heads["z_cls"](x).shape(), Shape({2, 10}));
  EXPECT_EQ(heads.at("a_reg")(x).shape(), Shape({2, 1}));
  std::vector<std::string> seen;
  for (auto [key, m] : heads) seen.push_back(key + "=" + m.repr());
  EXPECT_EQ(seen, (std::vector<std::string>{"z_cls=Dense(4 => 10)", "a_reg=Dense(4 => 1)", "act=tanh"}));
  // Copies share the dictionary.
  nn::ModuleDict alias = heads;
  alias.insert("extra", nn::Dense(1, 1));
  EXPECT_TRUE(heads.contains("extra"));
}

TEST(ModuleDict, Errors) {
  nn::ModuleDict d{{"enc", nn::Dense(2, 2)}};
  EXPECT_THROW_MSG(d["dec"], ValueError, "ModuleDict", "\"dec\"", "\"enc\"");
  EXPECT_THROW_MSG(nn::ModuleDict()["x"], ValueError, "\"x\"", "none");
  EXPECT_THROW_MSG(d.insert("enc", nn::Dense(2, 2)), ValueError, "\"enc\"", "already exists");
  EXPECT_THROW_MSG(d.insert("a.b", nn::Dense(2, 2)), ValueError, "\"a.b\"");
  EXPECT_THROW_MSG(d.insert("", nn::Dense(2, 2)), ValueError, "non-empty");
  EXPECT_THROW_MSG((nn::ModuleDict{{"k", nn::relu}, {"k", nn::tanh}}), ValueError, "\"k\"", "already exists");
  EXPECT_EQ(d.size(), 1u);  // nothing half-inserted
  EXPECT_EQ(d.named_children().size(), 1u);
  EXPECT_THROW_MSG(d(zeros({1, 2})), Error, "ModuleDict has no forward()");
}
