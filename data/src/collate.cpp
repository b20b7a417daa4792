// defines: the default collate's stacking (one field, dicts, lists) and pad_sequence / lengths.
#include "ember/data/collate.h"

#include <algorithm>
#include <cstring>

#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"

namespace ember::data {
namespace detail {

Tensor collate_field(const std::vector<Tensor>& ts, const char* field) {
  size_t defined = 0;
  for (const Tensor& t : ts) defined += t.defined();
  if (defined == 0) return {};
  EMBER_CHECK_VALUE(defined == ts.size(), "DataLoader: cannot collate ", field, ": ", ts.size() - defined, " of ",
                    ts.size(), " examples in the batch have an undefined ", field);
  try {
    return raw::stack(ts, 0);
  } catch (const ShapeError& e) {
    throw ShapeError(ember::detail::str("DataLoader: cannot collate the examples' ", field,
                                        " into a batch (every example's ", field,
                                        " needs the same shape): ", e.what()));
  }
}

TensorDict collate_dicts(const std::vector<TensorDict>& ds) {
  TensorDict out;
  if (ds.empty()) return out;
  for (const auto& [key, t] : ds[0]) {
    std::vector<Tensor> ts;
    ts.reserve(ds.size());
    for (size_t i = 0; i < ds.size(); ++i) {
      auto it = ds[i].find(key);
      EMBER_CHECK_VALUE(it != ds[i].end() && ds[i].size() == ds[0].size(),
                        "DataLoader: cannot collate dict samples: ", "sample ", i, " has ",
                        it == ds[i].end() ? "no key '" + key + "'" : "other keys",
                        " than sample 0 (every sample needs the same keys)");
      ts.push_back(it->second);
    }
    out.emplace(key, collate_field(ts, key.c_str()));
  }
  return out;
}

std::vector<Tensor> collate_lists(const std::vector<std::vector<Tensor>>& ls) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < ls.size(); ++i)
    EMBER_CHECK_VALUE(ls[i].size() == ls[0].size(), "DataLoader: cannot collate list samples: sample ", i, " has ",
                      ls[i].size(), " tensors, sample 0 has ", ls[0].size());
  if (ls.empty()) return out;
  for (size_t j = 0; j < ls[0].size(); ++j) {
    std::vector<Tensor> ts;
    ts.reserve(ls.size());
    for (size_t i = 0; i < ls.size(); ++i) ts.push_back(ls[i][j]);
    const std::string field = "element " + std::to_string(j);
    out.push_back(collate_field(ts, field.c_str()));
  }
  return out;
}

}  // namespace detail

Tensor pad_sequence(const std::vector<Tensor>& seqs, double pad) {
  EMBER_CHECK_VALUE(!seqs.empty(), "pad_sequence: no sequences");
  int64_t longest = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Tensor& s = seqs[i];
    EMBER_CHECK_SHAPE(s.defined() && s.dim() >= 1, "pad_sequence: sequence ", i, " must be a tensor of at least 1 dim");
    EMBER_CHECK_SHAPE(s.dim() == seqs[0].dim() && s.dtype() == seqs[0].dtype() && s.device() == seqs[0].device(),
                      "pad_sequence: sequence ", i, " (", s.shape(), ", ", s.dtype(), ", ", s.device(),
                      ") differs from sequence 0 (", seqs[0].shape(), ", ", seqs[0].dtype(), ", ", seqs[0].device(),
                      ") in rank, dtype or device");
    for (int64_t d = 1; d < s.dim(); ++d)
      EMBER_CHECK_SHAPE(s.size(d) == seqs[0].size(d), "pad_sequence: sequence ", i, " has shape ", s.shape(),
                        ", sequence 0 ", seqs[0].shape(), ": only dim 0 may differ");
    longest = std::max(longest, s.size(0));
  }
  Shape shape = seqs[0].shape();
  shape[0] = longest;
  shape.insert(0, static_cast<int64_t>(seqs.size()));
  Tensor out = full(shape, pad, {.dtype = seqs[0].dtype(), .device = seqs[0].device()});
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (seqs[i].size(0) == 0) continue;
    Tensor dst = raw::slice(raw::select(out, 0, static_cast<int64_t>(i)), 0, 0, seqs[i].size(0));
    raw::copy_(dst, seqs[i]);
  }
  return out;
}

Tensor lengths(const std::vector<Tensor>& seqs) {
  std::vector<int64_t> n;
  n.reserve(seqs.size());
  for (const Tensor& s : seqs) n.push_back(s.defined() && s.dim() >= 1 ? s.size(0) : 0);
  return tensor(n);
}

}  // namespace ember::data
