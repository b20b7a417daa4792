// defines: the CPU elementwise kernels — copy (with dtype conversion), fill, unary, clamp, binary, where.
// Each op's per-element math comes from ember/internal/scalar_math.h (shared with the CUDA kernels), called in
// a small lambda run by unary_loop/binary_loop, whose contiguous branches the compiler vectorises.
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "cpu_backend.h"
#include "gelu_vec.h"
#include "loops.h"
#include "streamed.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {
namespace {

// Expensive per-element functions (exp, tanh, erf) are worth threads sooner.
constexpr int64_t kTranscendentalGrain = 8192;

// Operands past L2's size stream from L3 or memory, where the hardware prefetchers alone left GELU's passes over
// charlm's [4096, 512] activations 10-25% slower (Xeon model 167, one core: gelu 2.08 -> 1.46 ms, its backward
// 2.3 -> 1.9 ms): their contiguous runs go in blocks of kBlock elements, each first asking for the lines kAhead
// elements on (the output's for writing). Smaller operands skip it: in L2 the extra instructions cost up to 10%.
constexpr int64_t kStreamBytes = int64_t{4} << 20, kBlock = 32, kAhead = 512;

// body(i0, i1) over [0, n): at once, or (stream) in blocks that first ask for out's and the inputs' lines kAhead
// elements on (streamed.h).
template <class R, class Body, class... In>
[[gnu::always_inline]] inline void contiguous_run(bool stream, int64_t n, const Body& body, R* out, const In*... in) {
  if (!stream) return body(0, n);
  streamed<kBlock, kAhead>(n, body, out, in...);
}

// f is the op on one element; run (where given) the op on a contiguous run, run(in, out, n), for ops with a
// hand-vectorised form (gelu_vec.h): the strided and broadcast loops keep f.
template <class R, class T, class F, class Run = std::nullptr_t>
void unary_loop(const Tensor& out, const Tensor& x, F f, int64_t grain = kElementwiseGrain, Run run = nullptr) {
  ElementwisePlan<2> plan({&out, &x});
  const bool stream = plan.numel * static_cast<int64_t>(sizeof(R) + sizeof(T)) > kStreamBytes;
  plan.for_each(grain, [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
    if (s[0] == sizeof(R) && s[1] == sizeof(T)) {
      R* o = reinterpret_cast<R*>(p[0]);
      const T* a = reinterpret_cast<const T*>(p[1]);
      contiguous_run(
          stream, n,
          [&](int64_t i0, int64_t i1) {
            if constexpr (std::is_null_pointer_v<Run>) {
              for (int64_t i = i0; i < i1; ++i) o[i] = f(a[i]);
            } else {
              run(a + i0, o + i0, i1 - i0);
            }
          },
          o, a);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<R*>(p[0] + i * s[0]) = f(*reinterpret_cast<const T*>(p[1] + i * s[1]));
    }
  });
}

template <class R, class T, class F, class Run = std::nullptr_t>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f, int64_t grain = kElementwiseGrain,
                 Run run = nullptr) {
  ElementwisePlan<3> plan({&out, &a, &b});
  const bool stream = plan.numel * static_cast<int64_t>(sizeof(R) + 2 * sizeof(T)) > kStreamBytes;
  plan.for_each(grain, [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
    R* o = reinterpret_cast<R*>(p[0]);
    const T* x = reinterpret_cast<const T*>(p[1]);
    const T* y = reinterpret_cast<const T*>(p[2]);
    constexpr int64_t r = sizeof(R), t = sizeof(T);
    if (s[0] == r && s[1] == t && s[2] == t) {
      contiguous_run(
          stream, n,
          [&](int64_t i0, int64_t i1) {
            if constexpr (std::is_null_pointer_v<Run>) {
              for (int64_t i = i0; i < i1; ++i) o[i] = f(x[i], y[i]);
            } else {
              run(x + i0, y + i0, o + i0, i1 - i0);
            }
          },
          o, x, y);
    } else if (s[0] == r && s[1] == t && s[2] == 0) {  // tensor op scalar / broadcast row
      const T yv = *y;
      contiguous_run(
          stream, n,
          [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i) o[i] = f(x[i], yv);
          },
          o, x);
    } else if (s[0] == r && s[1] == 0 && s[2] == t) {
      const T xv = *x;
      contiguous_run(
          stream, n,
          [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i) o[i] = f(xv, y[i]);
          },
          o, y);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<R*>(p[0] + i * s[0]) =
            f(*reinterpret_cast<const T*>(p[1] + i * s[1]), *reinterpret_cast<const T*>(p[2] + i * s[2]));
    }
  });
}

