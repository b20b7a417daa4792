// defines: the CPU elementwise kernels — copy (with dtype conversion), fill, unary, clamp, binary, where.
// Each op is a small lambda run by unary_loop/binary_loop, whose contiguous branches the compiler vectorises.
#include <cmath>

#include "cpu_backend.h"
#include "loops.h"
#include "vec_math.h"

namespace ember::cpu {
namespace {

// Arithmetic for every element type: wrapping for signed integers (no UB), plain for the rest (bool's
// arithmetic goes through int and back).
template <class T> T add_of(T a, T b) { if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bool>) return static_cast<T>(a + b); else return Wrap<T>::add(a, b); }
template <class T> T sub_of(T a, T b) { if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bool>) return static_cast<T>(a - b); else return Wrap<T>::sub(a, b); }
template <class T> T mul_of(T a, T b) { if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bool>) return static_cast<T>(a * b); else return Wrap<T>::mul(a, b); }
template <class T> T neg_of(T a) { if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bool>) return static_cast<T>(-a); else return Wrap<T>::neg(a); }

// Expensive per-element functions (exp, tanh, erf) are worth threads sooner.
constexpr int64_t kTranscendentalGrain = 8192;

template <class R, class T, class F>
void unary_loop(const Tensor& out, const Tensor& x, F f, int64_t grain = kElementwiseGrain) {
  ElementwisePlan<2> plan({&out, &x});
  plan.for_each(grain, [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
    if (s[0] == sizeof(R) && s[1] == sizeof(T)) {
      R* o = reinterpret_cast<R*>(p[0]);
      const T* a = reinterpret_cast<const T*>(p[1]);
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<R*>(p[0] + i * s[0]) = f(*reinterpret_cast<const T*>(p[1] + i * s[1]));
    }
  });
}

template <class R, class T, class F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f, int64_t grain = kElementwiseGrain) {
  ElementwisePlan<3> plan({&out, &a, &b});
  plan.for_each(grain, [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
    R* o = reinterpret_cast<R*>(p[0]);
    const T* x = reinterpret_cast<const T*>(p[1]);
    const T* y = reinterpret_cast<const T*>(p[2]);
    constexpr int64_t r = sizeof(R), t = sizeof(T);
    if (s[0] == r && s[1] == t && s[2] == t) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (s[0] == r && s[1] == t && s[2] == 0) {  // tensor op scalar / broadcast row
      const T yv = *y;
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else if (s[0] == r && s[1] == 0 && s[2] == t) {
      const T xv = *x;
      for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<R*>(p[0] + i * s[0]) =
            f(*reinterpret_cast<const T*>(p[1] + i * s[1]), *reinterpret_cast<const T*>(p[2] + i * s[2]));
    }
  });
}

template <class T>
void unary_typed(UnaryOp op, const Tensor& out, const Tensor& x) {
  constexpr int64_t g = kTranscendentalGrain;
  switch (op) {
    case UnaryOp::Neg: return unary_loop<T, T>(out, x, [](T v) { return neg_of(v); });
    case UnaryOp::Abs: return unary_loop<T, T>(out, x, [](T v) { return v < T(0) ? neg_of(v) : v; });
    // written so that NaN passes through, as PyTorch's relu (a NaN must not turn into a silent 0)
    case UnaryOp::Relu: return unary_loop<T, T>(out, x, [](T v) { return v < T(0) ? T(0) : v; });
    case UnaryOp::Sign:
      return unary_loop<T, T>(out, x, [](T v) { return static_cast<T>((T(0) < v) - (v < T(0))); });
    case UnaryOp::Square: return unary_loop<T, T>(out, x, [](T v) { return mul_of(v, v); });
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::Sqrt: return unary_loop<T, T>(out, x, [](T v) { return std::sqrt(v); });
      case UnaryOp::Exp: return unary_loop<T, T>(out, x, [](T v) { return exp_of(v); }, g);
      case UnaryOp::Log: return unary_loop<T, T>(out, x, [](T v) { return std::log(v); }, g);
      case UnaryOp::Reciprocal: return unary_loop<T, T>(out, x, [](T v) { return T(1) / v; });
      case UnaryOp::Sigmoid: return unary_loop<T, T>(out, x, [](T v) { return T(1) / (T(1) + exp_of(-v)); }, g);
      case UnaryOp::Tanh: return unary_loop<T, T>(out, x, [](T v) { return std::tanh(v); }, g);
      case UnaryOp::Gelu:  // exact form, as PyTorch's default: x * Phi(x)
        return unary_loop<T, T>(
            out, x, [](T v) { return static_cast<T>(0.5) * v * (T(1) + std::erf(v * static_cast<T>(M_SQRT1_2))); }, g);
      case UnaryOp::GeluGrad:  // Phi(x) + x * phi(x)
        return unary_loop<T, T>(out, x, [](T v) {
          const T cdf = static_cast<T>(0.5) * (T(1) + std::erf(v * static_cast<T>(M_SQRT1_2)));
          const T pdf = std::exp(static_cast<T>(-0.5) * v * v) * static_cast<T>(0.3989422804014327);  // 1/sqrt(2 pi)
          return cdf + v * pdf;
        }, g);
      default: break;
    }
  }
  throw InternalError(detail::str("cpu unary: ", name(op), " not implemented for ", x.dtype()));
}

