// Generator objects, the thread-local GeneratorScope, and that the global generator is unaffected by either.
#include <gtest/gtest.h>

#include <thread>

#include "test_util.h"

namespace ember {
namespace {

TEST(Generator, SameSeedSameNumbersWhateverElseDraws) {
  Generator a(42), b(42);
  Tensor x = randn({5}, {.generator = &a});
  (void)randn({100});  // the global generator moving does not matter
  Tensor y = randn({5}, {.generator = &b});
  EXPECT_EQ(test::values(x), test::values(y));
  // the next draw continues the stream
  Tensor x2 = randn({5}, {.generator = &a});
  EXPECT_NE(test::values(x), test::values(x2));
  EXPECT_EQ(a.state().offset, 4u);  // two draws of 5 normals: 2 blocks each
}

TEST(Generator, DoesNotMoveTheGlobalGenerator) {
  manual_seed(9);
  const PhiloxState before = get_rng_state();
  Generator g(1);
  (void)rand({10}, {.generator = &g});
  (void)randint(0, 5, {10}, {.dtype = kInt64, .generator = &g});
  (void)randperm(10, {.dtype = kInt64, .generator = &g});
  EXPECT_EQ(get_rng_state(), before);
}

TEST(Generator, StateRoundTripAndManualSeed) {
  Generator g(3);
  (void)randn({7}, {.generator = &g});
  const PhiloxState s = g.state();
  Tensor a = randn({4}, {.generator = &g});
  g.set_state(s);
  EXPECT_EQ(test::values(randn({4}, {.generator = &g})), test::values(a));
  g.manual_seed(3);
  EXPECT_EQ(g.state(), (PhiloxState{.seed = 3, .offset = 0}));
  EXPECT_EQ(g.initial_seed(), 3u);
  Generator copy = g;  // an independent copy of the position
  (void)randn({4}, {.generator = &copy});
  EXPECT_EQ(g.state().offset, 0u);
}

TEST(Generator, MatchesTheGlobalStreamForTheSameSeed) {
  manual_seed(77);
  Tensor global = rand({9});
  Generator g(77);
  EXPECT_EQ(test::values(rand({9}, {.generator = &g})), test::values(global));
}

TEST(GeneratorScope, RedirectsUnqualifiedDrawsOnThisThreadOnly) {
  manual_seed(5);
  Tensor expect_global = randn({3});
  manual_seed(5);
  Generator g(11);
  Tensor scoped, other_thread;
  {
    GeneratorScope use(g);
    scoped = randn({3});
    EXPECT_EQ(&current_generator(), &g);
    std::thread t([&] { other_thread = randn({3}); });  // another thread: the global generator
    t.join();
    {
      GeneratorScope inner(nullptr);  // back to the global one
      EXPECT_EQ(&current_generator(), &default_generator());
    }
    EXPECT_EQ(&current_generator(), &g);
  }
  EXPECT_EQ(&current_generator(), &default_generator());
  Generator ref(11);
  EXPECT_EQ(test::values(scoped), test::values(randn({3}, {.generator = &ref})));
  EXPECT_EQ(test::values(other_thread), test::values(expect_global));
}

TEST(GeneratorScope, DropoutDrawsFromTheScopedGenerator) {
  nn::Dropout drop(0.5);
  Tensor x = ones({64});
  Generator g1(8), g2(8);
  Tensor a, b;
  {
    GeneratorScope use(g1);
    a = drop(x);
  }
  (void)rand({33});
  {
    GeneratorScope use(g2);
    b = drop(x);
  }
  EXPECT_EQ(test::values(a), test::values(b));
}

TEST(Generator, RandpermBadDtype) {
  EXPECT_THROW_MSG(randperm(4, {.dtype = kFloat32}), DTypeError, "randperm", "int64");
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {
TEST(GeneratorScope, ScopesEndingOutOfOrderNeverReinstateADeadGenerator) {
  auto g1 = std::make_unique<Generator>(1);
  Generator g2(2);
  auto outer = std::make_unique<GeneratorScope>(*g1);
  {
    GeneratorScope inner(g2);
    outer.reset();  // the outer scope ends first
    g1.reset();     // and its generator is gone
    EXPECT_EQ(&current_generator(), &g2);
  }
  EXPECT_EQ(&current_generator(), &default_generator());
  (void)randn({2});  // no use of the destroyed generator
}
}  // namespace
}  // namespace ember
