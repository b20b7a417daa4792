// defines: the Optimizer base — parameter checks, moves (which carry the schedulers' anchor along), zero_grad,
// set_lr and set_momentum, the per-parameter update loop shared by SGD and Adam, and state_dict / load_state_dict.
#include "ember/optim/optimizer.h"

#include <cmath>
#include <optional>
#include <unordered_set>

#include "ember/autograd/grad_mode.h"
#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"

namespace ember::optim {
namespace {

Tensor scalar_f64(double v) { return full(Shape{}, v, {.dtype = kFloat64}); }

// "state.12.exp_avg" -> (12, "exp_avg"); nullopt when the name is not of that form.
std::optional<std::pair<size_t, std::string>> parse_state_name(const std::string& name) {
  const std::string prefix = "state.";
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  size_t pos = prefix.size(), end = pos;
  while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
  if (end == pos || end - pos > 18 || end >= name.size() || name[end] != '.') return std::nullopt;
  return std::make_pair(static_cast<size_t>(std::stoull(name.substr(pos, end - pos))), name.substr(end + 1));
}

}  // namespace

Optimizer::Optimizer(const char* name, std::vector<Tensor> params, double lr, StateLayout layout)
    : name_(name), params_(std::move(params)), state_(params_.size()), lr_(0), layout_(std::move(layout)) {
  EMBER_CHECK_VALUE(!params_.empty(), name_, ": got an empty parameter list");
  std::unordered_set<const TensorImpl*> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    EMBER_CHECK_VALUE(p.defined(), name_, ": parameter ", i, " is an undefined tensor");
    EMBER_CHECK_VALUE(p.is_leaf(), name_, ": parameter ", i, " (", p.dtype(), p.shape(), ") was computed by ",
                      p.grad_fn_name(), "; an optimiser updates leaf tensors only (use detach())");
    // a parameter listed twice would be stepped twice per step()
    EMBER_CHECK_VALUE(seen.insert(p.impl()).second, name_, ": parameter ", i, " appears more than once in the list");
  }
  set_lr(lr);
}

Optimizer::~Optimizer() {
  if (anchor_) anchor_->opt = nullptr;  // the schedulers attached to this optimiser now see it gone
}

Optimizer::Optimizer(Optimizer&& o) noexcept
    : name_(o.name_),
      params_(std::move(o.params_)),
      state_(std::move(o.state_)),
      lr_(o.lr_),
      layout_(std::move(o.layout_)),
      initial_lr_(o.initial_lr_),
      momentum_set_(o.momentum_set_),
      anchor_(std::move(o.anchor_)) {
  if (anchor_) anchor_->opt = this;
}

Optimizer& Optimizer::operator=(Optimizer&& o) noexcept {
  if (this == &o) return *this;
  if (anchor_) anchor_->opt = nullptr;  // the optimiser assigned over is gone for its schedulers
  name_ = o.name_;
  params_ = std::move(o.params_);
  state_ = std::move(o.state_);
  lr_ = o.lr_;
  layout_ = std::move(o.layout_);
  initial_lr_ = o.initial_lr_;
  momentum_set_ = o.momentum_set_;
  anchor_ = std::move(o.anchor_);
  if (anchor_) anchor_->opt = this;
  return *this;
}

const std::shared_ptr<Optimizer::Anchor>& Optimizer::anchor() {
  if (!anchor_) anchor_ = std::make_shared<Anchor>(Anchor{this});
  return anchor_;
}

void Optimizer::set_lr(double lr) {
  EMBER_CHECK_VALUE(std::isfinite(lr) && lr >= 0, name_, ": invalid learning rate lr = ", lr, " (must be >= 0)");
  lr_ = lr;
}

// Only SGD can lack a momentum: its state layout (a momentum buffer or none) is fixed at construction.
double Optimizer::momentum() const {
  throw ValueError(detail::str(name_, " has no momentum (an SGD has one only when built with momentum != 0)"));
}

