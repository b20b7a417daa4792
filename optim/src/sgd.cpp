// defines: SGD — option checks and step(), one fused Backend::sgd_step call per parameter.
#include "ember/optim/sgd.h"

#include <cmath>

#include "ember/core/backend.h"

namespace ember::optim {
namespace {

const SGDOptions& checked(const SGDOptions& o) {
  EMBER_CHECK_VALUE(std::isfinite(o.momentum) && o.momentum >= 0, "SGD: invalid momentum ", o.momentum,
                    " (must be >= 0)");
  EMBER_CHECK_VALUE(std::isfinite(o.dampening), "SGD: invalid dampening ", o.dampening, " (must be finite)");
  EMBER_CHECK_VALUE(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "SGD: invalid weight_decay ", o.weight_decay,
                    " (must be >= 0)");
  EMBER_CHECK_VALUE(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
                    "SGD: nesterov momentum requires momentum > 0 and dampening == 0, got momentum ", o.momentum,
                    " and dampening ", o.dampening);
  return o;
}

}  // namespace

// With momentum 0 SGD keeps no state, so a momentum_buffer entry in load_state_dict is an error.
SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : Optimizer("SGD", std::move(params), options.lr,
                {.has_step = false,
                 .buffers = checked(options).momentum != 0 ? std::vector<std::string>{"momentum_buffer"}
                                                           : std::vector<std::string>{}}),
      opts_(options) {}

double SGD::momentum() const { return has_momentum() ? opts_.momentum : Optimizer::momentum(); }

// Momentum 0 would leave the momentum buffer stale while the state still holds it.
void SGD::check_momentum(double m) const {
  EMBER_CHECK_VALUE(std::isfinite(m) && m > 0, "SGD: invalid momentum ", m,
                    " (must be > 0 for an SGD built with momentum)");
}

void SGD::step() {
  update_each([&](const Tensor& p, const Tensor& g, ParamState& s) {
    SgdStepArgs a{.param = p,
                  .grad = g,
                  .momentum_buf = {},
                  .hyper = {.lr = lr_,
                            .momentum = opts_.momentum,
                            .dampening = opts_.dampening,
                            .weight_decay = opts_.weight_decay,
                            .nesterov = opts_.nesterov}};
    if (opts_.momentum != 0) {
      a.hyper.first_step = !s.initialized;
      if (!s.initialized) s.buffers = {empty(p.shape(), {.dtype = p.dtype(), .device = p.device()})};  // set to g
      s.initialized = true;
      a.momentum_buf = s.buffers[0];
    }
    backend_for(p.device()).sgd_step(a);
  });
}

}  // namespace ember::optim
