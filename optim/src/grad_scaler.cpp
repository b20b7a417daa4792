// defines: amp::GradScaler (grad_scaler.h). The unscale and inf/NaN check is Backend::amp_unscale, one fused pass
// per device; the scale update is PyTorch's _amp_update_scale_, in float32 as there.
#include "ember/optim/grad_scaler.h"

#include <cmath>
#include <set>
#include <unordered_map>

#include "ember/autograd/grad_mode.h"
#include "ember/autograd/ops.h"
#include "ember/core/backend.h"
#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"

namespace ember::amp {

GradScaler::GradScaler(const GradScalerOptions& o) : opts_(o), scale_(static_cast<float>(o.init_scale)) {
  EMBER_CHECK_VALUE(std::isfinite(o.init_scale) && o.init_scale > 0 && std::isfinite(scale_),
                    "GradScaler: init_scale must be a positive finite float32, got ", o.init_scale);
  EMBER_CHECK_VALUE(std::isfinite(o.growth_factor) && o.growth_factor > 1,
                    "GradScaler: growth_factor must be > 1, got ", o.growth_factor);
  EMBER_CHECK_VALUE(o.backoff_factor > 0 && o.backoff_factor < 1, "GradScaler: backoff_factor must be in (0, 1), got ",
                    o.backoff_factor);
  EMBER_CHECK_VALUE(o.growth_interval > 0, "GradScaler: growth_interval must be positive, got ", o.growth_interval);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!opts_.enabled) return loss;
  EMBER_CHECK(loss.defined(), Error, "GradScaler.scale: the loss is an undefined tensor");
  EMBER_CHECK_DTYPE(is_floating(loss.dtype()), "GradScaler.scale: expected a floating-point loss, got ", loss.dtype(),
                    loss.shape(), " on ", loss.device());
  return loss * Scalar(static_cast<double>(scale_));
}

GradScaler::PerOptimizer& GradScaler::state_of(optim::Optimizer& opt) { return per_opt_[&opt]; }

void GradScaler::unscale_(optim::Optimizer& opt) {
  if (!opts_.enabled) return;
  PerOptimizer& st = state_of(opt);
  EMBER_CHECK(st.stage != Stage::kUnscaled, Error,
              "GradScaler.unscale_: already called on this optimizer since the last update()");
  EMBER_CHECK(st.stage != Stage::kStepped, Error, "GradScaler.unscale_: called after step(); call update() first");
  NoGradGuard no_grad;
  // PyTorch's inverse: the float32 scale's reciprocal in double, rounded to float32.
  const double inv = static_cast<double>(static_cast<float>(1.0 / static_cast<double>(scale_)));
  std::unordered_map<Device, std::vector<Tensor>> by_device;
  std::vector<std::pair<Tensor, Tensor>> write_back;  // (a strided grad, its contiguous copy)
  std::set<const TensorImpl*> seen;                   // a tied parameter listed twice is unscaled once
  for (const Tensor& p : opt.parameters()) {
    const Tensor g = p.grad();
    if (!g.defined() || !seen.insert(g.impl()).second) continue;
    EMBER_CHECK_DTYPE(is_floating(g.dtype()), "GradScaler.unscale_: a gradient of dtype ", g.dtype(), g.shape(), " on ",
                      g.device());
    if (g.is_contiguous()) {
      by_device[g.device()].push_back(g);
    } else if (g.suggest_memory_format() == MemoryFormat::ChannelsLast) {  // unscaled in place, as its NHWC view
      by_device[g.device()].push_back(raw::layout_view(g, MemoryFormat::ChannelsLast));
    } else {
      Tensor c = raw::contiguous(g);
      by_device[g.device()].push_back(c);
      write_back.emplace_back(g, c);
    }
  }
  st.found_inf.clear();
  for (auto& [dev, grads] : by_device) {
    Tensor flag = zeros({}, {.dtype = kFloat32, .device = dev});
    backend_for(dev).amp_unscale(grads, flag, inv);
    st.found_inf.push_back(flag);
  }
  for (auto& [g, c] : write_back) {
    Tensor dst = g;
    raw::copy_(dst, c);
  }
  st.stage = Stage::kUnscaled;
}

