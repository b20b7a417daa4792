// defines: raw::argsort, the one sorting primitive (sort and topk in autograd/src/sort.cpp gather their values with
// the indices it gives, so they need no kernel of their own).
#include "op_utils.h"

namespace ember::raw {

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  detail::check_defined("argsort", x, "x");
  const int64_t d = normalize_dim(dim, x.dim(), "argsort");
  if (x.dim() == 0) {  // one element: it is its own order
    Tensor out = detail::new_tensor({}, kInt64, x.device());
    return fill_(out, 0);
  }
  // The backend sorts the rows of a contiguous tensor along its last dim: dim is moved there and the indices are
  // moved back (a transpose is its own inverse). Sorting along the last dim of a contiguous x copies nothing.
  const int64_t last = x.dim() - 1;
  const Tensor rows = d == last ? contiguous(x) : contiguous(transpose(x, d, last));
  Tensor idx = detail::new_tensor(rows.shape(), kInt64, x.device());
  if (idx.numel() > 0) backend_for(x.device()).argsort(idx, rows, descending);
  return d == last ? idx : contiguous(transpose(idx, d, last));
}

}  // namespace ember::raw
