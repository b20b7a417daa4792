// defines: the public sort, argsort and topk of ops.h. The order comes from one primitive, raw::argsort (a backend
// method); the values are gather(x, dim, indices), so autograd differentiates them as a gather: the gradient goes
// back to the positions the values came from.
#include "ember/autograd/ops.h"
#include "grad_utils.h"

namespace ember {

Tensor argsort(const Tensor& x, int64_t dim, bool descending) { return raw::argsort(x, dim, descending); }

SortResult sort(const Tensor& x, int64_t dim, bool descending) {
  OpEntry op(opdef::sort);  // a composite of argsort and gather, named as one op
  autograd::check_defined(opdef::sort.name, x, "x");
  const int64_t d = normalize_dim(dim, x.dim(), opdef::sort.name);
  Tensor indices = raw::argsort(x, d, descending);
  return {gather(x, d, indices), indices};
}

SortResult topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool /*sorted*/) {
  OpEntry op(opdef::topk);  // a composite of argsort and gather, named as one op
  autograd::check_defined(opdef::topk.name, x, "x");
  const int64_t d = normalize_dim(dim, x.dim(), opdef::topk.name);
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  EMBER_CHECK_INDEX(k >= 0 && k <= n, opdef::topk.name, ": k = ", k, " is out of range for dim ", d, " of size ", n,
                    " (input ", x.dtype(), x.shape(), ")");
  // The first k of a stable sort: among equal values the earlier ones win, and a 0-dim x is its own top 1 (and, as
  // in PyTorch, its own top 0).
  Tensor indices = raw::argsort(x, d, largest);
  if (x.dim() > 0) indices = raw::contiguous(raw::slice(indices, d, 0, k));
  return {gather(x, d, indices), indices};
}

}  // namespace ember
