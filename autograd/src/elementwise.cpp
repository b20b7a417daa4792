// defines: the public elementwise ops of ops.h (arithmetic, comparisons, where, activations) on top of
// ember::raw, each recording its backward when an input requires grad.
#include "ember/autograd/op_def.h"
#include "ember/autograd/ops.h"

#include <cmath>
#include <limits>

#include "grad_utils.h"

namespace ember {

namespace {
Tensor zeros_like_grad(const Tensor& g) { return zeros(g.shape(), {.dtype = g.dtype(), .device = g.device()}); }

Tensor binary_op(BinaryOp op, const Tensor& a_in, const Tensor& b_in) {
  OpEntry entry(opdef::of(op));
  const Tensor &a = entry.in(a_in), &b = entry.in(b_in);
  Tensor y = raw::binary(op, a, b);
  if (!entry.needs_grad({&a, &b})) return y;
  InputInfo ia(a), ib(b);
  autograd::Recording rec = entry.record({a, b}, {y});
  switch (op) {
    case BinaryOp::Add:
      std::move(rec).backward([ia, ib](const Grads& g) -> Grads { return {reduce_to(g[0], ia), reduce_to(g[0], ib)}; });
      break;
    case BinaryOp::Sub:
      std::move(rec).backward([ia, ib](const Grads& g) -> Grads {
        return {reduce_to(g[0], ia), ib.wants ? reduce_to(neg(g[0]), ib) : Tensor()};
      });
      break;
    case BinaryOp::Mul:
      std::move(rec).backward(
          [ia, ib, sa = save(ib.wants ? a : Tensor()), sb = save(ia.wants ? b : Tensor())](const Grads& g) -> Grads {
            return {ia.wants ? reduce_to(g[0] * sb.get(), ia) : Tensor(),
                    ib.wants ? reduce_to(g[0] * sa.get(), ib) : Tensor()};
          });
      break;
    case BinaryOp::Div:
      std::move(rec).backward([ia, ib, sb = save(b), sy = save(y)](const Grads& g) -> Grads {
        Tensor ga = g[0] / sb.get();  // d(a/b)/da = 1/b;  d(a/b)/db = -(a/b)/b
        return {ia.wants ? reduce_to(ga, ia) : Tensor(), ib.wants ? reduce_to(-(ga * sy.get()), ib) : Tensor()};
      });
      break;
    case BinaryOp::Pow:
      std::move(rec).backward([ia, ib, sa = save(a), sb = save(b), sy = save(y)](const Grads& g) -> Grads {
        const Tensor av = sa.get(), bv = sb.get();
        Tensor ga, gb;
        if (ia.wants) ga = reduce_to(g[0] * bv * pow(av, bv - 1), ia);
        // d(a^b)/db = a^b log a, taken as 0 where a <= 0 (there the power is not differentiable in b)
        if (ib.wants) gb = reduce_to(where(gt(av, 0), g[0] * sy.get() * log(av), zeros_like_grad(g[0])), ib);
        return {ga, gb};
      });
      break;
    default:  // maximum, minimum: the gradient goes to the larger (smaller) input; ties split it, as PyTorch's
      std::move(rec).backward([ia, ib, sa = save(a), sb = save(b), op](const Grads& g) -> Grads {
        const Tensor av = sa.get(), bv = sb.get();
        Tensor a_wins = (op == BinaryOp::Maximum ? gt(av, bv) : lt(av, bv)).to(g[0].dtype());
        Tensor half_tie = eq(av, bv).to(g[0].dtype()) * 0.5;
        return {ia.wants ? reduce_to(g[0] * (a_wins + half_tie), ia) : Tensor(),
                ib.wants ? reduce_to(g[0] * (1 - a_wins - half_tie), ib) : Tensor()};
      });
      break;
  }
  return y;
}

// tensor op scalar (scalar_first: scalar op tensor)
Tensor scalar_op(BinaryOp op, const Tensor& t_in, Scalar s, bool scalar_first) {
  OpEntry entry(opdef::of(op));
  const Tensor& t = entry.in(t_in);
  Tensor y = scalar_first ? raw::binary(op, s, t) : raw::binary(op, t, s);
  if (!entry.needs_grad({&t})) return y;
  InputInfo it(t);
  const double v = s.value;
  autograd::Recording rec = entry.record({t}, {y});
  switch (op) {
    case BinaryOp::Add:
      std::move(rec).backward([it](const Grads& g) -> Grads { return {reduce_to(g[0], it)}; });
      break;
    case BinaryOp::Sub:
      std::move(rec).backward(
          [it, scalar_first](const Grads& g) -> Grads { return {reduce_to(scalar_first ? neg(g[0]) : g[0], it)}; });
      break;
    case BinaryOp::Mul:
      std::move(rec).backward([it, v](const Grads& g) -> Grads { return {reduce_to(g[0] * v, it)}; });
      break;
    case BinaryOp::Div:
      if (!scalar_first) {
        std::move(rec).backward([it, v](const Grads& g) -> Grads { return {reduce_to(g[0] / v, it)}; });
      } else {  // d(s/t)/dt = -(s/t)/t
        std::move(rec).backward([it, st = save(t), sy = save(y)](const Grads& g) -> Grads {
          return {reduce_to(-(g[0] * sy.get() / st.get()), it)};
        });
      }
      break;
    default:  // pow (maximum/minimum with a scalar are not exposed)
      if (!scalar_first) {
        std::move(rec).backward([it, v, st = save(t)](const Grads& g) -> Grads {
          return {reduce_to(g[0] * v * pow(st.get(), Scalar(v - 1)), it)};
        });
      } else {  // d(s^t)/dt = s^t log s
        std::move(rec).backward(
            [it, v, sy = save(y)](const Grads& g) -> Grads { return {reduce_to(g[0] * sy.get() * std::log(v), it)}; });
      }
      break;
  }
  return y;
}

// Unary ops whose backward is g * f'(x, y), with f' built from the saved input and/or output.
template <class Deriv>
Tensor unary_op(UnaryOp op, const Tensor& x_in, bool keep_x, bool keep_y, Deriv deriv) {
  OpEntry entry(opdef::of(op));
  const Tensor& x = entry.in(x_in);
  Tensor y = raw::unary(op, x);
  if (!entry.needs_grad({&x})) return y;
  InputInfo ix(x);
  entry.record({x}, {y}).backward(
      [ix, deriv, sx = save(keep_x ? x : Tensor()), sy = save(keep_y ? y : Tensor())](const Grads& g) -> Grads {
        return {reduce_to(g[0] * deriv(sx.get(), sy.get()), ix)};
      });
  return y;
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Pow, a, b); }
Tensor pow(const Tensor& a, Scalar e) { return scalar_op(BinaryOp::Pow, a, e, false); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Minimum, a, b); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return scalar_op(BinaryOp::Add, a, b, false); }
Tensor operator-(const Tensor& a, Scalar b) { return scalar_op(BinaryOp::Sub, a, b, false); }
Tensor operator*(const Tensor& a, Scalar b) { return scalar_op(BinaryOp::Mul, a, b, false); }
Tensor operator/(const Tensor& a, Scalar b) { return scalar_op(BinaryOp::Div, a, b, false); }
Tensor operator+(Scalar a, const Tensor& b) { return scalar_op(BinaryOp::Add, b, a, true); }
Tensor operator-(Scalar a, const Tensor& b) { return scalar_op(BinaryOp::Sub, b, a, true); }
Tensor operator*(Scalar a, const Tensor& b) { return scalar_op(BinaryOp::Mul, b, a, true); }
Tensor operator/(Scalar a, const Tensor& b) { return scalar_op(BinaryOp::Div, b, a, true); }
Tensor operator-(const Tensor& x) { return neg(x); }

