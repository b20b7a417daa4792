// Tests einsum and adaptive_avg_pool2d (and nn::AdaptiveAvgPool2d) beyond their gradcheck rows
// (tests/support/op_cases.h): values against numbers computed with PyTorch 1.13 (torch.einsum and
// F.adaptive_avg_pool2d on the same inputs, pasted here as literals), and every bad input, each an ember::Error
// naming the op and the equation, shapes or dtypes.
#include <cmath>
#include <string>
#include <vector>

#include "test_util.h"

using namespace ember;
using test::values;

namespace {

const TensorOptions f64{.dtype = kFloat64};
using TV = std::vector<Tensor>;

// sin(0), sin(1), ... and cos(0), cos(1), ... in `shape` (the inputs of the PyTorch script too)
Tensor sinr(const Shape& s) { return sin(arange(s.numel(), f64)).reshape(s); }
Tensor cosr(const Shape& s) { return cos(arange(s.numel(), f64)).reshape(s); }

struct EinsumCase {
  std::string eq;
  TV operands;
  Shape shape;
  std::vector<double> torch;  // torch.einsum(eq, *operands), torch 1.13
};

TEST(Einsum, ValuesMatchTorch) {
  const std::vector<EinsumCase> cases = {
      {"ij,jk->ik",
       {sinr({2, 3}), cosr({3, 4})},
       {2, 4},
       {-0.6823249477067248, -0.589794904080245, 0.04498985437905534, 0.6384111482035959, 0.7753226457549449,
        0.735276141477206, 0.019220143624981034, -0.7145067656378179}},
      {"bij,bjk->bik",
       {sinr({2, 2, 3}), cosr({2, 3, 2})},
       {2, 2, 2},
       {-0.9445319508863184, -0.5751166657373441, 1.0828557073980716, 0.5534657020775345, -1.1940203681242862,
        -0.8048737449344586, 1.313922325807471, 0.8019454976705307}},
      {"i,j->ij",
       {sinr({3}), cosr({2})},
       {3, 2},
       {0.0, 0.0, 0.8414709848078965, 0.4546487134128409, 0.9092974268256817, 0.49129549643388193}},
      {"ij->ji",
       {sinr({2, 3})},
       {3, 2},
       {0.0, 0.1411200080598672, 0.8414709848078965, -0.7568024953079282, 0.9092974268256817, -0.9589242746631385}},
      {"ij->", {sinr({2, 3})}, {}, {0.17616164972237888}},
      {"ij->j", {sinr({2, 3})}, {3}, {0.1411200080598672, 0.0846684894999683, -0.049626847837456745}},
      {"i,i->", {sinr({4}), cosr({4})}, {}, {-0.06346028334058618}},
      {"i,i->i", {sinr({4}), cosr({4})}, {4}, {0.0, 0.4546487134128409, -0.37840124765396416, -0.13970774909946293}},
      {"ij,jk",  // implicit output: "ik"
       {sinr({2, 3}), cosr({3, 2})},
       {2, 2},
       {-0.9445319508863184, -0.5751166657373441, 1.0828557073980716, 0.5534657020775345}},
      {"ba",  // implicit output: "ab", a transpose
       {sinr({2, 3})},
       {3, 2},
       {0.0, 0.1411200080598672, 0.8414709848078965, -0.7568024953079282, 0.9092974268256817, -0.9589242746631385}},
      {"...ij,...jk->...ik",  // batch dims [2, 1] and [4] broadcast to [2, 4]
       {sinr({2, 1, 2, 3}), cosr({4, 3, 2})},
       {2, 4, 2, 2},
       {-0.9445319508863184, -0.5751166657373441, 1.0828557073980716,  0.5534657020775345,  -0.8853996390504246,
        -0.7626654029639336, 1.050220084654819,   0.7916924387210991,  -0.7557368995680352, -0.8894606514270502,
        0.9339245320599068,  0.9668534095739957,  -0.5658725919305738, -0.9454019743259303, 0.7432330866607203,
        1.064995392117995,   -1.1995060995637985, -0.5207371186275697, 1.292148368991183,   0.4775859782077254,
        -1.1940203681242862, -0.8048737449344586, 1.313922325807471,   0.8019454976705307,  -1.0934196586927445,
        -1.024894590154576,  1.2310299834225673,  1.0624224985448425,  -0.9057177661080296, -1.1632729198957985,
        1.0500744983086125,  1.2382675322726682}},
      {"...ij,jk",
       {sinr({2, 2, 3}), cosr({3, 2})},
       {2, 2, 2},
       {-0.9445319508863184, -0.5751166657373441, 1.0828557073980716, 0.5534657020775345, -1.1995060995637985,
        -0.5207371186275697, 1.292148368991183, 0.4775859782077254}},
      {"ij,jk,kl->il",
       {sinr({2, 3}), cosr({3, 4}), sinr({4, 2})},
       {2, 2},
       {-0.748729391723732, -0.2811028019584455, 0.8536831146831709, 0.2683216532763096}},
      {"ijk,ikl->jl",  // i batch and summed, k contracted
       {sinr({2, 3, 4}), cosr({2, 4, 2})},
       {3, 2},
       {-0.1586650436930689, 0.4269290267391945, 0.6910494143130199, 0.4191914751768535, -0.7447350390414125,
        -0.974932694078709}},
      {"ik,jk->", {sinr({2, 3}), cosr({4, 3})}, {}, {0.005101066086201634}},
      {"bn,anm,bm->ba",
       {sinr({2, 3}), cosr({4, 3, 5}), sinr({2, 5})},
       {2, 4},
       {2.543122082065358, -0.8416493605841422, -1.2643403898631012, 2.762657584420558, -2.1612265325700375,
        3.686621101654083, -3.4401364478637193, 1.5402390544002138}},
      {"i,j->", {sinr({3}), cosr({2})}, {}, {2.696712621480301}},
      {"ij,j->i", {sinr({2, 1}), cosr({3})}, {2}, {0.0, 0.9459442098467228}},  // j: size 1 broadcast against 3
      {"Ab,bA->A", {sinr({2, 3}), cosr({3, 2})}, {2}, {-0.9445319508863184, 0.5534657020775345}},
      {"i j -> j i",  // spaces are ignored
       {sinr({2, 3})},
       {3, 2},
       {0.0, 0.1411200080598672, 0.8414709848078965, -0.7568024953079282, 0.9092974268256817, -0.9589242746631385}},
  };
  for (const EinsumCase& c : cases)
    EXPECT_TENSOR_NEAR(einsum(c.eq, c.operands), c.shape, c.torch, 1e-12, 1e-12) << c.eq;
}

TEST(Einsum, DtypesPromoteAndMatchMatmul) {
  manual_seed(1);
  const Tensor a = randn({3, 4, 5}), b = randn({3, 5, 2}, f64);
  const Tensor y = einsum("bij,bjk->bik", {a, b});
  EXPECT_EQ(y.dtype(), kFloat64);
  EXPECT_TENSOR_NEAR(y, Shape({3, 4, 2}), values(matmul(a.to(kFloat64), b)), 1e-12, 1e-12);
  const Tensor i = randint(-3, 4, {2, 3});
  EXPECT_EQ(einsum("ij->ji", {i}).to_vector<int64_t>(), i.t().contiguous().to_vector<int64_t>());
}

TEST(Einsum, BadEquationsNameTheProblem) {
  const Tensor a = randn({2, 3}), b = randn({4, 2});
  EXPECT_THROW_MSG(einsum("ii->i", {randn({2, 2})}), ValueError, "einsum", "'i'", "repeated", "diagonals");
  EXPECT_THROW_MSG(einsum("ij->k", {a}), ValueError, "einsum", "output index 'k'", "no operand");
  EXPECT_THROW_MSG(einsum("ij->ii", {a}), ValueError, "einsum", "'i'", "more than once");
  EXPECT_THROW_MSG(einsum("ij,jk->ik", {a}), ValueError, "einsum", "2 operand terms", "1 operands");
  EXPECT_THROW_MSG(einsum("ij", {randn({2, 3, 4})}), ShapeError, "einsum", "operand 0", "float32[2, 3, 4]", "3 dims",
                   "name 2");
  EXPECT_THROW_MSG(einsum("...ijk", {a}), ShapeError, "einsum", "[2, 3]", "name 3", "ellipsis");
  EXPECT_THROW_MSG(einsum("ij,jk->ik", {a, b}), ShapeError, "einsum", "'j'", "size 3", "4", "[4, 2]");
  EXPECT_THROW_MSG(einsum("i#j", {a}), ValueError, "einsum", "invalid character '#'");
  EXPECT_THROW_MSG(einsum("ij->j->i", {a}), ValueError, "einsum", "more than one \"->\"");
  EXPECT_THROW_MSG(einsum(".ij", {a}), ValueError, "einsum", "ellipsis");
  EXPECT_THROW_MSG(einsum("...i...", {a}), ValueError, "einsum", "ellipsis");
  EXPECT_THROW_MSG(einsum("ij", {}), ValueError, "einsum", "at least one operand");
  EXPECT_THROW_MSG(einsum("ij", {Tensor()}), Error, "einsum", "undefined");
}

// --- adaptive_avg_pool2d

TEST(AdaptiveAvgPool2d, ValuesMatchTorch) {
  const Tensor x = sin(arange(70, f64)).reshape({1, 2, 5, 7}) * 3.0;
  // torch 1.13: F.adaptive_avg_pool2d(x, size): overlapping bins (5 -> 3, 7 -> 4), 2 x 2, global, more outputs than
  // inputs (5 -> 7), the identity, and a [C, H, W] input
  EXPECT_TENSOR_NEAR(
      adaptive_avg_pool2d(x, {3, 4}), Shape({1, 2, 3, 4}),
      (std::vector<double>{1.8658618726125504,  1.3746720203346072,  -1.827595498675854,  -1.0160592405268938,
                           2.0575221852199053,  -0.5007358076279784, -1.306154475351194,  1.3326754790504458,
                           0.3263071750054153,  -1.9081766145505465, 0.4359646172005493,  2.4359466938335474,
                           -2.376193360112624,  -0.6510588505398981, 1.940771060200487,   -0.04364328517785221,
                           -1.5249050219233597, 1.1656960105541216,  0.6886127681091279,  -1.9542621137231475,
                           0.751496618745383,   1.8930394870672134,  -1.2070945988300261, -2.038508220847571}),
      1e-12, 1e-12);
  EXPECT_TENSOR_NEAR(
      adaptive_avg_pool2d(x, {2}), Shape({1, 2, 2, 2}),
      (std::vector<double>{0.9494812566738422, -1.0410004342461614, -0.5792993537374507, 0.4269563926662432,
                           -0.5515231642677804, 0.6946683275711703, 0.9681532334426953, -0.8610365470200948}),
      1e-12, 1e-12);
  EXPECT_TENSOR_NEAR(adaptive_avg_pool2d(x, {1, 1}), Shape({1, 2, 1, 1}),
                     (std::vector<double>{0.1676943375786796, -0.17209516550809204}), 1e-12, 1e-12);
  const Tensor up = adaptive_avg_pool2d(x, {7, 3});
  EXPECT_EQ(up.shape(), Shape({1, 2, 7, 3}));
  EXPECT_NEAR(values(up)[0], 1.750768411633578, 1e-12);
  EXPECT_NEAR(values(up)[20], 2.0804212274689817, 1e-12);
  EXPECT_NEAR(values(up)[41], -1.8682324734478006, 1e-12);
  EXPECT_TENSOR_NEAR(adaptive_avg_pool2d(x, {5, 7}), x.shape(), values(x), 1e-15, 0);
  EXPECT_TENSOR_NEAR(
      adaptive_avg_pool2d(x.select(0, 0), {2, 3}), Shape({2, 2, 3}),
      (std::vector<double>{1.7207412071348092, -0.9461886493123313, -0.9332343807585285, -0.0153946385801857,
                           -1.5750270532567006, 1.3262796899580727, -1.4466641174517036, 1.4799338489968363,
                           0.21492453833356415, 0.7585994962050417, 1.1074464995593225, -1.6803202110786783}),
      1e-12, 1e-12);
  EXPECT_EQ(adaptive_avg_pool2d(x, {0, 2}).shape(), Shape({1, 2, 0, 2}));
  // 16-bit floats compute in float32 and keep their dtype; a strided input
  const Tensor h = adaptive_avg_pool2d(x.to(kFloat16), {3, 4});
  EXPECT_EQ(h.dtype(), kFloat16);
  EXPECT_TENSOR_NEAR(h, Shape({1, 2, 3, 4}), values(adaptive_avg_pool2d(x, {3, 4})), 1e-2, 1e-2);
  const Tensor xt = x.transpose(2, 3);
  EXPECT_TENSOR_NEAR(adaptive_avg_pool2d(xt, {4, 3}), Shape({1, 2, 4, 3}),
                     values(adaptive_avg_pool2d(x, {3, 4}).transpose(2, 3)), 1e-12, 1e-12);
}

TEST(AdaptiveAvgPool2d, ModuleAndBadInputs) {
  const Tensor x = randn({2, 3, 6, 5});
  nn::AdaptiveAvgPool2d global(1), pool(2, 3);
  EXPECT_TENSOR_NEAR(global(x), Shape({2, 3, 1, 1}), values(mean(x, {2, 3}, true)), 1e-6, 1e-6);
  EXPECT_EQ(values(pool(x)), values(adaptive_avg_pool2d(x, {2, 3})));
  EXPECT_EQ(global.repr(), "AdaptiveAvgPool2d(1)");
  EXPECT_EQ(pool.repr(), "AdaptiveAvgPool2d((2, 3))");
  EXPECT_TRUE(global.parameters().empty());
  EXPECT_THROW_MSG(nn::AdaptiveAvgPool2d(0, 2), ValueError, "AdaptiveAvgPool2d", "positive");
  EXPECT_THROW_MSG(adaptive_avg_pool2d(randn({6, 5}), {2}), ShapeError, "adaptive_avg_pool2d", "[6, 5]");
  EXPECT_THROW_MSG(adaptive_avg_pool2d(x.to(kInt64), {2}), DTypeError, "adaptive_avg_pool2d", "int64");
  EXPECT_THROW_MSG(adaptive_avg_pool2d(x, {1, 2, 3}), ValueError, "adaptive_avg_pool2d", "[1, 2, 3]");
  EXPECT_THROW_MSG(adaptive_avg_pool2d(x, {-1, 2}), ValueError, "adaptive_avg_pool2d", "non-negative", "[-1, 2]");
  EXPECT_THROW_MSG(adaptive_avg_pool2d(zeros({2, 0, 5}), {2}), ShapeError, "adaptive_avg_pool2d", "[2, 0, 5]");
}

}  // namespace
