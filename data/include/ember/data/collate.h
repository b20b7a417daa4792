// defines: how a DataLoader turns a list of samples into a batch. DefaultCollate stacks tensors along a new dim 0:
// Example → Batch (x and y stacked), Tensor → Tensor, TensorDict (name → tensor) → TensorDict, std::vector<Tensor>
// → std::vector<Tensor> and std::tuple<Tensor, ...> (incl. std::pair) → the same tuple (element-wise). Any callable
// B(std::vector<S>&&) is a collate for samples of type S — e.g. one that pads variable-length sequences (pad_sequence
// below). for_each_tensor walks the tensors of the batch types above, so the loader can pin them and move them to a
// device; a batch type of your own is delivered as built, on the CPU.
//
//   struct Padded {  // samples: token sequences of different lengths
//     data::TensorDict operator()(std::vector<Tensor>&& seqs) const {
//       return {{"tokens", data::pad_sequence(seqs, 0)}, {"lengths", data::lengths(seqs)}};
//     }
//   };
//   data::DataLoader loader(sequences, {.batch_size = 32}, Padded{});
#pragma once
#include <concepts>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/core/tensor.h"
#include "ember/data/dataset.h"

namespace ember::data {

using TensorDict = std::map<std::string, Tensor>;

// Stacks 1-D (or higher) tensors of different lengths in dim 0 into [n, max_len, ...], filling with `pad`.
Tensor pad_sequence(const std::vector<Tensor>& seqs, double pad = 0);
// The sizes in dim 0 of each tensor, as int64 [n].
Tensor lengths(const std::vector<Tensor>& seqs);

namespace detail {
// Stacks one field of the samples into a batch; all undefined gives undefined. `field` names it in errors.
Tensor collate_field(const std::vector<Tensor>& ts, const char* field);
TensorDict collate_dicts(const std::vector<TensorDict>& ds);
std::vector<Tensor> collate_lists(const std::vector<std::vector<Tensor>>& ls);
}  // namespace detail

struct DefaultCollate {
 private:
  template <size_t K, class Tup>
  static Tensor column(const std::vector<Tup>& samples) {
    std::vector<Tensor> ts;
    ts.reserve(samples.size());
    for (const Tup& t : samples) ts.push_back(std::get<K>(t));
    const std::string field = "element " + std::to_string(K);
    return detail::collate_field(ts, field.c_str());
  }

 public:
  Tensor operator()(std::vector<Tensor>&& ts) const { return detail::collate_field(ts, "sample"); }
  TensorDict operator()(std::vector<TensorDict>&& ds) const { return detail::collate_dicts(ds); }
  std::vector<Tensor> operator()(std::vector<std::vector<Tensor>>&& ls) const { return detail::collate_lists(ls); }
  // Tuples (and pairs) of tensors: element k of the batch stacks element k of every sample.
  template <template <class...> class Tup, class... Ts>
  requires((std::same_as<Ts, Tensor> && ...) &&
           (std::same_as<Tup<Ts...>, std::tuple<Ts...>> || std::same_as<Tup<Ts...>, std::pair<Ts...>>)) Tup<Ts...>
  operator()(std::vector<Tup<Ts...>>&& samples) const {
    return [&]<size_t... K>(std::index_sequence<K...>) { return Tup<Ts...>{column<K>(samples)...}; }
    (std::index_sequence_for<Ts...>{});
  }
  Batch operator()(std::vector<Example>&& es) const {
    std::vector<Tensor> xs, ys;
    xs.reserve(es.size());
    ys.reserve(es.size());
    for (Example& e : es) {
      xs.push_back(std::move(e.x));
      ys.push_back(std::move(e.y));
    }
    return {detail::collate_field(xs, "x"), detail::collate_field(ys, "y")};
  }
};

// Calls f(Tensor&) on each tensor of a batch (undefined ones included; f checks).
template <class F>
void for_each_tensor(Batch& b, F&& f) {
  f(b.x);
  f(b.y);
}
template <class F>
void for_each_tensor(Tensor& t, F&& f) {
  f(t);
}
template <class F>
void for_each_tensor(TensorDict& d, F&& f) {
  for (auto& [k, t] : d) f(t);
}
template <class F>
void for_each_tensor(std::vector<Tensor>& v, F&& f) {
  for (Tensor& t : v) f(t);
}

template <class F, class... Ts>
requires(std::same_as<Ts, Tensor>&&...) void for_each_tensor(std::tuple<Ts...>& t, F&& f) {
  std::apply([&](auto&... ts) { (f(ts), ...); }, t);
}
template <class F>
void for_each_tensor(std::pair<Tensor, Tensor>& p, F&& f) {
  f(p.first);
  f(p.second);
}

// A batch type whose tensors the loader can reach (to pin them and move them to a device).
template <class B>
concept TensorBatch = requires(B& b) {
  for_each_tensor(b, [](Tensor&) {});
};

}  // namespace ember::data
