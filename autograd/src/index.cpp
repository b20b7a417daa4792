// defines: the public cat, stack and index_select of ops.h, recording their backward when an input requires
// grad.
#include "ember/autograd/ops.h"
#include "grad_utils.h"

namespace ember {

// --- shape
Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  Tensor y = raw::cat(xs, dim);
  if (!needs_grad(xs)) return y;
  const int64_t d = normalize_dim(dim, xs[0].dim(), "cat");
  std::vector<InputInfo> infos;
  for (const Tensor& t : xs) infos.emplace_back(t);
  record("cat", xs, {y}, [infos, d](const Grads& g) -> Grads {
    Grads out;
    int64_t at = 0;
    for (const InputInfo& in : infos) {
      const int64_t n = in.shape[static_cast<size_t>(d)];
      out.push_back(in.wants ? raw::cast(raw::slice(g[0], d, at, at + n), in.dtype) : Tensor());
      at += n;
    }
    return out;
  });
  return y;
}
Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  Tensor y = raw::stack(xs, dim);
  if (!needs_grad(xs)) return y;
  const int64_t d = normalize_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<InputInfo> infos;
  for (const Tensor& t : xs) infos.emplace_back(t);
  record("stack", xs, {y}, [infos, d](const Grads& g) -> Grads {
    Grads out;
    for (size_t i = 0; i < infos.size(); ++i)
      out.push_back(infos[i].wants ? raw::cast(raw::select(g[0], d, static_cast<int64_t>(i)), infos[i].dtype)
                                   : Tensor());
    return out;
  });
  return y;
}
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor y = raw::index_select(x, dim, index);
  if (!needs_grad({&x})) return y;
  InputInfo ix(x);
  record("index_select", {x}, {y}, [ix, dim, si = save(index)](const Grads& g) -> Grads {
    return {raw::index_add_zeros(ix.shape, dim, si.get("index_select"), g[0])};
  });
  return y;
}

}  // namespace ember
