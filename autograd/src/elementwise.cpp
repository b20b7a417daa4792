// defines: the public elementwise ops of ops.h (arithmetic, comparisons, where, activations) on top of
// ember::raw, each recording its backward when an input requires grad.
#include "ember/autograd/amp.h"
#include "ember/autograd/ops.h"

#include <cmath>
#include <limits>

#include "ember/core/memory_context.h"
#include "grad_utils.h"

namespace ember {

namespace {
Tensor zeros_like_grad(const Tensor& g) { return zeros(g.shape(), {.dtype = g.dtype(), .device = g.device()}); }

Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b) {
  memory::OpScope op_scope(name(op));  // an OutOfMemoryError names the op
  Tensor y = raw::binary(op, a, b);
  if (is_comparison(op) || !needs_grad({&a, &b})) return y;
  InputInfo ia(a), ib(b);
  switch (op) {
    case BinaryOp::Add:
      record("add", {a, b}, {y}, [ia, ib](const Grads& g) -> Grads {
        return {reduce_to(g[0], ia), reduce_to(g[0], ib)};
      });
      break;
    case BinaryOp::Sub:
      record("sub", {a, b}, {y}, [ia, ib](const Grads& g) -> Grads {
        return {reduce_to(g[0], ia), ib.wants ? reduce_to(neg(g[0]), ib) : Tensor()};
      });
      break;
    case BinaryOp::Mul:
      record("mul", {a, b}, {y},
             [ia, ib, sa = save(ib.wants ? a : Tensor()), sb = save(ia.wants ? b : Tensor())](const Grads& g) -> Grads {
               return {ia.wants ? reduce_to(g[0] * sb.get("mul"), ia) : Tensor(),
                       ib.wants ? reduce_to(g[0] * sa.get("mul"), ib) : Tensor()};
             });
      break;
    case BinaryOp::Div:
      record("div", {a, b}, {y}, [ia, ib, sb = save(b), sy = save(y)](const Grads& g) -> Grads {
        const Tensor& bv = sb.get("div");
        Tensor ga = g[0] / bv;  // d(a/b)/da = 1/b;  d(a/b)/db = -(a/b)/b
        return {ia.wants ? reduce_to(ga, ia) : Tensor(), ib.wants ? reduce_to(-(ga * sy.get("div")), ib) : Tensor()};
      });
      break;
    case BinaryOp::Pow:
      record("pow", {a, b}, {y}, [ia, ib, sa = save(a), sb = save(b), sy = save(y)](const Grads& g) -> Grads {
        const Tensor &av = sa.get("pow"), &bv = sb.get("pow");
        Tensor ga, gb;
        if (ia.wants) ga = reduce_to(g[0] * bv * pow(av, bv - 1), ia);
        // d(a^b)/db = a^b log a, taken as 0 where a <= 0 (there the power is not differentiable in b)
        if (ib.wants) gb = reduce_to(where(gt(av, 0), g[0] * sy.get("pow") * log(av), zeros_like_grad(g[0])), ib);
        return {ga, gb};
      });
      break;
    case BinaryOp::Maximum:
    case BinaryOp::Minimum:
      // The gradient goes to the larger (smaller) input; ties split it in half, as PyTorch does.
      record(op == BinaryOp::Maximum ? "maximum" : "minimum", {a, b}, {y},
             [ia, ib, sa = save(a), sb = save(b), op](const Grads& g) -> Grads {
               const Tensor &av = sa.get("maximum"), &bv = sb.get("maximum");
               Tensor a_wins = (op == BinaryOp::Maximum ? gt(av, bv) : lt(av, bv)).to(g[0].dtype());
               Tensor half_tie = eq(av, bv).to(g[0].dtype()) * 0.5;
               return {ia.wants ? reduce_to(g[0] * (a_wins + half_tie), ia) : Tensor(),
                       ib.wants ? reduce_to(g[0] * (1 - a_wins - half_tie), ib) : Tensor()};
             });
      break;
    default:
      break;
  }
  return y;
}

// tensor op scalar (scalar_first: scalar op tensor)
Tensor scalar_op(BinaryOp op, const Tensor& t, Scalar s, bool scalar_first) {
  memory::OpScope op_scope(name(op));  // an OutOfMemoryError names the op
  Tensor y = scalar_first ? raw::binary(op, s, t) : raw::binary(op, t, s);
  if (is_comparison(op) || !needs_grad({&t})) return y;
  InputInfo it(t);
  const double v = s.value;
  switch (op) {
    case BinaryOp::Add:
      record("add", {t}, {y}, [it](const Grads& g) -> Grads { return {reduce_to(g[0], it)}; });
      break;
    case BinaryOp::Sub:
      record("sub", {t}, {y},
             [it, scalar_first](const Grads& g) -> Grads { return {reduce_to(scalar_first ? neg(g[0]) : g[0], it)}; });
      break;
    case BinaryOp::Mul:
      record("mul", {t}, {y}, [it, v](const Grads& g) -> Grads { return {reduce_to(g[0] * v, it)}; });
      break;
    case BinaryOp::Div:
      if (!scalar_first) {
        record("div", {t}, {y}, [it, v](const Grads& g) -> Grads { return {reduce_to(g[0] / v, it)}; });
      } else {  // d(s/t)/dt = -(s/t)/t
        record("div", {t}, {y}, [it, st = save(t), sy = save(y)](const Grads& g) -> Grads {
          return {reduce_to(-(g[0] * sy.get("div") / st.get("div")), it)};
        });
      }
      break;
    case BinaryOp::Pow:
      if (!scalar_first) {
        record("pow", {t}, {y}, [it, v, st = save(t)](const Grads& g) -> Grads {
          return {reduce_to(g[0] * v * pow(st.get("pow"), Scalar(v - 1)), it)};
        });
      } else {  // d(s^t)/dt = s^t log s
        record("pow", {t}, {y}, [it, v, sy = save(y)](const Grads& g) -> Grads {
          return {reduce_to(g[0] * sy.get("pow") * std::log(v), it)};
        });
      }
      break;
    default: {  // maximum/minimum with a scalar are not exposed
      throw InternalError("scalar_op: unexpected op");
    }
  }
  return y;
}

// Unary ops whose backward is g * f'(x, y), with f' built from the saved input and/or output.
template <class Deriv>
Tensor unary_op(UnaryOp op, const char* name, const Tensor& x, bool keep_x, bool keep_y, Deriv deriv) {
  memory::OpScope op_scope(name);  // an OutOfMemoryError names the op
  Tensor y = raw::unary(op, x);
  if (!needs_grad({&x})) return y;
  InputInfo ix(x);
  record(name, {x}, {y},
         [ix, name, deriv, sx = save(keep_x ? x : Tensor()), sy = save(keep_y ? y : Tensor())](
             const Grads& g) -> Grads { return {reduce_to(g[0] * deriv(sx.get(name), sy.get(name)), ix)}; });
  return y;
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Div, a, b); }
// pow, exp, log, log1p and softplus are autocast "float32" ops (amp.h): 16-bit inputs computed in float32.
Tensor pow(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Pow, amp::fp32(a), amp::fp32(b)); }
Tensor pow(const Tensor& a, Scalar e) { return scalar_op(BinaryOp::Pow, amp::fp32(a), e, false); }
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
  memory::OpScope op_scope("where");  // an OutOfMemoryError names the op
  Tensor y = raw::where(c, a, b);
  if (!needs_grad({&a, &b})) return y;
  InputInfo ia(a), ib(b);
  record("where", {a, b}, {y}, [ia, ib, sc = save(c)](const Grads& g) -> Grads {
    const Tensor& cond = sc.get("where");
    Tensor z = zeros({}, {.dtype = g[0].dtype(), .device = g[0].device()});
    return {ia.wants ? reduce_to(where(cond, g[0], z), ia) : Tensor(),
            ib.wants ? reduce_to(where(cond, z, g[0]), ib) : Tensor()};
  });
  return y;
}

