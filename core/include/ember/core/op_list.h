// defines: Ember's one list of element types and of elementwise and reduction ops, as X-macros, and what is
// generated from it: the enums DType, UnaryOp, BinaryOp and ReduceOp, their names, and each op's properties.
// Everything that enumerates dtypes or ops (the front-ends in core/src, the CPU kernels in core/cpu, the CUDA
// kernels in cuda/src/kernels, the tests) expands these lists, so an op added here reaches every one of them,
// and an op whose scalar math is missing fails to compile (ember/internal/scalar_math.h).
// Plain C++17 with no other Ember header: nvcc reads it too.
//
//   #define EMBER_X(Name, str, float_only, cost, autocast) case UnaryOp::Name: ...
//   EMBER_UNARY_OPS(EMBER_X)
//   #undef EMBER_X
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

// --- element types: X(Name, "name", itemsize, CPU type, CUDA type). The C++ types are spelled out only where
// a backend expands the list (ember::Half on the CPU, __half in CUDA kernels), never here.
#define EMBER_DTYPES(X) \
  X(kFloat32, "float32", 4, float, float) \
  X(kFloat64, "float64", 8, double, double) \
  X(kFloat16, "float16", 2, ::ember::Half, __half) \
  X(kBFloat16, "bfloat16", 2, ::ember::BFloat16, __nv_bfloat16) \
  X(kInt64, "int64", 8, int64_t, int64_t) \
  X(kInt32, "int32", 4, int32_t, int32_t) \
  X(kUInt8, "uint8", 1, uint8_t, uint8_t) \
  X(kBool, "bool", 1, bool, bool)

// --- unary ops: X(Name, "name", float_only, cost, autocast).
// float_only: defined for floating types only; an integer input computes in float32 (exp of an int64 tensor).
// cost: Cheap or Transcendental (the CPU backend gives the latter threads at smaller sizes).
// autocast: what autocast does to the input of the public op (ember/autograd/op_def.h): Keep its dtype, or Fp32
// (a 16-bit float input computed in float32: the ops that need range, as PyTorch's autocast lists).
// GeluGrad is d gelu(x) / dx, for autograd; GeluTanh is GELU's tanh approximation (PyTorch's approximate="tanh",
// GPT-2's gelu_new) and GeluTanhGrad its derivative.
#define EMBER_UNARY_OPS(X) \
  X(Neg, "neg", false, Cheap, Keep) \
  X(Abs, "abs", false, Cheap, Keep) \
  X(Sqrt, "sqrt", true, Cheap, Keep) \
  X(Exp, "exp", true, Transcendental, Fp32) \
  X(Log, "log", true, Transcendental, Fp32) \
  X(Relu, "relu", false, Cheap, Keep) \
  X(Sigmoid, "sigmoid", true, Transcendental, Keep) \
  X(Tanh, "tanh", true, Transcendental, Keep) \
  X(Gelu, "gelu", true, Transcendental, Keep) \
  X(Sign, "sign", false, Cheap, Keep) \
  X(Square, "square", false, Cheap, Keep) \
  X(Reciprocal, "reciprocal", true, Cheap, Keep) \
  X(GeluGrad, "gelu_grad", true, Transcendental, Keep) \
  X(Softplus, "softplus", true, Transcendental, Fp32) \
  X(Log1p, "log1p", true, Transcendental, Fp32) \
  X(Sin, "sin", true, Transcendental, Keep) \
  X(Cos, "cos", true, Transcendental, Keep) \
  X(Mish, "mish", true, Transcendental, Keep) \
  X(Hardswish, "hardswish", true, Cheap, Keep) \
  X(GeluTanh, "gelu_tanh", true, Transcendental, Keep) \
  X(GeluTanhGrad, "gelu_tanh_grad", true, Transcendental, Keep)

// --- binary ops: X(Name, "name", kind, autocast), autocast as for the unary ops. kind: Arith (result in the
// inputs' type), FloatArith (the same for floating types; integer inputs compute in float32, as true division)
// or Compare (result bool).
// ReluBackward(g, y) is y > 0 ? g : 0, GeluBackward(g, x) is g * gelu'(x) and GeluTanhBackward(g, x) the same for
// GELU's tanh approximation: the backward of relu and both gelus in one pass each, for autograd.
#define EMBER_BINARY_OPS(X) \
  X(Add, "add", Arith, Keep) \
  X(Sub, "sub", Arith, Keep) \
  X(Mul, "mul", Arith, Keep) \
  X(Div, "div", FloatArith, Keep) \
  X(Pow, "pow", Arith, Fp32) \
  X(Maximum, "maximum", Arith, Keep) \
  X(Minimum, "minimum", Arith, Keep) \
  X(ReluBackward, "relu_backward", Arith, Keep) \
  X(GeluBackward, "gelu_backward", FloatArith, Keep) \
  X(GeluTanhBackward, "gelu_tanh_backward", FloatArith, Keep) \
  X(Eq, "eq", Compare, Keep) \
  X(Ne, "ne", Compare, Keep) \
  X(Lt, "lt", Compare, Keep) \
  X(Le, "le", Compare, Keep) \
  X(Gt, "gt", Compare, Keep) \
  X(Ge, "ge", Compare, Keep)

// --- reductions: X(Name, "name", kind). kind: Value (sum, prod, max, min of the values) or Index (argmax,
// argmin: the position of the first extreme along one dim, int64).
#define EMBER_REDUCE_OPS(X) \
  X(Sum, "sum", Value) \
  X(Prod, "prod", Value) \
  X(Max, "max", Value) \
  X(Min, "min", Value) \
  X(ArgMax, "argmax", Index) \
  X(ArgMin, "argmin", Index)

