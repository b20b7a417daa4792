// defines: autograd::Function, for ops whose gradient you write yourself (a fused kernel, a numerically better
// formula, a straight-through estimator) — the C++ form of torch.autograd.Function. Derive F from Function<F>
// and give it two static functions; call F::apply(args...):
//
//   struct Cube : ember::autograd::Function<Cube> {
//     static ember::Tensor forward(ember::autograd::FunctionCtx& ctx, const ember::Tensor& x) {
//       ctx.save_for_backward({x});
//       return x * x * x;                                  // runs under NoGradGuard: nothing inside is recorded
//     }
//     static std::vector<ember::Tensor> backward(ember::autograd::FunctionCtx& ctx,
//                                                const std::vector<ember::Tensor>& grad_outputs) {
//       ember::Tensor x = ctx.saved()[0];
//       return {grad_outputs[0] * 3 * x * x};             // one gradient per Tensor argument of forward
//     }
//   };
//   ember::Tensor y = Cube::apply(x);
//
// forward takes the ctx and any arguments (the Tensor ones are the inputs that get gradients, in order) and
// returns a Tensor or a std::vector<Tensor>. backward gets one gradient per output (an undefined tensor for an
// output no gradient reached; it is zero) and returns one per Tensor input: undefined means none (an input that
// needs no gradient may get one: it is dropped). Its results are checked against the inputs' shapes, dtypes
// and devices. backward written with ember ops is differentiable itself: autograd::grad(..., {.create_graph =
// true}) goes through it (under create_graph, backward runs with grad mode on). A backward that is not (it calls
// raw kernels, detaches, reads values on the host) declares `static constexpr bool once_differentiable = true;`
// — a create_graph pass then refuses it — and one that forgets is caught when it returns a gradient without a
// graph although its incoming gradient or a saved input has one. Other state for backward: put it in ctx.data
// (values, not tensors: a tensor there could keep its own graph alive), e.g. ctx.data["scale"] = 2.0;
// std::any_cast<double>(ctx.data["scale"]).
#pragma once
#include <any>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "ember/autograd/grad_mode.h"
#include "ember/autograd/node.h"

namespace ember::autograd {

namespace detail {
struct FunctionAccess;
}  // namespace detail

class FunctionCtx {
 public:
  // Tensors backward needs (inputs or outputs): checked for in-place changes when read back.
  void save_for_backward(const std::vector<Tensor>& ts);
  std::vector<Tensor> saved() const;
  // Whether input i (the i-th Tensor argument of forward) requires grad: backward may skip the others.
  bool needs_input_grad(size_t i) const { return i < needs_.size() && needs_[i]; }
  std::map<std::string, std::any> data;

 private:
  friend struct detail::FunctionAccess;
  bool saved_graph_ = false;  // a saved tensor required grad (it then has a graph for double backward)
  template <class F>
  friend struct Function;
  std::vector<SavedTensor> saved_;
  std::vector<bool> needs_;
  const char* name_ = "Function";
};

namespace detail {
struct FunctionAccess {
  static bool saved_graph(const FunctionCtx& c);
  static std::vector<SavedTensor>& saved_tensors(FunctionCtx& c);
};
// The node of a Function call: runs the user's backward and checks what it returned. Output aliases of an
// input get a handle of their own, so recording does not rewrite the input's graph.
std::vector<Tensor> record_function(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor> outputs,
                                    std::shared_ptr<FunctionCtx> ctx,
                                    std::function<Grads(FunctionCtx&, const Grads&)> backward,
                                    bool once_differentiable);
const char* function_name(const std::type_info& t);  // the demangled class name, kept for the process
}  // namespace detail

template <class F>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    auto ctx = std::make_shared<FunctionCtx>();
    ctx->name_ = detail::function_name(typeid(F));
    std::vector<Tensor> inputs;
    (collect(inputs, args), ...);
    for (const Tensor& t : inputs) ctx->needs_.push_back(t.defined() && t.requires_grad());
    using Out = decltype(F::forward(*ctx, std::forward<Args>(args)...));
    static_assert(std::is_same_v<Out, Tensor> || std::is_same_v<Out, std::vector<Tensor>>,
                  "Function: forward must return ember::Tensor or std::vector<ember::Tensor>");
    std::vector<Tensor> outs;
    {
      NoGradGuard no_grad;
      if constexpr (std::is_same_v<Out, Tensor>) {
        outs.push_back(F::forward(*ctx, std::forward<Args>(args)...));
      } else {
        outs = F::forward(*ctx, std::forward<Args>(args)...);
      }
    }
    constexpr bool once = [] {
      if constexpr (requires { F::once_differentiable; }) {
        return static_cast<bool>(F::once_differentiable);
      } else {
        return false;
      }
    }();
    outs = detail::record_function(
        ctx->name_, inputs, std::move(outs), ctx, [](FunctionCtx& c, const Grads& g) { return F::backward(c, g); },
        once);
    if constexpr (std::is_same_v<Out, Tensor>) {
      return outs[0];
    } else {
      return outs;
    }
  }

 private:
  template <class A>
  static void collect(std::vector<Tensor>& inputs, const A& a) {
    if constexpr (std::is_same_v<std::decay_t<A>, Tensor>) inputs.push_back(a);
  }
};

}  // namespace ember::autograd