// --- unary
Tensor neg(const Tensor& x) {
  memory::OpScope op_scope("neg");  // an OutOfMemoryError names the op
  Tensor y = raw::unary(UnaryOp::Neg, x);
  if (needs_grad({&x})) {
    InputInfo ix(x);
    record("neg", {x}, {y}, [ix](const Grads& g) -> Grads { return {reduce_to(neg(g[0]), ix)}; });
  }
  return y;
}
Tensor abs(const Tensor& x) {
  return unary_op(UnaryOp::Abs, "abs", x, true, false, [](const Tensor& xv, const Tensor&) { return sign(xv); });
}
Tensor sqrt(const Tensor& x) {
  return unary_op(UnaryOp::Sqrt, "sqrt", x, false, true, [](const Tensor&, const Tensor& y) { return 0.5 / y; });
}
Tensor exp(const Tensor& x) {
  return unary_op(UnaryOp::Exp, "exp", amp::fp32(x), false, true, [](const Tensor&, const Tensor& y) { return y; });
}
Tensor log(const Tensor& x) {
  return unary_op(UnaryOp::Log, "log", amp::fp32(x), true, false,
                  [](const Tensor& xv, const Tensor&) { return 1 / xv; });
}
Tensor log1p(const Tensor& x) {
  memory::OpScope op_scope("log1p");  // an OutOfMemoryError names the op
  return unary_op(UnaryOp::Log1p, "log1p", amp::fp32(x), true, false,
                  [](const Tensor& xv, const Tensor&) { return 1 / (1 + xv); });
}
Tensor sin(const Tensor& x) {
  return unary_op(UnaryOp::Sin, "sin", x, true, false, [](const Tensor& xv, const Tensor&) { return cos(xv); });
}
Tensor cos(const Tensor& x) {
  return unary_op(UnaryOp::Cos, "cos", x, true, false, [](const Tensor& xv, const Tensor&) { return neg(sin(xv)); });
}
Tensor square(const Tensor& x) {
  return unary_op(UnaryOp::Square, "square", x, true, false, [](const Tensor& xv, const Tensor&) { return 2 * xv; });
}
Tensor sign(const Tensor& x) {
  memory::OpScope op_scope("sign");  // an OutOfMemoryError names the op
  return unary_op(UnaryOp::Sign, "sign", x, true, false,
                  [](const Tensor& xv, const Tensor&) { return zeros_like(xv); });
}
Tensor relu(const Tensor& x) {
  memory::OpScope op_scope("relu");  // an OutOfMemoryError names the op
  Tensor y = raw::unary(UnaryOp::Relu, x);
  if (!needs_grad({&x})) return y;
  // the gradient where y > 0, else 0: one fused pass, or (create_graph) a product with the mask that records
  record("relu", {x}, {y}, [sy = save(y)](const Grads& g) -> Grads {
    if (autograd::create_graph_enabled()) return {g[0] * gt(sy.get("relu"), 0.0).to(g[0].dtype())};
    return {raw::binary(BinaryOp::ReluBackward, g[0], sy.get("relu"))};
  });
  return y;
}
Tensor sigmoid(const Tensor& x) {
  memory::OpScope op_scope("sigmoid");  // an OutOfMemoryError names the op
  return unary_op(UnaryOp::Sigmoid, "sigmoid", x, false, true,
                  [](const Tensor&, const Tensor& y) { return y * (1 - y); });
}
Tensor tanh(const Tensor& x) {
  return unary_op(UnaryOp::Tanh, "tanh", x, false, true, [](const Tensor&, const Tensor& y) { return 1 - y * y; });
}
namespace {
Tensor gelu_grad(const Tensor& x);
}  // namespace
Tensor gelu(const Tensor& x) {
  memory::OpScope op_scope("gelu");  // an OutOfMemoryError names the op
  Tensor y = raw::unary(UnaryOp::Gelu, x);
  if (!needs_grad({&x})) return y;
  // g * gelu'(x) in one fused pass; in a create_graph pass g * gelu_grad(x), a recorded op (gelu_grad below)
  record("gelu", {x}, {y}, [sx = save(x)](const Grads& g) -> Grads {
    if (autograd::create_graph_enabled()) return {g[0] * gelu_grad(sx.get("gelu"))};
    return {raw::binary(BinaryOp::GeluBackward, g[0], sx.get("gelu"))};
  });
  return y;
}
namespace {
// gelu'(x) = Phi(x) + x phi(x), whose own derivative is phi(x) (2 - x^2), phi(x) = exp(-x^2 / 2) / sqrt(2 pi):
// differentiable to any order through exp.
Tensor gelu_grad(const Tensor& x) {
  return unary_op(UnaryOp::GeluGrad, "gelu_grad", x, true, false, [](const Tensor& xv, const Tensor&) {
    const Tensor x2 = square(xv);
    return exp(x2 * -0.5) * (0.3989422804014327 * (2 - x2));
  });
}
}  // namespace
Tensor softplus(const Tensor& x) {       // d/dx = sigmoid(x) (1 above the threshold, as PyTorch)
  memory::OpScope op_scope("softplus");  // an OutOfMemoryError names the op
  return unary_op(UnaryOp::Softplus, "softplus", amp::fp32(x), true, false, [](const Tensor& xv, const Tensor&) {
    const Tensor one = full({}, 1.0, {.dtype = xv.dtype(), .device = xv.device()});
    return where(gt(xv, 20.0), one, sigmoid(xv));
  });
}
// --- composite activations: autograd differentiates them (twice too), both devices run them. Integer and bool
// inputs give float32; float16 / bfloat16 compute in float32 (grad_utils.h, composite_input).
Tensor silu(const Tensor& x_in) {
  memory::OpScope op_scope("silu");  // an OutOfMemoryError names the op
  const Tensor x = autograd::composite_input("silu", x_in);
  return autograd::composite_result(x * sigmoid(x), x_in);
}
// x * slope where x <= 0: the gradient at 0 is the slope, as PyTorch's
Tensor leaky_relu(const Tensor& x_in, double negative_slope) {
  memory::OpScope op_scope("leaky_relu");  // an OutOfMemoryError names the op
  const Tensor x = autograd::composite_input("leaky_relu", x_in);
  return autograd::composite_result(where(gt(x, 0.0), x, x * negative_slope), x_in);
}
// alpha * (e^x - 1) for x <= 0, with e^x - 1 written as 2t / (1 - t), t = tanh(x / 2): exact near 0 (where
// exp(x) - 1 would cancel) and free of overflow. The branch not taken gets x clamped to <= 0, so that its
// gradient (0 there) never meets an infinity; clamp passes the gradient at 0, which is alpha, as PyTorch's.
Tensor elu(const Tensor& x_in, double alpha) {
  memory::OpScope op_scope("elu");  // an OutOfMemoryError names the op
  const Tensor x = autograd::composite_input("elu", x_in);
  const Tensor t = tanh(clamp(x, -std::numeric_limits<double>::infinity(), 0.0) * 0.5);
  return autograd::composite_result(where(gt(x, 0.0), x, (2 * t / (1 - t)) * alpha), x_in);
}

Tensor clamp(const Tensor& x, double lo, double hi) {
  memory::OpScope op_scope("clamp");  // an OutOfMemoryError names the op
  Tensor y = raw::clamp(x, lo, hi);
  if (needs_grad({&x})) {
    InputInfo ix(x);
    // the gradient passes where x lies inside [lo, hi]
    record("clamp", {x}, {y}, [ix, lo, hi, sx = save(x)](const Grads& g) -> Grads {
      const Tensor& xv = sx.get("clamp");
      return {reduce_to(g[0] * (ge(xv, lo).to(g[0].dtype()) * le(xv, hi).to(g[0].dtype())), ix)};
    });
  }
  return y;
}

}  // namespace ember