// The properties below are constexpr functions that CUDA kernels call too.
#if defined(__CUDACC__)
#define EMBER_OP_HD __host__ __device__
#else
#define EMBER_OP_HD
#endif

namespace ember {

#define EMBER_X_ENUM(Name, ...) Name,
enum class DType : uint8_t { EMBER_DTYPES(EMBER_X_ENUM) };
enum class UnaryOp : uint8_t { EMBER_UNARY_OPS(EMBER_X_ENUM) };
enum class BinaryOp : uint8_t { EMBER_BINARY_OPS(EMBER_X_ENUM) };
enum class ReduceOp : uint8_t { EMBER_REDUCE_OPS(EMBER_X_ENUM) };
#undef EMBER_X_ENUM

// Every member of each list, in list order (the tests loop over these).
#define EMBER_X_MEMBER(Name, ...) Type::Name,
#define EMBER_ALL(Enum, LIST) \
  [] { \
    using Type = Enum; \
    return std::array{LIST(EMBER_X_MEMBER)}; \
  }()
inline constexpr auto kAllDTypes = EMBER_ALL(DType, EMBER_DTYPES);
inline constexpr auto kAllUnaryOps = EMBER_ALL(UnaryOp, EMBER_UNARY_OPS);
inline constexpr auto kAllBinaryOps = EMBER_ALL(BinaryOp, EMBER_BINARY_OPS);
inline constexpr auto kAllReduceOps = EMBER_ALL(ReduceOp, EMBER_REDUCE_OPS);
#undef EMBER_ALL
#undef EMBER_X_MEMBER

// --- names and properties, one switch each, generated from the lists

EMBER_OP_HD constexpr const char* name(DType d) {
  switch (d) {
#define EMBER_X(Name, str, ...) \
  case DType::Name: \
    return str;
    EMBER_DTYPES(EMBER_X)
#undef EMBER_X
  }
  return "?";
}
EMBER_OP_HD constexpr size_t itemsize(DType d) {
  switch (d) {
#define EMBER_X(Name, str, size, ...) \
  case DType::Name: \
    return size;
    EMBER_DTYPES(EMBER_X)
#undef EMBER_X
  }
  return 0;
}

EMBER_OP_HD constexpr const char* name(UnaryOp op) {
  switch (op) {
#define EMBER_X(Name, str, ...) \
  case UnaryOp::Name: \
    return str;
    EMBER_UNARY_OPS(EMBER_X)
#undef EMBER_X
  }
  return "?";
}
// True for ops defined on floating types only (an integer input computes in float32).
EMBER_OP_HD constexpr bool is_float_op(UnaryOp op) {
  switch (op) {
#define EMBER_X(Name, str, float_only, ...) \
  case UnaryOp::Name: \
    return float_only;
    EMBER_UNARY_OPS(EMBER_X)
#undef EMBER_X
  }
  return false;
}
// True for ops costly per element (exp, tanh, erf...).
EMBER_OP_HD constexpr bool is_transcendental(UnaryOp op) {
  constexpr bool Cheap = false, Transcendental = true;
  switch (op) {
#define EMBER_X(Name, str, float_only, cost, ...) \
  case UnaryOp::Name: \
    return cost;
    EMBER_UNARY_OPS(EMBER_X)
#undef EMBER_X
  }
  return false;
}

EMBER_OP_HD constexpr const char* name(BinaryOp op) {
  switch (op) {
#define EMBER_X(Name, str, kind, ...) \
  case BinaryOp::Name: \
    return str;
    EMBER_BINARY_OPS(EMBER_X)
#undef EMBER_X
  }
  return "?";
}
// The kind column of EMBER_BINARY_OPS.
enum class BinaryKind : uint8_t { Arith, FloatArith, Compare };
EMBER_OP_HD constexpr BinaryKind binary_kind(BinaryOp op) {
  constexpr BinaryKind Arith = BinaryKind::Arith, FloatArith = BinaryKind::FloatArith, Compare = BinaryKind::Compare;
  switch (op) {
#define EMBER_X(Name, str, kind, ...) \
  case BinaryOp::Name: \
    return kind;
    EMBER_BINARY_OPS(EMBER_X)
#undef EMBER_X
  }
  return Arith;
}
// True for the comparisons (their result is bool).
EMBER_OP_HD constexpr bool is_comparison(BinaryOp op) { return binary_kind(op) == BinaryKind::Compare; }
// True for ops defined on floating types only (div, gelu_backward): integer inputs compute in float32.
EMBER_OP_HD constexpr bool is_float_op(BinaryOp op) { return binary_kind(op) == BinaryKind::FloatArith; }

EMBER_OP_HD constexpr const char* name(ReduceOp op) {
  switch (op) {
#define EMBER_X(Name, str, kind, ...) \
  case ReduceOp::Name: \
    return str;
    EMBER_REDUCE_OPS(EMBER_X)
#undef EMBER_X
  }
  return "?";
}
// True for argmax / argmin (the result is an int64 position).
EMBER_OP_HD constexpr bool is_index_reduction(ReduceOp op) {
  constexpr bool Value = false, Index = true;
  switch (op) {
#define EMBER_X(Name, str, kind, ...) \
  case ReduceOp::Name: \
    return kind;
    EMBER_REDUCE_OPS(EMBER_X)
#undef EMBER_X
  }
  return false;
}

}  // namespace ember