void Optimizer::set_momentum(double momentum) {
  EMBER_CHECK_VALUE(has_momentum(), name_, ": cannot set momentum ", momentum, ": ", name_,
                    " has no momentum (an SGD has one only when built with momentum != 0)");
  check_momentum(momentum);
  write_momentum(momentum);
  momentum_set_ = true;
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_)
    if (p.grad().defined()) p.set_grad({});
}

Tensor Optimizer::zeros_like_param(const Tensor& param) {
  return zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()});
}

void Optimizer::update_each(const std::function<void(const Tensor&, const Tensor&, ParamState&)>& update) {
  NoGradGuard no_grad;  // the update is not part of any graph
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    if (!p.requires_grad()) continue;
    const Tensor grad = p.grad();
    if (!grad.defined()) continue;
    EMBER_CHECK_DTYPE(p.dtype() == kFloat32 || p.dtype() == kFloat64, name_, ": parameter ", i, " has dtype ",
                      p.dtype(), "; the optimisers update float32 and float64 parameters");
    EMBER_CHECK_SHAPE(grad.shape() == p.shape() && grad.dtype() == p.dtype() && grad.device() == p.device(), name_,
                      ": parameter ", i, " is ", p.dtype(), p.shape(), " on ", p.device(), " but its grad is ",
                      grad.dtype(), grad.shape(), " on ", grad.device());
    ParamState& s = state_[i];
    for (Tensor& b : s.buffers) {
      EMBER_CHECK(b.dtype() == p.dtype() && b.shape() == p.shape(), Error, name_, ": parameter ", i, " is now ",
                  p.dtype(), p.shape(), " but its state is ", b.dtype(), b.shape(),
                  "; create the optimiser after converting the model");
      // The state lives with its parameter: a model moved to another device after some steps (model.to)
      // takes its optimiser state along at the next step.
      if (b.device() != p.device()) b = raw::to_device(b, p.device());
    }
    // The fused kernels take contiguous tensors: a strided parameter is updated in a copy, then copied back.
    Tensor pc = raw::contiguous(p);
    const Tensor gc = raw::contiguous(grad);
    update(pc, gc, s);
    if (pc.is_same(p)) p.impl()->bump_version();  // in place: graphs that saved p must see it changed
    else raw::copy_(p, pc);                       // copy_ bumps the version
  }
}

StateDict Optimizer::state_dict() const {
  StateDict sd;
  sd.emplace_back("param_groups.lr", scalar_f64(lr_));
  if (initial_lr_) sd.emplace_back("param_groups.initial_lr", scalar_f64(*initial_lr_));
  if (momentum_set_) sd.emplace_back("param_groups.momentum", scalar_f64(momentum()));
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamState& s = state_[i];
    if (!s.initialized) continue;
    const std::string prefix = "state." + std::to_string(i) + ".";
    if (layout_.has_step) sd.emplace_back(prefix + "step", scalar_f64(static_cast<double>(s.step)));
    for (size_t b = 0; b < layout_.buffers.size(); ++b)
      sd.emplace_back(prefix + layout_.buffers[b], raw::clone(s.buffers[b]));
  }
  return sd;
}

