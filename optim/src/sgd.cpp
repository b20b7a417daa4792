// defines: SGD — option checks and step(), one fused Backend::sgd_step call for all parameters (per device).
#include "ember/optim/sgd.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend_steps.h"
#include "ember/core/backend.h"

namespace ember::optim {
namespace {

// `where` names the group ("" for the defaults or a single list).
void check(const SGDOptions& o, const std::string& where) {
  EMBER_CHECK_VALUE(std::isfinite(o.lr) && o.lr >= 0, "SGD:", where, " invalid learning rate lr = ", o.lr,
                    " (must be >= 0)");
  EMBER_CHECK_VALUE(std::isfinite(o.momentum) && o.momentum >= 0, "SGD:", where, " invalid momentum ", o.momentum,
                    " (must be >= 0)");
  EMBER_CHECK_VALUE(std::isfinite(o.dampening), "SGD:", where, " invalid dampening ", o.dampening, " (must be finite)");
  EMBER_CHECK_VALUE(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "SGD:", where, " invalid weight_decay ",
                    o.weight_decay, " (must be >= 0)");
  EMBER_CHECK_VALUE(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "SGD:", where,
                    " nesterov momentum requires momentum > 0 and dampening == 0, got momentum ", o.momentum,
                    " and dampening ", o.dampening);
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : SGD(resolve({ParamGroup{std::move(params), {}}}, options, true)) {}

SGD::SGD(Resolved r) : Optimizer("SGD", std::move(r.inits), r.from_list), groups_(std::move(r.groups)) {}

SGD::Resolved SGD::resolve(std::vector<ParamGroup> groups, const SGDOptions& defaults, bool from_list) {
  check(defaults, "");
  Resolved r{.inits = {}, .groups = {}, .from_list = from_list};
  for (size_t g = 0; g < groups.size(); ++g) {
    const SGDGroupOptions& go = groups[g].options;
    const SGDOptions o{.lr = go.lr.value_or(defaults.lr),
                       .momentum = go.momentum.value_or(defaults.momentum),
                       .nesterov = go.nesterov.value_or(defaults.nesterov),
                       .weight_decay = go.weight_decay.value_or(defaults.weight_decay),
                       .dampening = go.dampening.value_or(defaults.dampening)};
    check(o, detail::str(" param group ", g, ":"));
    // With momentum 0 a group keeps no state, so a momentum_buffer entry for its parameters is an error on load.
    r.inits.push_back({.params = std::move(groups[g].params),
                       .lr = o.lr,
                       .layout = {.has_step = false,
                                  .buffers = o.momentum != 0 ? std::vector<std::string>{"momentum_buffer"}
                                                             : std::vector<std::string>{}}});
    r.groups.push_back(o);
  }
  return r;
}

const SGDOptions& SGD::group_options(size_t g) const {
  check_group(g);
  return groups_[g];
}

bool SGD::has_momentum() const {
  return std::all_of(groups_.begin(), groups_.end(), [](const SGDOptions& o) { return o.momentum != 0; });
}

double SGD::group_momentum(size_t g) const {
  check_group(g);
  return has_momentum() ? groups_[g].momentum : Optimizer::group_momentum(g);
}

// Momentum 0 would leave the momentum buffer stale while the state still holds it.
void SGD::check_momentum(double m) const {
  EMBER_CHECK_VALUE(std::isfinite(m) && m > 0, "SGD: invalid momentum ", m,
                    " (must be > 0 for an SGD built with momentum)");
}

void SGD::step() {
  update_all([&](const std::vector<Update>& updates) {
    std::vector<SgdStepArgs> steps;
    steps.reserve(updates.size());
    for (const Update& u : updates) {
      const SGDOptions& o = groups_[u.group];
      ParamState& s = *u.state;
      SgdStepArgs a{.param = u.param,
                    .grad = u.grad,
                    .momentum_buf = {},
                    .hyper = {.lr = lrs_[u.group],
                              .momentum = o.momentum,
                              .dampening = o.dampening,
                              .weight_decay = o.weight_decay,
                              .nesterov = o.nesterov}};
      if (o.momentum != 0) {
        a.hyper.first_step = !s.initialized;
        if (!s.initialized)  // set to g by the first step
          s.buffers = {empty(u.param.shape(), {.dtype = state_dtype(u.param.dtype()), .device = u.param.device()})};
        s.initialized = true;
        a.momentum_buf = s.buffers[0];
      }
      steps.push_back(std::move(a));
    }
    run_per_device(steps, [](Backend& b, const std::vector<SgdStepArgs>& a) { b.sgd_step(a); });
  });
}

}  // namespace ember::optim