template <class T>
void binary_typed(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::Add: return binary_loop<T, T>(out, a, b, [](T x, T y) { return add_of(x, y); });
    case BinaryOp::Sub: return binary_loop<T, T>(out, a, b, [](T x, T y) { return sub_of(x, y); });
    case BinaryOp::Mul: return binary_loop<T, T>(out, a, b, [](T x, T y) { return mul_of(x, y); });
    case BinaryOp::Div:
      if constexpr (std::is_floating_point_v<T>) return binary_loop<T, T>(out, a, b, [](T x, T y) { return x / y; });
      break;  // integer division is promoted to float32 by raw::binary
    case BinaryOp::Pow:
      return binary_loop<T, T>(out, a, b, [](T x, T y) {
        if constexpr (std::is_floating_point_v<T>) {
          return std::pow(x, y);
        } else {  // integer power by squaring; negative exponents give 0 except for bases 1 and -1
          if (y < T(0)) return static_cast<T>(x == T(1) ? 1 : (x == T(-1) ? ((-y) % 2 ? -1 : 1) : 0));
          T r = 1, base = x;
          for (T e = y; e > T(0); e = static_cast<T>(e / 2)) {
            if (e % 2) r = mul_of(r, base);
            base = mul_of(base, base);
          }
          return r;
        }
      });
    // maximum/minimum propagate NaN, as PyTorch's do
    case BinaryOp::Maximum:
      return binary_loop<T, T>(out, a, b, [](T x, T y) {
        if constexpr (std::is_floating_point_v<T>) { if (std::isnan(x) || std::isnan(y)) return x + y; }
        return x > y ? x : y;
      });
    case BinaryOp::Minimum:
      return binary_loop<T, T>(out, a, b, [](T x, T y) {
        if constexpr (std::is_floating_point_v<T>) { if (std::isnan(x) || std::isnan(y)) return x + y; }
        return x < y ? x : y;
      });
    // x: the gradient, y: relu's output (>= 0, or NaN, which gets no gradient, as y > 0 is false)
    case BinaryOp::ReluBackward: return binary_loop<T, T>(out, a, b, [](T x, T y) { return y > T(0) ? x : T(0); });
    case BinaryOp::Eq: return binary_loop<bool, T>(out, a, b, [](T x, T y) { return x == y; });
    case BinaryOp::Ne: return binary_loop<bool, T>(out, a, b, [](T x, T y) { return x != y; });
    case BinaryOp::Lt: return binary_loop<bool, T>(out, a, b, [](T x, T y) { return x < y; });
    case BinaryOp::Le: return binary_loop<bool, T>(out, a, b, [](T x, T y) { return x <= y; });
    case BinaryOp::Gt: return binary_loop<bool, T>(out, a, b, [](T x, T y) { return x > y; });
    case BinaryOp::Ge: return binary_loop<bool, T>(out, a, b, [](T x, T y) { return x >= y; });
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

void CpuBackend::unary(UnaryOp op, const Tensor& out, const Tensor& x) {
  if (is_reduced_float(out.dtype())) {
    Tensor tmp = float_buffer_like(out);
    unary(op, tmp, upcast(x));
    copy(out, tmp);
    return;
  }
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (is_reduced_v<T>) throw InternalError("unreachable");
    else unary_typed<T>(op, out, x);
  });
}

void CpuBackend::clamp(const Tensor& out, const Tensor& x, double lo, double hi) {
  if (is_reduced_float(out.dtype())) {
    Tensor tmp = float_buffer_like(out);
    clamp(tmp, upcast(x), lo, hi);
    copy(out, tmp);
    return;
  }
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (is_reduced_v<T> || std::is_same_v<T, bool>) {
      throw InternalError("unreachable");
    } else {
      // bounds outside T's range saturate (so clamp(int8 tensor, -1e300, 1e300) stays defined)
      const T l = convert<T>(lo), h = convert<T>(hi);
      unary_loop<T, T>(out, x, [l, h](T v) {
        if constexpr (std::is_floating_point_v<T>) { if (std::isnan(v)) return v; }
        return v < l ? l : (v > h ? h : v);
      });
    }
  });
}

void CpuBackend::binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (is_reduced_float(a.dtype())) {
    Tensor tmp = is_comparison(op) ? out : float_buffer_like(out);
    binary(op, tmp, upcast(a), upcast(b));
    if (!is_comparison(op)) copy(out, tmp);
    return;
  }
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

}  // namespace ember::cpu
