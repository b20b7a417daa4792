// Table-driven gradcheck of every differentiable op: each case of tests/support/op_cases.h compares the
// analytic Jacobian autograd computes with central finite differences in float64 (gradcheck keeps the
// inputs' strides, so the non-contiguous cases stay non-contiguous).
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "op_cases.h"
#include "test_util.h"

namespace ember {
namespace {

using namespace test_ops;
using TV = std::vector<Tensor>;

class GradcheckOps : public ::testing::TestWithParam<OpCase> {};

TEST_P(GradcheckOps, AnalyticMatchesNumeric) {
  const OpCase& c = GetParam();
  autograd::GradcheckResult r = autograd::gradcheck_report(c.fn, c.inputs(), c.eps, c.atol, c.rtol);
  EXPECT_TRUE(r.ok) << c.name << ": " << r.report;
}

INSTANTIATE_TEST_SUITE_P(Ops, GradcheckOps, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

TEST(GradcheckOpsTable, NamesAreUniqueAndInputsNonContiguousWhereClaimed) {
  std::set<std::string> seen;
  for (const OpCase& c : all_cases()) {
    EXPECT_TRUE(seen.insert(c.name).second) << "duplicate case " << c.name;
    if (c.name.find("noncontig") == std::string::npos && c.name.find("transposed") == std::string::npos) continue;
    bool any = false;
    for (const Tensor& t : c.inputs()) any = any || (t.defined() && !t.is_contiguous());
    EXPECT_TRUE(any) << c.name << " claims a non-contiguous input but has none";
  }
}

// --- gradcheck itself must be able to fail

TEST(GradcheckNegative, DetachedBranchIsCaught) {
  // d(detach(x) * x)/dx is x analytically (the detached factor is a constant to autograd) but 2x numerically.
  autograd::TensorFn fn = [](const TV& in) { return in[0].detach() * in[0]; };
  autograd::GradcheckResult r = autograd::gradcheck_report(fn, {away({2, 3}, 1)});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.report.find("numeric"), std::string::npos) << r.report;
  EXPECT_NE(r.report.find("analytic"), std::string::npos) << r.report;
  EXPECT_NE(r.report.find("input 0"), std::string::npos) << r.report;
}

TEST(GradcheckNegative, DetachedInnerOpIsCaught) {
  // exp(detach(x)) + x: autograd sees slope 1, finite differences see exp(x) + 1.
  autograd::TensorFn fn = [](const TV& in) { return exp(in[0].detach()) + in[1] * in[0]; };
  autograd::GradcheckResult r = autograd::gradcheck_report(fn, {rn({3}, 2), rn({3}, 3)});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.report.find("numeric"), std::string::npos) << r.report;
  EXPECT_NE(r.report.find("analytic"), std::string::npos) << r.report;
  // the bool form agrees
  EXPECT_FALSE(autograd::gradcheck(fn, {rn({3}, 2), rn({3}, 3)}));
}

TEST(GradcheckNegative, KinkIsCaught) {
  // relu at exactly 0: the central difference sees slope 1/2, autograd takes 0 there.
  autograd::GradcheckResult r = autograd::gradcheck_report([](const TV& in) { return relu(in[0]); }, {zeros({2}, f64)});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.report.find("numeric 0.5"), std::string::npos) << r.report;
}

TEST(GradcheckNegative, ConstantOutputPassesAndNoGradPathFails) {
  // A function that ignores its input passes (both Jacobians are zero)...
  EXPECT_TRUE(autograd::gradcheck_report([](const TV& in) { return zeros({2}, f64) + 1.0; }, {rn({3}, 4)}).ok);
  // ...but one computed with autograd switched off, while still depending on the input, does not.
  autograd::TensorFn fn = [](const TV& in) {
    NoGradGuard g;
    return in[0] * 3.0;
  };
  autograd::GradcheckResult r = autograd::gradcheck_report(fn, {rn({3}, 5)});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.report.find("numeric 3"), std::string::npos) << r.report;
  EXPECT_NE(r.report.find("analytic 0"), std::string::npos) << r.report;
}

}  // namespace
}  // namespace ember
