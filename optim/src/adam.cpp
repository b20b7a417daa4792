// defines: Adam and AdamW — option checks and step(), one fused Backend::adam_step call per parameter with
// the bias corrections computed on the host (llm.c's gpt2_update / adamw.cuh split).
#include "ember/optim/adam.h"

#include <cmath>

#include "ember/core/backend.h"

namespace ember::optim {
namespace {

void check_beta1(const char* name, double beta1) {
  EMBER_CHECK_VALUE(std::isfinite(beta1) && beta1 >= 0 && beta1 < 1, name, ": invalid beta1 ", beta1,
                    " (must be in [0, 1))");
}

const AdamOptions& checked(const char* name, const AdamOptions& o) {
  check_beta1(name, o.beta1);
  EMBER_CHECK_VALUE(std::isfinite(o.beta2) && o.beta2 >= 0 && o.beta2 < 1, name, ": invalid beta2 ", o.beta2,
                    " (must be in [0, 1))");
  EMBER_CHECK_VALUE(std::isfinite(o.eps) && o.eps >= 0, name, ": invalid eps ", o.eps, " (must be >= 0)");
  EMBER_CHECK_VALUE(std::isfinite(o.weight_decay) && o.weight_decay >= 0, name, ": invalid weight_decay ",
                    o.weight_decay, " (must be >= 0)");
  return o;
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options) : Adam("Adam", std::move(params), options, false) {}

Adam::Adam(const char* name, std::vector<Tensor> params, const AdamOptions& options, bool decoupled)
    : Optimizer(name, std::move(params), checked(name, options).lr,
                {.has_step = true, .buffers = {"exp_avg", "exp_avg_sq"}}),
      opts_(options),
      decoupled_(decoupled) {}

void Adam::check_momentum(double beta1) const { check_beta1(name_, beta1); }

void Adam::step() {
  update_each([&](const Tensor& p, const Tensor& g, ParamState& s) {
    if (!s.initialized) s.buffers = {zeros_like_param(p), zeros_like_param(p)};
    s.initialized = true;
    s.step += 1;
    const double t = static_cast<double>(s.step);
    backend_for(p.device())
        .adam_step({.param = p,
                    .grad = g,
                    .exp_avg = s.buffers[0],
                    .exp_avg_sq = s.buffers[1],
                    .hyper = {.lr = lr_,
                              .beta1 = opts_.beta1,
                              .beta2 = opts_.beta2,
                              .eps = opts_.eps,
                              .weight_decay = opts_.weight_decay,
                              .decoupled = decoupled_,
                              .bias_correction1 = 1 - std::pow(opts_.beta1, t),
                              .bias_correction2 = 1 - std::pow(opts_.beta2, t)}});
  });
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& o)
    : Adam("AdamW", std::move(params),
           {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay}, true) {}

}  // namespace ember::optim
