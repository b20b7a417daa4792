// defines: the public ops of ops.h on top of ember::raw. Autograd recording (nodes with their backward)
// joins each op here when the autograd engine lands; until then these compute forward values only.
#include "ember/autograd/ops.h"

#include "ember/core/raw_ops.h"

namespace ember {

Tensor add(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Pow, a, b); }
Tensor pow(const Tensor& a, Scalar e) { return raw::binary(BinaryOp::Pow, a, e); }
Tensor maximum(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Minimum, a, b); }
Tensor neg(const Tensor& x) { return raw::unary(UnaryOp::Neg, x); }
Tensor abs(const Tensor& x) { return raw::unary(UnaryOp::Abs, x); }
Tensor sqrt(const Tensor& x) { return raw::unary(UnaryOp::Sqrt, x); }
Tensor exp(const Tensor& x) { return raw::unary(UnaryOp::Exp, x); }
Tensor log(const Tensor& x) { return raw::unary(UnaryOp::Log, x); }
Tensor square(const Tensor& x) { return raw::unary(UnaryOp::Square, x); }
Tensor sign(const Tensor& x) { return raw::unary(UnaryOp::Sign, x); }
Tensor clamp(const Tensor& x, double lo, double hi) { return raw::clamp(x, lo, hi); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return raw::binary(BinaryOp::Add, a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return raw::binary(BinaryOp::Sub, a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return raw::binary(BinaryOp::Mul, a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return raw::binary(BinaryOp::Div, a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return raw::binary(BinaryOp::Add, a, b); }
Tensor operator-(Scalar a, const Tensor& b) { return raw::binary(BinaryOp::Sub, a, b); }
Tensor operator*(Scalar a, const Tensor& b) { return raw::binary(BinaryOp::Mul, a, b); }
Tensor operator/(Scalar a, const Tensor& b) { return raw::binary(BinaryOp::Div, a, b); }
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
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return raw::where(c, a, b); }

Tensor matmul(const Tensor& a, const Tensor& b) { return raw::matmul(a, b); }
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) { return raw::linear(x, w, b); }

Tensor sum(const Tensor& x) { return raw::sum(x); }
Tensor sum(const Tensor& x, const std::vector<int64_t>& d, bool k) { return raw::sum(x, d, k); }
Tensor mean(const Tensor& x) { return raw::mean(x); }
Tensor mean(const Tensor& x, const std::vector<int64_t>& d, bool k) { return raw::mean(x, d, k); }
Tensor max(const Tensor& x) { return raw::max(x); }
Tensor max(const Tensor& x, const std::vector<int64_t>& d, bool k) { return raw::max(x, d, k); }
Tensor min(const Tensor& x) { return raw::min(x); }
Tensor min(const Tensor& x, const std::vector<int64_t>& d, bool k) { return raw::min(x, d, k); }
Tensor var(const Tensor& x) { return raw::var(x); }
Tensor var(const Tensor& x, const std::vector<int64_t>& d, bool k, int64_t c) { return raw::var(x, d, k, c); }
Tensor argmax(const Tensor& x, int64_t d, bool k) { return raw::argmax(x, d, k); }
Tensor argmin(const Tensor& x, int64_t d, bool k) { return raw::argmin(x, d, k); }

Tensor relu(const Tensor& x) { return raw::unary(UnaryOp::Relu, x); }
Tensor sigmoid(const Tensor& x) { return raw::unary(UnaryOp::Sigmoid, x); }
Tensor tanh(const Tensor& x) { return raw::unary(UnaryOp::Tanh, x); }
Tensor gelu(const Tensor& x) { return raw::unary(UnaryOp::Gelu, x); }
Tensor softmax(const Tensor& x, int64_t dim) { return raw::softmax(x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return raw::log_softmax(x, dim); }

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) { return raw::cat(xs, dim); }
Tensor stack(const std::vector<Tensor>& xs, int64_t dim) { return raw::stack(xs, dim); }
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& i) { return raw::index_select(x, dim, i); }

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, std::vector<int64_t> s, std::vector<int64_t> p) {
  return raw::conv2d(x, w, b, std::move(s), std::move(p));
}
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p) {
  return raw::max_pool2d(x, std::move(k), std::move(s), std::move(p));
}
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p) {
  return raw::avg_pool2d(x, std::move(k), std::move(s), std::move(p));
}

}  // namespace ember