void Optimizer::load_state_dict(const StateDict& sd) {
  const std::string op = std::string(name_) + ".load_state_dict";
  std::optional<double> lr, initial_lr, momentum;
  std::vector<ParamState> next(params_.size());
  std::vector<std::vector<bool>> have(params_.size(), std::vector<bool>(layout_.buffers.size() + 1, false));
  auto expect_scalar = [&](const std::string& name, const Tensor& t) {
    EMBER_CHECK(t.dim() == 0 && t.dtype() == kFloat64, Error, op, ": entry '", name, "' is ", t.dtype(), t.shape(),
                "; expected a 0-dim float64 tensor");
    return t.to_vector<double>()[0];  // works whatever the device
  };
  for (const auto& [name, t] : sd) {
    EMBER_CHECK(t.defined(), Error, op, ": entry '", name, "' is an undefined tensor");
    if (name == "param_groups.lr") {
      EMBER_CHECK(!lr, Error, op, ": entry '", name, "' appears twice");
      lr = expect_scalar(name, t);
      EMBER_CHECK(std::isfinite(*lr) && *lr >= 0, Error, op, ": entry '", name, "' holds an invalid lr ", *lr);
      continue;
    }
    // Absent from dicts saved before schedulers and OneCycleLR recorded them: then the current values stay.
    if (name == "param_groups.initial_lr") {
      EMBER_CHECK(!initial_lr, Error, op, ": entry '", name, "' appears twice");
      initial_lr = expect_scalar(name, t);
      EMBER_CHECK(std::isfinite(*initial_lr) && *initial_lr >= 0, Error, op, ": entry '", name,
                  "' holds an invalid lr ", *initial_lr);
      continue;
    }
    if (name == "param_groups.momentum") {
      EMBER_CHECK(!momentum, Error, op, ": entry '", name, "' appears twice");
      EMBER_CHECK(has_momentum(), Error, op, ": unexpected entry '", name, "' (this ", name_, " has no momentum)");
      momentum = expect_scalar(name, t);
      try {
        check_momentum(*momentum);
      } catch (const ValueError& e) {
        throw Error(detail::str(op, ": entry '", name, "': ", e.what()));
      }
      continue;
    }
    auto parsed = parse_state_name(name);
    size_t field = layout_.buffers.size() + 1;  // 0: step, 1 + b: buffer b
    if (parsed) {
      if (layout_.has_step && parsed->second == "step") field = 0;
      for (size_t b = 0; b < layout_.buffers.size(); ++b)
        if (parsed->second == layout_.buffers[b]) field = 1 + b;
    }
    if (!parsed || field > layout_.buffers.size() || parsed->first >= params_.size()) {
      std::string fields = layout_.has_step ? "step" : "";
      for (const std::string& b : layout_.buffers) fields += (fields.empty() ? "" : ", ") + b;
      throw Error(detail::str(op, ": unexpected entry '", name, "' (", name_,
                              " has entries param_groups.{lr, initial_lr", has_momentum() ? ", momentum" : "",
                              "} and state.<i>.{", fields, "} for parameters i < ", params_.size(), ")"));
    }
    const size_t i = parsed->first;
    EMBER_CHECK(!have[i][field], Error, op, ": entry '", name, "' appears twice");
    have[i][field] = true;
    ParamState& s = next[i];
    s.initialized = true;
    if (field == 0) {
      const double step = expect_scalar(name, t);
      EMBER_CHECK(step >= 0 && step == std::floor(step) && step < 9e15, Error, op, ": entry '", name,
                  "' holds an invalid step count ", step);
      s.step = static_cast<int64_t>(step);
    } else {
      const Tensor& p = params_[i];
      EMBER_CHECK(t.shape() == p.shape() && t.dtype() == p.dtype(), Error, op, ": entry '", name, "' is ", t.dtype(),
                  t.shape(), " but parameter ", i, " is ", p.dtype(), p.shape());
      if (s.buffers.empty()) s.buffers.resize(layout_.buffers.size());
      Tensor buf = empty(p.shape(), {.dtype = p.dtype(), .device = p.device()});  // a copy, on the param's device
      raw::copy_(buf, t);
      s.buffers[field - 1] = buf;
    }
  }
  EMBER_CHECK(lr.has_value(), Error, op, ": entry 'param_groups.lr' is missing");
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!next[i].initialized) continue;
    for (size_t f = 0; f < have[i].size(); ++f) {
      if (f == 0 && !layout_.has_step) continue;
      EMBER_CHECK(have[i][f], Error, op, ": entry 'state.", i, ".", f == 0 ? "step" : layout_.buffers[f - 1],
                  "' is missing (the dict has other state of parameter ", i, ")");
    }
  }
  lr_ = *lr;
  if (initial_lr) initial_lr_ = initial_lr;
  if (momentum) {
    write_momentum(*momentum);
    momentum_set_ = true;
  }
  state_ = std::move(next);
}

}  // namespace ember::optim