Tensor eq(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Ge, a, b); }
Tensor eq(const Tensor& a, Scalar b) { return raw::binary(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, Scalar b) { return raw::binary(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, Scalar b) { return raw::binary(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, Scalar b) { return raw::binary(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, Scalar b) { return raw::binary(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, Scalar b) { return raw::binary(BinaryOp::Ge, a, b); }

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
  OpEntry op(opdef::where);
  Tensor y = raw::where(c, a, b);
  if (!op.needs_grad({&a, &b})) return y;
  InputInfo ia(a), ib(b);
  op.record({a, b}, {y}).backward([ia, ib, sc = save(c)](const Grads& g) -> Grads {
    const Tensor cond = sc.get();
    Tensor z = zeros({}, {.dtype = g[0].dtype(), .device = g[0].device()});
    return {ia.wants ? reduce_to(where(cond, g[0], z), ia) : Tensor(),
            ib.wants ? reduce_to(where(cond, z, g[0]), ib) : Tensor()};
  });
  return y;
}

// --- unary: unary_op(kernel, x, keep x?, keep y?, f'(x, y)), defined by op_list.h's row of the kernel
Tensor neg(const Tensor& x) {
  OpEntry op(opdef::of(UnaryOp::Neg));
  Tensor y = raw::unary(UnaryOp::Neg, x);
  if (op.needs_grad({&x})) {
    InputInfo ix(x);
    op.record({x}, {y}).backward([ix](const Grads& g) -> Grads { return {reduce_to(neg(g[0]), ix)}; });
  }
  return y;
}
Tensor abs(const Tensor& x) {
  return unary_op(UnaryOp::Abs, x, true, false, [](const Tensor& xv, const Tensor&) { return sign(xv); });
}
Tensor sqrt(const Tensor& x) {
  return unary_op(UnaryOp::Sqrt, x, false, true, [](const Tensor&, const Tensor& y) { return 0.5 / y; });
}
Tensor exp(const Tensor& x) {
  return unary_op(UnaryOp::Exp, x, false, true, [](const Tensor&, const Tensor& y) { return y; });
}
Tensor log(const Tensor& x) {
  return unary_op(UnaryOp::Log, x, true, false, [](const Tensor& xv, const Tensor&) { return 1 / xv; });
}
Tensor log1p(const Tensor& x) {
  return unary_op(UnaryOp::Log1p, x, true, false, [](const Tensor& xv, const Tensor&) { return 1 / (1 + xv); });
}
Tensor sin(const Tensor& x) {
  return unary_op(UnaryOp::Sin, x, true, false, [](const Tensor& xv, const Tensor&) { return cos(xv); });
}
Tensor cos(const Tensor& x) {
  return unary_op(UnaryOp::Cos, x, true, false, [](const Tensor& xv, const Tensor&) { return neg(sin(xv)); });
}
Tensor square(const Tensor& x) {
  return unary_op(UnaryOp::Square, x, true, false, [](const Tensor& xv, const Tensor&) { return 2 * xv; });
}
Tensor sign(const Tensor& x) {
  return unary_op(UnaryOp::Sign, x, true, false, [](const Tensor& xv, const Tensor&) { return zeros_like(xv); });
}
Tensor relu(const Tensor& x) {
  OpEntry op(opdef::of(UnaryOp::Relu));
  Tensor y = raw::unary(UnaryOp::Relu, x);
  if (!op.needs_grad({&x})) return y;
  // the gradient where y > 0, else 0: one fused pass, or (create_graph) a product with the mask that records
  op.record({x}, {y}).backward([sy = save(y)](const Grads& g) -> Grads {
    if (autograd::create_graph_enabled()) return {g[0] * gt(sy.get(), 0.0).to(g[0].dtype())};
    return {autograd::binary_into_gradient(BinaryOp::ReluBackward, g[0], sy.get())};
  });
  return y;
}
Tensor sigmoid(const Tensor& x) {
  return unary_op(UnaryOp::Sigmoid, x, false, true, [](const Tensor&, const Tensor& y) { return y * (1 - y); });
}
Tensor tanh(const Tensor& x) {
  return unary_op(UnaryOp::Tanh, x, false, true, [](const Tensor&, const Tensor& y) { return 1 - y * y; });
}
namespace {
// gelu'(x) = Phi(x) + x phi(x), whose own derivative is phi(x) (2 - x^2), phi(x) = exp(-x^2 / 2) / sqrt(2 pi):
// differentiable to any order through exp.
Tensor gelu_grad(const Tensor& x) {
  return unary_op(UnaryOp::GeluGrad, x, true, false, [](const Tensor& xv, const Tensor&) {
    const Tensor x2 = square(xv);
    return exp(x2 * -0.5) * (0.3989422804014327 * (2 - x2));
  });
}
// gelu_tanh(x) = x s(w), s = sigmoid, w = 2 sqrt(2/pi) (x + 0.044715 x^3): its derivative s + x s (1 - s) w' is
// the primitive GeluTanhGrad, whose own derivative s (1 - s) (2 w' + x (1 - 2 s) w'^2 + x w'') is composed of
// recorded ops (differentiable to any order).
Tensor gelu_tanh_grad(const Tensor& x) {
  return unary_op(UnaryOp::GeluTanhGrad, x, true, false, [](const Tensor& xv, const Tensor&) {
    constexpr double k = 0.79788456080286535588, c = 0.044715;
    const Tensor x2 = square(xv);
    const Tensor s = sigmoid((xv + x2 * xv * c) * (2 * k));
    const Tensor w1 = (x2 * (3 * c) + 1) * (2 * k), w2 = xv * (12 * k * c);
    return s * (1 - s) * (w1 * 2 + xv * (1 - s * 2) * square(w1) + xv * w2);
  });
}
// Either GELU: g * gelu'(x) in one fused pass (GeluBackward / GeluTanhBackward); in a create_graph pass
// g * gelu_grad(x), a recorded op, so that the gradient is differentiable again.
Tensor gelu_op(bool tanh, const Tensor& x) {
  const UnaryOp fwd = tanh ? UnaryOp::GeluTanh : UnaryOp::Gelu;
  OpEntry op(opdef::of(fwd));
  Tensor y = raw::unary(fwd, x);
  if (!op.needs_grad({&x})) return y;
  op.record({x}, {y}).backward([tanh, sx = save(x)](const Grads& g) -> Grads {
    if (autograd::create_graph_enabled()) return {g[0] * (tanh ? gelu_tanh_grad(sx.get()) : gelu_grad(sx.get()))};
    const BinaryOp back = tanh ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward;
    return {autograd::binary_into_gradient(back, g[0], sx.get())};
  });
  return y;
}
}  // namespace
Tensor gelu(const Tensor& x) { return gelu_op(false, x); }
Tensor gelu(const Tensor& x, const GeluOptions& opts) { return gelu_op(opts.approximate == GeluApproximate::Tanh, x); }
Tensor softplus(const Tensor& x) {  // d/dx = sigmoid(x) (1 above the threshold, as PyTorch)
  return unary_op(UnaryOp::Softplus, x, true, false, [](const Tensor& xv, const Tensor&) {
    const Tensor one = full({}, 1.0, {.dtype = xv.dtype(), .device = xv.device()});
    return where(gt(xv, 20.0), one, sigmoid(xv));
  });
}
// mish' = tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus(x): PyTorch's formula, of recorded ops (so
// differentiable again)
Tensor mish(const Tensor& x) {
  return unary_op(UnaryOp::Mish, x, true, false, [](const Tensor& xv, const Tensor&) {
    const Tensor t = tanh(softplus(xv));
    return t + xv * sigmoid(xv) * (1 - t * t);
  });
}
// hardswish' = 0 below -3, x / 3 + 1/2 up to 3 (both ends included, as PyTorch's), 1 above
Tensor hardswish(const Tensor& x) {
  return unary_op(UnaryOp::Hardswish, x, true, false, [](const Tensor& xv, const Tensor&) {
    const TensorOptions like{.dtype = xv.dtype(), .device = xv.device()};
    return where(lt(xv, -3.0), zeros({}, like), where(le(xv, 3.0), xv / 3.0 + 0.5, full({}, 1.0, like)));
  });
}
// --- composite activations: autograd differentiates them (twice too), both devices run them. Integer and bool
// inputs give float32; float16 / bfloat16 compute in float32 (grad_utils.h, composite_input).
Tensor silu(const Tensor& x_in) {
  OpEntry op(opdef::silu);
  const Tensor x = autograd::composite_input(op.name(), x_in);
  return autograd::composite_result(x * sigmoid(x), x_in);
}
// x * slope where x <= 0: the gradient at 0 is the slope, as PyTorch's
Tensor leaky_relu(const Tensor& x_in, double negative_slope) {
  OpEntry op(opdef::leaky_relu);
  const Tensor x = autograd::composite_input(op.name(), x_in);
  return autograd::composite_result(where(gt(x, 0.0), x, x * negative_slope), x_in);
}
// alpha * (e^x - 1) for x <= 0, with e^x - 1 written as 2t / (1 - t), t = tanh(x / 2): exact near 0 (where
// exp(x) - 1 would cancel) and free of overflow. The branch not taken gets x clamped to <= 0, so that its
// gradient (0 there) never meets an infinity; clamp passes the gradient at 0, which is alpha, as PyTorch's.
Tensor elu(const Tensor& x_in, double alpha) {
  OpEntry op(opdef::elu);
  const Tensor x = autograd::composite_input(op.name(), x_in);
  const Tensor t = tanh(clamp(x, -std::numeric_limits<double>::infinity(), 0.0) * 0.5);
  return autograd::composite_result(where(gt(x, 0.0), x, (2 * t / (1 - t)) * alpha), x_in);
}

namespace {
// clamp and its one-sided forms (a bound of +-inf); the op's own name in its messages and grad_fn.
Tensor clamp_as(const OpDef& def, const Tensor& x, double lo, double hi) {
  OpEntry op(def);
  EMBER_CHECK(x.defined(), Error, def.name, ": argument 'x' is an undefined tensor (an empty handle)");
  EMBER_CHECK_DTYPE(x.dtype() != kBool, def.name, ": not supported for bool tensors");
  Tensor y = raw::clamp(x, lo, hi);
  if (op.needs_grad({&x})) {
    InputInfo ix(x);
    // the gradient passes where x lies inside [lo, hi]
    op.record({x}, {y}).backward([ix, lo, hi, sx = save(x)](const Grads& g) -> Grads {
      const Tensor xv = sx.get();
      return {reduce_to(g[0] * (ge(xv, lo).to(g[0].dtype()) * le(xv, hi).to(g[0].dtype())), ix)};
    });
  }
  return y;
}
}  // namespace

Tensor clamp(const Tensor& x, double lo, double hi) { return clamp_as(opdef::clamp, x, lo, hi); }
Tensor clamp_min(const Tensor& x, double min) {
  return clamp_as(opdef::clamp_min, x, min, std::numeric_limits<double>::infinity());
}
Tensor clamp_max(const Tensor& x, double max) {
  return clamp_as(opdef::clamp_max, x, -std::numeric_limits<double>::infinity(), max);
}

}  // namespace ember