// One loop per op of the list (op_list.h), each calling the op's scalar math (scalar_math.h) on T.
template <class T>
void unary_typed(UnaryOp op, const Tensor& out, const Tensor& x) {
  if constexpr (std::is_same_v<T, float> && kHaveGeluRuns) {
    if (op == UnaryOp::Gelu)
      return unary_loop<float, float>(
          out, x, [](float v) { return scalar::gelu(v); }, kTranscendentalGrain,
          [](const float* a, float* o, int64_t n) { gelu_run(a, o, n); });
    if (op == UnaryOp::GeluGrad)
      return unary_loop<float, float>(
          out, x, [](float v) { return scalar::gelu_grad(v); }, kTranscendentalGrain,
          [](const float* a, float* o, int64_t n) { gelu_grad_run(a, o, n); });
  }
  switch (op) {
#define EMBER_X(Name, ...) \
  case UnaryOp::Name: \
    if constexpr (scalar::kUnaryDefined<UnaryOp::Name, T>) { \
      return unary_loop<T, T>( \
          out, x, [](T v) { return scalar::unary<UnaryOp::Name>(v); }, \
          is_transcendental(UnaryOp::Name) ? kTranscendentalGrain : kElementwiseGrain); \
    } \
    break;
    EMBER_UNARY_OPS(EMBER_X)
#undef EMBER_X
  }
  throw InternalError(detail::str("cpu unary: ", name(op), " not implemented for ", x.dtype()));
}

// float16 / bfloat16 (T: Half or BFloat16): each element widened to float, computed by the float op and rounded once
// — the float32 kernel's value — in one pass, with no float32 copies of the operands or the result (they once were
// made whole: 2-3x the 16-bit tensor's bytes at the peak of every activation, which memory::plan did not see).
template <class T>
void unary_reduced(UnaryOp op, const Tensor& out, const Tensor& x) {
  switch (op) {
#define EMBER_X(Name, ...) \
  case UnaryOp::Name: \
    if constexpr (scalar::kUnaryDefined<UnaryOp::Name, float>) { \
      return unary_loop<T, T>( \
          out, x, [](T v) { return convert<T>(scalar::unary<UnaryOp::Name>(static_cast<float>(v))); }, \
          is_transcendental(UnaryOp::Name) ? kTranscendentalGrain : kElementwiseGrain); \
    } \
    break;
    EMBER_UNARY_OPS(EMBER_X)
#undef EMBER_X
  }
  throw InternalError(detail::str("cpu unary: ", name(op), " not implemented for ", x.dtype()));
}

template <class T>
void binary_reduced(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  switch (op) {
#define EMBER_X(Name, str, kind, ...) \
  case BinaryOp::Name: \
    if constexpr (scalar::kBinaryDefined<BinaryOp::Name, float>) { \
      if constexpr (is_comparison(BinaryOp::Name)) { \
        return binary_loop<bool, T>(out, a, b, [](T x, T y) -> bool { \
          return scalar::binary<BinaryOp::Name>(static_cast<float>(x), static_cast<float>(y)); \
        }); \
      } else { \
        return binary_loop<T, T>(out, a, b, [](T x, T y) -> T { \
          return convert<T>(scalar::binary<BinaryOp::Name>(static_cast<float>(x), static_cast<float>(y))); \
        }); \
      } \
    } \
    break;
    EMBER_BINARY_OPS(EMBER_X)
#undef EMBER_X
  }
  throw InternalError(detail::str("cpu binary: ", name(op), " not implemented for ", a.dtype()));
}

// Calls f.template operator()<T>() with T the CPU type of a 16-bit float dtype.
template <class F>
void visit_reduced(DType d, F&& f) {
  if (d == kBFloat16) f.template operator()<BFloat16>();
  else f.template operator()<Half>();
}

