// defines: gradcheck and gradcheck_report.
#include "ember/autograd/gradcheck.h"

#include <cmath>
#include <iostream>
#include <sstream>

#include "ember/autograd/engine.h"
#include "ember/autograd/grad_mode.h"
#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"

namespace ember::autograd {
namespace {

// A float64 copy of t with the same sizes and strides (in fresh storage), so that a non-contiguous input
// stays non-contiguous.
Tensor float64_like_layout(const Tensor& t) {
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 0) span += (t.size(d) - 1) * std::llabs(t.stride(d));
  bool nonneg = true;
  for (int64_t d = 0; d < t.dim(); ++d) nonneg = nonneg && t.stride(d) >= 0;
  Tensor out = nonneg && t.numel() > 0 ? raw::as_strided(zeros({span}, {.dtype = kFloat64}), t.shape(), t.strides(), 0)
                                       : zeros(t.shape(), {.dtype = kFloat64});
  raw::copy_(out, t.to(Device::cpu()));
  return out;
}

// Address of the k-th element (row-major logical order) of a CPU float64 tensor.
double* element(const Tensor& t, int64_t k) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (k % t.size(d)) * t.stride(d);
    k /= t.size(d);
  }
  return static_cast<double*>(t.data_ptr()) + off;
}

std::string index_str(const Shape& s, int64_t k) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = k % s[d];
    k /= s[d];
  }
  return detail::str(Shape(idx));
}

}  // namespace

GradcheckResult gradcheck_report(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps, double atol,
                                 double rtol) {
  std::vector<Tensor> xs;
  std::vector<size_t> diff;  // which inputs are differentiated
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (t.defined() && is_floating(t.dtype())) {
      Tensor x = float64_like_layout(t);
      x.requires_grad_(true);
      xs.push_back(x);
      diff.push_back(i);
    } else {
      xs.push_back(t);
    }
  }
  std::vector<Tensor> dx;
  for (size_t i : diff) dx.push_back(xs[i]);

  Tensor out = fn(xs);
  EMBER_CHECK_DTYPE(out.dtype() == kFloat64, "gradcheck: fn must return a float64 tensor for float64 inputs, got ",
                    out.dtype());
  const int64_t nout = out.numel();

  // Analytic Jacobian, one backward per output element: jac[i][k * nout + j] = d out_j / d x_i[k].
  std::vector<std::vector<double>> jac(diff.size());
  for (size_t i = 0; i < diff.size(); ++i) jac[i].assign(static_cast<size_t>(xs[diff[i]].numel() * nout), 0.0);
  for (int64_t j = 0; j < nout; ++j) {
    Tensor go = zeros(out.shape(), {.dtype = kFloat64});
    static_cast<double*>(go.data_ptr())[j] = 1.0;  // go is contiguous: element j is at offset j
    if (!out.requires_grad()) break;               // nothing depends on the inputs: all analytic gradients are zero
    std::vector<Tensor> g = grad({out}, dx, {go}, /*retain_graph=*/true, /*allow_unused=*/true);
    for (size_t i = 0; i < diff.size(); ++i) {
      if (!g[i].defined()) continue;
      std::vector<double> v = g[i].to_vector<double>();
      for (size_t k = 0; k < v.size(); ++k) jac[i][k * static_cast<size_t>(nout) + static_cast<size_t>(j)] = v[k];
    }
  }

  // Numeric Jacobian by central differences, compared as it is built.
  NoGradGuard no_grad;
  GradcheckResult r;
  double worst_excess = -1;
  int64_t failures = 0;
  for (size_t i = 0; i < diff.size(); ++i) {
    const Tensor& x = xs[diff[i]];
    for (int64_t k = 0; k < x.numel(); ++k) {
      double* p = element(x, k);
      const double orig = *p;
      *p = orig + eps;
      std::vector<double> fp = fn(xs).to_vector<double>();
      *p = orig - eps;
      std::vector<double> fm = fn(xs).to_vector<double>();
      *p = orig;
      for (int64_t j = 0; j < nout; ++j) {
        const double num = (fp[static_cast<size_t>(j)] - fm[static_cast<size_t>(j)]) / (2 * eps);
        const double ana = jac[i][static_cast<size_t>(k * nout + j)];
        const double tol = atol + rtol * std::fabs(num);
        const double excess = std::fabs(ana - num) - tol;
        if (!(excess <= 0)) {  // also catches NaN
          ++failures;
          if (!(excess <= worst_excess)) {
            worst_excess = std::isnan(excess) ? INFINITY : excess;
            r.report = detail::str("input ", diff[i], " (shape ", x.shape(), ") element ", index_str(x.shape(), k),
                                   ", output element ", index_str(out.shape(), j), ": numeric ", num, ", analytic ",
                                   ana, " (|difference| ", std::fabs(ana - num), " > tolerance ", tol, ")");
          }
        }
      }
    }
  }
  if (failures) {
    r.ok = false;
    r.report = detail::str("gradcheck failed at ", failures, " Jacobian element(s); worst: ", r.report);
  }
  return r;
}

bool gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
  GradcheckResult r = gradcheck_report(fn, inputs, eps, atol, rtol);
  if (!r.ok) std::cerr << r.report << "\n";
  return r.ok;
}

}  // namespace ember::autograd
