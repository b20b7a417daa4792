// defines: gradcheck — compares the analytic gradients autograd computes with central finite differences
// in float64, element by element — and GradcheckResult for callers that want the report as text.
//
//   bool ok = ember::autograd::gradcheck([](const std::vector<Tensor>& in) { return ember::tanh(in[0]); },
//                                        {ember::randn({3, 4}, {.dtype = ember::kFloat64})});
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::autograd {

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradcheckResult {
  bool ok = true;
  std::string report;  // on failure: the input, the element, the numeric and analytic values
  explicit operator bool() const { return ok; }
};

// Floating inputs are copied to float64 (keeping their strides, so non-contiguous layouts are exercised) and
// differentiated; other inputs (indices) are passed through. Passes when for every element
// |analytic - numeric| <= atol + rtol * |numeric|.
GradcheckResult gradcheck_report(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6,
                                 double atol = 1e-5, double rtol = 1e-3);
// The same, returning a bool and printing the report to stderr on failure.
bool gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6, double atol = 1e-5,
               double rtol = 1e-3);

}  // namespace ember::autograd