// R: T for arithmetic, bool for comparisons.
template <class T>
void binary_typed(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if constexpr (std::is_same_v<T, float> && kHaveGeluRuns) {
    if (op == BinaryOp::GeluBackward)
      return binary_loop<float, float>(
          out, a, b, [](float g, float v) { return scalar::binary<BinaryOp::GeluBackward>(g, v); }, kElementwiseGrain,
          [](const float* g, const float* v, float* o, int64_t n) { gelu_backward_run(g, v, o, n); });
  }
  switch (op) {
#define EMBER_X(Name, str, kind, ...) \
  case BinaryOp::Name: \
    if constexpr (scalar::kBinaryDefined<BinaryOp::Name, T>) { \
      using R = std::conditional_t<is_comparison(BinaryOp::Name), bool, T>; \
      return binary_loop<R, T>(out, a, b, [](T x, T y) -> R { return scalar::binary<BinaryOp::Name>(x, y); }); \
    } \
    break;
    EMBER_BINARY_OPS(EMBER_X)
#undef EMBER_X
  }
  throw InternalError(detail::str("cpu binary: ", name(op), " not implemented for ", a.dtype()));
}

}  // namespace

void CpuBackend::copy(const Tensor& dst, const Tensor& src, bool /*non_blocking*/) {
  visit_dtype(dst.dtype(), [&]<class D>() {
    visit_dtype(src.dtype(), [&]<class S>() { unary_loop<D, S>(dst, src, [](S v) { return convert<D>(v); }); });
  });
}

void CpuBackend::fill(const Tensor& dst, double v) {
  visit_dtype(dst.dtype(), [&]<class T>() {
    const T value = convert<T>(v);
    ElementwisePlan<1> plan({&dst});
    plan.for_each(kElementwiseGrain, [&](const std::array<char*, 1>& p, const std::array<int64_t, 1>& s, int64_t n) {
      if (s[0] == sizeof(T)) {
        T* o = reinterpret_cast<T*>(p[0]);
        for (int64_t i = 0; i < n; ++i) o[i] = value;
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = value;
      }
    });
  });
}

void CpuBackend::arange(const Tensor& out, double start, double step) {
  visit_dtype(out.dtype(), [&]<class T>() {
    T* o = static_cast<T*>(out.data_ptr());
    parallel_for(0, out.numel(), kElementwiseGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) o[i] = convert<T>(std::fma(static_cast<double>(i), step, start));
    });
  });
}

void CpuBackend::unary(UnaryOp op, const Tensor& out, const Tensor& x) {
  if (is_reduced_float(out.dtype()))
    return visit_reduced(out.dtype(), [&]<class T>() { unary_reduced<T>(op, out, x); });
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (is_reduced_v<T>) throw InternalError("unreachable");
    else unary_typed<T>(op, out, x);
  });
}

void CpuBackend::clamp(const Tensor& out, const Tensor& x, double lo, double hi) {
  if (is_reduced_float(out.dtype())) {  // in float, rounded once (unary_reduced's way)
    const float l = convert<float>(lo), h = convert<float>(hi);
    return visit_reduced(out.dtype(), [&]<class T>() {
      unary_loop<T, T>(out, x, [l, h](T v) { return convert<T>(scalar::clamp(static_cast<float>(v), l, h)); });
    });
  }
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (is_reduced_v<T> || std::is_same_v<T, bool>) {
      throw InternalError("unreachable");
    } else {
      // bounds outside T's range saturate (so clamp(int8 tensor, -1e300, 1e300) stays defined)
      const T l = convert<T>(lo), h = convert<T>(hi);
      unary_loop<T, T>(out, x, [l, h](T v) { return scalar::clamp(v, l, h); });
    }
  });
}

void CpuBackend::binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (is_reduced_float(a.dtype()))
    return visit_reduced(a.dtype(), [&]<class T>() { binary_reduced<T>(op, out, a, b); });
  visit_dtype(a.dtype(), [&]<class T>() {
    if constexpr (is_reduced_v<T>) throw InternalError("unreachable");
    else binary_typed<T>(op, out, a, b);
  });
}

void CpuBackend::where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  visit_dtype(out.dtype(), [&]<class T>() {
    ElementwisePlan<4> plan({&out, &cond, &a, &b});
    plan.for_each(kElementwiseGrain, [&](const std::array<char*, 4>& p, const std::array<int64_t, 4>& s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        bool c = *reinterpret_cast<const bool*>(p[1] + i * s[1]);
        *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const T*>(c ? p[2] + i * s[2] : p[3] + i * s[3]);
      }
    });
  });
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