bool GradScaler::step(optim::Optimizer& opt) {
  if (!opts_.enabled) {
    opt.step();
    return true;
  }
  PerOptimizer& st = state_of(opt);
  EMBER_CHECK(st.stage != Stage::kStepped, Error, "GradScaler.step: already called since the last update()");
  if (st.stage == Stage::kReady) unscale_(opt);
  st.read = any_set(st.found_inf) ? 1 : 0;  // update() reuses it: one host read per device per iteration
  if (st.read == 0) opt.step();
  st.stage = Stage::kStepped;
  return st.read == 0;
}

bool GradScaler::any_set(const std::vector<Tensor>& flags) {
  bool found = false;
  for (const Tensor& f : flags) found = found || f.to_vector<double>()[0] != 0;
  return found;
}

void GradScaler::update() {
  if (!opts_.enabled) return;
  bool any_check = false, found = false;
  for (const auto& [opt, st] : per_opt_) {
    if (st.found_inf.empty()) continue;
    any_check = true;
    found = found || (st.read >= 0 ? st.read == 1 : any_set(st.found_inf));  // unscale_ without step: read now
  }
  EMBER_CHECK(any_check, Error,
              "GradScaler.update: no inf/NaN checks were recorded since the last update() (call step(opt) or "
              "unscale_(opt) first)");
  if (found) {
    scale_ = static_cast<float>(static_cast<double>(scale_) * opts_.backoff_factor);
    growth_tracker_ = 0;
  } else if (growth_tracker_ + 1 == opts_.growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(scale_) * opts_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;  // a scale that would overflow float32 stays where it is
    growth_tracker_ = 0;
  } else {
    ++growth_tracker_;
  }
  per_opt_.clear();
}

void GradScaler::update(double new_scale) {
  if (!opts_.enabled) return;
  const float s = static_cast<float>(new_scale);
  EMBER_CHECK_VALUE(std::isfinite(s) && s > 0, "GradScaler.update: new_scale must be a positive finite float32, got ",
                    new_scale);
  scale_ = s;
  per_opt_.clear();
}

double GradScaler::get_scale() const { return opts_.enabled ? static_cast<double>(scale_) : 1.0; }

optim::StateDict GradScaler::state_dict() const {
  if (!opts_.enabled) return {};
  auto f64 = [](double v) { return full(Shape{}, v, {.dtype = kFloat64}); };
  return {{"scale", f64(scale_)},
          {"growth_factor", f64(opts_.growth_factor)},
          {"backoff_factor", f64(opts_.backoff_factor)},
          {"growth_interval", f64(static_cast<double>(opts_.growth_interval))},
          {"_growth_tracker", f64(static_cast<double>(growth_tracker_))}};
}

void GradScaler::load_state_dict(const optim::StateDict& sd) {
  if (!opts_.enabled) return;
  EMBER_CHECK(!sd.empty(), Error,
              "GradScaler.load_state_dict: the state dict is empty (was it saved from a disabled GradScaler?)");
  std::map<std::string, double> v;
  for (const auto& [name, t] : sd) {
    EMBER_CHECK(t.defined() && t.numel() == 1 && is_floating(t.dtype()), Error, "GradScaler.load_state_dict: entry '",
                name, "' must be a floating scalar, got ", t.defined() ? detail::str(t.dtype(), t.shape()) : "nothing");
    v[name] = t.to_vector<double>()[0];
  }
  for (const char* key : {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"})
    EMBER_CHECK(v.count(key), Error, "GradScaler.load_state_dict: entry '", key, "' is missing");
  GradScaler check({.init_scale = v["scale"],
                    .growth_factor = v["growth_factor"],
                    .backoff_factor = v["backoff_factor"],
                    .growth_interval = static_cast<int64_t>(v["growth_interval"])});  // validates the values
  EMBER_CHECK_VALUE(v["_growth_tracker"] >= 0 && v["_growth_tracker"] < v["growth_interval"],
                    "GradScaler.load_state_dict: _growth_tracker ", v["_growth_tracker"], " is out of range");
  opts_ = check.opts_;
  opts_.enabled = true;
  scale_ = check.scale_;
  growth_tracker_ = static_cast<int64_t>(v["_growth_tracker"]);
  per_opt_.clear();
}

}  // namespace ember::amp
