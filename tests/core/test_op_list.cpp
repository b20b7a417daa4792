// tests: the op and dtype lists of ember/core/op_list.h and what is generated from them — names, properties,
// and that every listed op runs on the CPU for every dtype it is defined for, with the result dtype its
// properties promise (the CUDA comparison, tests/cuda/test_kernels_vs_cpu.cpp, loops over the same lists).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include <ember/core/backend.h>
#include <ember/core/raw_ops.h>

#include "test_util.h"

namespace ember {
namespace {

template <class List>
void expect_unique_names(const List& list, const char* what) {
  std::set<std::string> seen;
  for (auto v : list) {
    const std::string n = name(v);
    EXPECT_NE(n, "?") << what;
    EXPECT_TRUE(seen.insert(n).second) << what << " name " << n << " appears twice";
  }
}

TEST(OpList, NamesAreUniqueAndKnown) {
  expect_unique_names(kAllDTypes, "dtype");
  expect_unique_names(kAllUnaryOps, "unary op");
  expect_unique_names(kAllBinaryOps, "binary op");
  expect_unique_names(kAllReduceOps, "reduction");
  EXPECT_STREQ(name(UnaryOp::GeluGrad), "gelu_grad");
  EXPECT_STREQ(name(BinaryOp::ReluBackward), "relu_backward");
  EXPECT_STREQ(name(BinaryOp::GeluBackward), "gelu_backward");
  EXPECT_TRUE(is_float_op(BinaryOp::Div) && is_float_op(BinaryOp::GeluBackward) && !is_float_op(BinaryOp::Add));
  EXPECT_STREQ(name(kBFloat16), "bfloat16");
}

TEST(OpList, ItemsizeMatchesTheCppType) {
  for (DType dt : kAllDTypes) {
    const size_t size = visit_dtype(dt, []<class T>() { return sizeof(T); });
    EXPECT_EQ(itemsize(dt), size) << name(dt);
    EXPECT_EQ(visit_dtype(dt, []<class T>() { return dtype_of_v<T>; }), dt) << name(dt);
  }
}

// Every unary op on every dtype: float-only ops turn integer inputs into float32, the others keep the dtype;
// neg of bool is refused with a DTypeError naming the op.
TEST(OpList, EveryUnaryOpRunsWithThePromisedDtype) {
  for (DType dt : kAllDTypes) {
    const Tensor x = tensor<double>({1.0, 2.0, 0.5}, {3}).to(dt);
    for (UnaryOp op : kAllUnaryOps) {
      if (dt == kBool && op == UnaryOp::Neg) {
        EXPECT_THROW(raw::unary(op, x), DTypeError);
        continue;
      }
      const Tensor y = raw::unary(op, x);
      const DType want = is_float_op(op) && !is_floating(dt) ? kFloat32 : dt;
      EXPECT_EQ(y.dtype(), want) << name(op) << " of " << name(dt);
      EXPECT_EQ(y.shape(), x.shape()) << name(op);
    }
  }
}

// Every binary op on every dtype: comparisons give bool; float-only ops (div, gelu_backward) of integers give
// float32; sub and pow of bools are refused.
TEST(OpList, EveryBinaryOpRunsWithThePromisedDtype) {
  for (DType dt : kAllDTypes) {
    const Tensor a = tensor<double>({1.0, 2.0, 3.0}, {3}).to(dt), b = tensor<double>({1.0, 1.0, 2.0}, {3}).to(dt);
    for (BinaryOp op : kAllBinaryOps) {
      if (dt == kBool && (op == BinaryOp::Sub || op == BinaryOp::Pow)) {
        EXPECT_THROW(raw::binary(op, a, b), DTypeError) << name(op);
        continue;
      }
      const Tensor y = raw::binary(op, a, b);
      const DType want = is_comparison(op) ? kBool : (is_float_op(op) && !is_floating(dt) ? kFloat32 : dt);
      EXPECT_EQ(y.dtype(), want) << name(op) << " of " << name(dt);
    }
  }
}

// Every reduction on every dtype: index reductions give int64 positions, sums and products of integers int64.
TEST(OpList, EveryReductionRunsWithThePromisedDtype) {
  for (DType dt : kAllDTypes) {
    const Tensor x = tensor<double>({1.0, 3.0, 2.0, 0.0, 5.0, 4.0}, {2, 3}).to(dt);
    for (ReduceOp op : kAllReduceOps) {
      const Tensor y = raw::reduce(op, x, {1}, false, name(op));
      const bool sum_like = op == ReduceOp::Sum || op == ReduceOp::Prod;
      const DType want = is_index_reduction(op) ? kInt64 : (sum_like && !is_floating(dt) ? kInt64 : dt);
      EXPECT_EQ(y.dtype(), want) << name(op) << " of " << name(dt);
      EXPECT_EQ(y.shape(), Shape({2})) << name(op);
    }
  }
  EXPECT_EQ(raw::reduce(ReduceOp::ArgMax, tensor<float>({1, 3, 2, 0, 5, 4}, {2, 3}), {1}, false, "argmax")
                .to_vector<int64_t>(),
            (std::vector<int64_t>{1, 1}));
}

}  // namespace
}  // namespace ember
