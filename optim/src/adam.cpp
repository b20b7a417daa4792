// defines: Adam and AdamW — option checks and step(): one fused Backend::adam_step call for all parameters (per
// device), each with its bias corrections computed on the host (llm.c's gpt2_update / adamw.cuh split).
#include "ember/optim/adam.h"

#include <cmath>
#include <string>

#include "backend_steps.h"
#include "ember/core/backend.h"

namespace ember::optim {
namespace {

// `where` names the group ("" for the defaults or a single list).
void check(const char* name, const AdamOptions& o, const std::string& where) {
  EMBER_CHECK_VALUE(std::isfinite(o.lr) && o.lr >= 0, name, ":", where, " invalid learning rate lr = ", o.lr,
                    " (must be >= 0)");
  EMBER_CHECK_VALUE(std::isfinite(o.beta1) && o.beta1 >= 0 && o.beta1 < 1, name, ":", where, " invalid beta1 ", o.beta1,
                    " (must be in [0, 1))");
  EMBER_CHECK_VALUE(std::isfinite(o.beta2) && o.beta2 >= 0 && o.beta2 < 1, name, ":", where, " invalid beta2 ", o.beta2,
                    " (must be in [0, 1))");
  EMBER_CHECK_VALUE(std::isfinite(o.eps) && o.eps >= 0, name, ":", where, " invalid eps ", o.eps, " (must be >= 0)");
  EMBER_CHECK_VALUE(std::isfinite(o.weight_decay) && o.weight_decay >= 0, name, ":", where, " invalid weight_decay ",
                    o.weight_decay, " (must be >= 0)");
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam("Adam", resolve("Adam", {ParamGroup{std::move(params), {}}}, options, true), false) {}

Adam::Adam(const char* name, Resolved r, bool decoupled)
    : Optimizer(name, std::move(r.inits), r.from_list), groups_(std::move(r.groups)), decoupled_(decoupled) {}

Adam::Resolved Adam::resolve(const char* name, std::vector<ParamGroup> groups, const AdamOptions& defaults,
                             bool from_list) {
  check(name, defaults, "");
  Resolved r{.inits = {}, .groups = {}, .from_list = from_list};
  for (size_t g = 0; g < groups.size(); ++g) {
    const AdamGroupOptions& go = groups[g].options;
    const AdamOptions o{.lr = go.lr.value_or(defaults.lr),
                        .beta1 = go.beta1.value_or(defaults.beta1),
                        .beta2 = go.beta2.value_or(defaults.beta2),
                        .eps = go.eps.value_or(defaults.eps),
                        .weight_decay = go.weight_decay.value_or(defaults.weight_decay)};
    check(name, o, detail::str(" param group ", g, ":"));
    r.inits.push_back({.params = std::move(groups[g].params),
                       .lr = o.lr,
                       .layout = {.has_step = true, .buffers = {"exp_avg", "exp_avg_sq"}}});
    r.groups.push_back(o);
  }
  return r;
}

const AdamOptions& Adam::group_options(size_t g) const {
  check_group(g);
  return groups_[g];
}

void Adam::check_momentum(double beta1) const {
  EMBER_CHECK_VALUE(std::isfinite(beta1) && beta1 >= 0 && beta1 < 1, name_, ": invalid beta1 ", beta1,
                    " (must be in [0, 1))");
}

void Adam::step() {
  update_all([&](const std::vector<Update>& updates) {
    std::vector<AdamStepArgs> steps;
    steps.reserve(updates.size());
    for (const Update& u : updates) {
      const AdamOptions& o = groups_[u.group];
      ParamState& s = *u.state;
      if (!s.initialized) s.buffers = {zeros_like_param(u.param), zeros_like_param(u.param)};
      s.initialized = true;
      s.step += 1;
      const double t = static_cast<double>(s.step);
      steps.push_back({.param = u.param,
                       .grad = u.grad,
                       .exp_avg = s.buffers[0],
                       .exp_avg_sq = s.buffers[1],
                       .hyper = {.lr = lrs_[u.group],
                                 .beta1 = o.beta1,
                                 .beta2 = o.beta2,
                                 .eps = o.eps,
                                 .weight_decay = o.weight_decay,
                                 .decoupled = decoupled_,
                                 .bias_correction1 = 1 - std::pow(o.beta1, t),
                                 .bias_correction2 = 1 - std::pow(o.beta2, t)}});
    }
    run_per_device(steps, [](Backend& b, const std::vector<AdamStepArgs>& a) { b.adam_step(a); });
  });
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& o)
    : Adam("AdamW", resolve("AdamW", {ParamGroup{std::move(params), {}}}, to_adam(o), true), true) {}

}  // namespace ember::optim
