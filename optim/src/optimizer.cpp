// defines: the Optimizer base — parameter and group checks, moves (which carry the schedulers' anchor along),
// zero_grad, the per-group lrs and set_momentum, the per-parameter update loop shared by SGD and Adam, and
// state_dict / load_state_dict.
#include "ember/optim/optimizer.h"

#include "ember/core/memory_context.h"
#include "ember/core/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>

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

Optimizer::Optimizer(const char* name, std::vector<GroupInit> groups, bool from_list) : name_(name) {
  EMBER_CHECK_VALUE(!groups.empty(), name_, ": got an empty list of parameter groups");
  if (from_list) EMBER_CHECK_VALUE(!groups[0].params.empty(), name_, ": got an empty parameter list");
  std::unordered_map<const TensorImpl*, size_t> seen;  // parameter -> its group
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string in_group = from_list ? "" : detail::str(" (param group ", g, ")");
    group_begin_.push_back(params_.size());
    for (Tensor& p : groups[g].params) {
      const size_t i = params_.size();
      EMBER_CHECK_VALUE(p.defined(), name_, ": parameter ", i, in_group, " is an undefined tensor");
      EMBER_CHECK_VALUE(p.is_leaf(), name_, ": parameter ", i, in_group, " (", p.dtype(), p.shape(),
                        ") was computed by ", p.grad_fn_name(),
                        "; an optimiser updates leaf tensors only (use detach())");
      // a parameter listed twice would be stepped twice per step()
      const auto [it, fresh] = seen.emplace(p.impl(), g);
      EMBER_CHECK_VALUE(fresh || from_list || it->second == g, name_, ": parameter ", i, " (", p.dtype(), p.shape(),
                        ") of param group ", g, " is also in param group ", it->second,
                        "; a parameter may be in one group only");
      EMBER_CHECK_VALUE(fresh, name_, ": parameter ", i, in_group, " appears more than once in the list");
      params_.push_back(std::move(p));
    }
    const double lr = groups[g].lr;
    EMBER_CHECK_VALUE(std::isfinite(lr) && lr >= 0, name_, ":", from_list ? "" : detail::str(" param group ", g, ":"),
                      " invalid learning rate lr = ", lr, " (must be >= 0)");
    lrs_.push_back(lr);
    layouts_.push_back(std::move(groups[g].layout));
  }
  group_begin_.push_back(params_.size());
  state_.resize(params_.size());
}

Optimizer::~Optimizer() {
  if (anchor_) anchor_->opt = nullptr;  // the schedulers attached to this optimiser now see it gone
}

Optimizer::Optimizer(Optimizer&& o) noexcept
    : name_(o.name_),
      params_(std::move(o.params_)),
      group_begin_(std::move(o.group_begin_)),
      state_(std::move(o.state_)),
      lrs_(std::move(o.lrs_)),
      layouts_(std::move(o.layouts_)),
      initial_lrs_(std::move(o.initial_lrs_)),
      momentum_set_(o.momentum_set_),
      anchor_(std::move(o.anchor_)) {
  if (anchor_) anchor_->opt = this;
}

Optimizer& Optimizer::operator=(Optimizer&& o) noexcept {
  if (this == &o) return *this;
  if (anchor_) anchor_->opt = nullptr;  // the optimiser assigned over is gone for its schedulers
  name_ = o.name_;
  params_ = std::move(o.params_);
  group_begin_ = std::move(o.group_begin_);
  state_ = std::move(o.state_);
  lrs_ = std::move(o.lrs_);
  layouts_ = std::move(o.layouts_);
  initial_lrs_ = std::move(o.initial_lrs_);
  momentum_set_ = o.momentum_set_;
  anchor_ = std::move(o.anchor_);
  if (anchor_) anchor_->opt = this;
  return *this;
}

const std::shared_ptr<Optimizer::Anchor>& Optimizer::anchor() {
  if (!anchor_) anchor_ = std::make_shared<Anchor>(Anchor{this});
  return anchor_;
}

void Optimizer::check_group(size_t g) const {
  EMBER_CHECK(g < lrs_.size(), IndexError, name_, ": param group ", g, " is out of range (", lrs_.size(),
              " param groups)");
}

double Optimizer::group_lr(size_t g) const {
  check_group(g);
  return lrs_[g];
}

void Optimizer::set_group_lr(size_t g, double lr) {
  check_group(g);
  EMBER_CHECK_VALUE(std::isfinite(lr) && lr >= 0, name_, ": invalid learning rate lr = ", lr, " for param group ", g,
                    " (must be >= 0)");
  lrs_[g] = lr;
}

void Optimizer::set_lr(double lr) {
  EMBER_CHECK_VALUE(std::isfinite(lr) && lr >= 0, name_, ": invalid learning rate lr = ", lr, " (must be >= 0)");
  std::fill(lrs_.begin(), lrs_.end(), lr);
}

void Optimizer::set_lrs(const std::vector<double>& lrs) {
  EMBER_CHECK(lrs.size() == lrs_.size(), Error, name_, ": got ", lrs.size(), " lrs for ", lrs_.size(), " param groups");
  for (size_t g = 0; g < lrs.size(); ++g)
    EMBER_CHECK_VALUE(std::isfinite(lrs[g]) && lrs[g] >= 0, name_, ": invalid learning rate lr = ", lrs[g],
                      " for param group ", g, " (must be >= 0)");
  lrs_ = lrs;
}

std::vector<Tensor> Optimizer::group_parameters(size_t g) const {
  check_group(g);
  return {params_.begin() + static_cast<ptrdiff_t>(group_begin_[g]),
          params_.begin() + static_cast<ptrdiff_t>(group_begin_[g + 1])};
}

std::optional<double> Optimizer::initial_lr() const { return group_initial_lr(0); }

std::optional<double> Optimizer::group_initial_lr(size_t g) const {
  check_group(g);
  if (initial_lrs_.empty()) return std::nullopt;
  return initial_lrs_[g];
}

// Only SGD can lack a momentum: its state layouts (a momentum buffer or none) are fixed at construction.
double Optimizer::group_momentum(size_t) const {
  throw ValueError(
      detail::str(name_, " has no momentum (an SGD has one only when every param group has momentum != 0)"));
}

void Optimizer::set_momentum(double momentum) {
  EMBER_CHECK_VALUE(has_momentum(), name_, ": cannot set momentum ", momentum, ": ", name_,
                    " has no momentum (an SGD has one only when every param group has momentum != 0)");
  check_momentum(momentum);
  for (size_t g = 0; g < lrs_.size(); ++g) write_momentum(g, momentum);
  momentum_set_ = true;
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_)
    if (p.grad().defined()) p.set_grad({});
}

Tensor Optimizer::zeros_like_param(const Tensor& param) {
  return zeros(param.shape(), {.dtype = state_dtype(param.dtype()), .device = param.device()});
}

namespace {
// A parameter as update_all prepared it: where the result goes back to.
struct Prepared {
  Tensor* param;
  Tensor contiguous;  // the contiguous copy (or the parameter itself) that the update writes
  MemoryFormat format;
};
}  // namespace

void Optimizer::update_all(const std::function<void(const std::vector<Update>& updates)>& update) {
  NoGradGuard no_grad;  // the update is not part of any graph
  memory::PhaseScope phase(memory::Phase::kOptimizer);
  std::vector<Update> updates;
  std::vector<Prepared> prepared;
  size_t g = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    while (i >= group_begin_[g + 1]) ++g;  // empty groups are skipped over
    Tensor& p = params_[i];
    if (!p.requires_grad()) continue;
    const Tensor grad = p.grad();
    if (!grad.defined()) continue;
    EMBER_CHECK_DTYPE(is_floating(p.dtype()), name_, ": parameter ", i, " has dtype ", p.dtype(),
                      "; the optimisers update floating-point parameters");
    EMBER_CHECK_SHAPE(grad.shape() == p.shape() && grad.dtype() == p.dtype() && grad.device() == p.device(), name_,
                      ": parameter ", i, " is ", p.dtype(), p.shape(), " on ", p.device(), " but its grad is ",
                      grad.dtype(), grad.shape(), " on ", grad.device());
    for (const Tensor& b : state_[i].buffers)
      EMBER_CHECK(b.dtype() == state_dtype(p.dtype()) && b.shape() == p.shape(), Error, name_, ": parameter ", i,
                  " is now ", p.dtype(), p.shape(), " but its state is ", b.dtype(), b.shape(),
                  "; create the optimiser after converting the model");
  }
  // Every parameter checked before any state moves or any update runs: a bad one changes nothing.
  g = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    while (i >= group_begin_[g + 1]) ++g;
    Tensor& p = params_[i];
    if (!p.requires_grad() || !p.grad().defined()) continue;
    ParamState& s = state_[i];
    // The state lives with its parameter: a model moved to another device after some steps (model.to) takes its
    // optimiser state along at the next step.
    for (Tensor& b : s.buffers)
      if (b.device() != p.device()) b = raw::to_device(b, p.device());
    // The fused kernels take contiguous tensors: a strided parameter is updated in a copy, then copied back. A
    // channels-last one (model.to(MemoryFormat::ChannelsLast)) is updated in place, as its NHWC view, with its
    // gradient and state in its layout too.
    const MemoryFormat f = p.suggest_memory_format();
    for (Tensor& b : s.buffers) b = raw::layout_view(raw::contiguous(b, f), f);
    Tensor pc = raw::contiguous(p, f);
    updates.push_back({g, raw::layout_view(pc, f), raw::layout_view(raw::contiguous(p.grad(), f), f), &s});
    prepared.push_back({&p, std::move(pc), f});
  }
  // The state returns to the parameters' shape (state made by update() is NHWC-shaped too), also when update()
  // throws, so that the next step finds it as the checks above expect.
  auto unview_state = [&] {
    for (size_t k = 0; k < updates.size(); ++k)
      for (Tensor& b : updates[k].state->buffers) b = raw::from_layout_view(b, prepared[k].format);
  };
  try {
    update(updates);
  } catch (...) {
    unview_state();
    throw;
  }
  unview_state();
  for (size_t k = 0; k < updates.size(); ++k) {
    const Prepared& pr = prepared[k];
    for (const Tensor& b : updates[k].state->buffers) memory::tag(b, memory::Category::kOptimizerState);
    if (pr.contiguous.is_same(*pr.param)) pr.param->impl()->bump_version();  // graphs that saved p see it changed
    else raw::copy_(*pr.param, pr.contiguous);                               // copy_ bumps the version
  }
}

// The format from before groups for one group, so that old dicts load and new single-group dicts stay the same.
Tensor Optimizer::per_group_tensor(const std::vector<double>& v) {
  if (v.size() == 1) return scalar_f64(v[0]);
  return tensor(v, Shape{static_cast<int64_t>(v.size())}, {.dtype = kFloat64});
}

std::vector<double> Optimizer::read_per_group(const std::string& op, const std::string& name, const Tensor& t,
                                              size_t num_groups, const std::string& owner) {
  auto groups = [](int64_t n) { return detail::str(n, n == 1 ? " param group" : " param groups"); };
  const int64_t n = t.dim() == 0 ? 1 : t.shape()[0];
  EMBER_CHECK(t.dtype() == kFloat64 && t.dim() <= 1, Error, op, ": entry '", name, "' is ", t.dtype(), t.shape(),
              num_groups == 1 ? "; expected a 0-dim float64 tensor"
                              : "; expected a 1-D float64 tensor (one value per param group)");
  EMBER_CHECK(static_cast<size_t>(n) == num_groups, Error, op, ": entry '", name, "' is for ", groups(n), ", but ",
              owner, " has ", groups(static_cast<int64_t>(num_groups)));
  EMBER_CHECK(num_groups == 1 ? t.dim() == 0 : t.dim() == 1, Error, op, ": entry '", name, "' is ", t.dtype(),
              t.shape(), "; expected a 0-dim float64 tensor");
  return t.to_vector<double>();  // works whatever the device
}

StateDict Optimizer::state_dict() const {
  StateDict sd;
  sd.emplace_back("param_groups.lr", per_group_tensor(lrs_));
  if (!initial_lrs_.empty()) sd.emplace_back("param_groups.initial_lr", per_group_tensor(initial_lrs_));
  if (momentum_set_) {
    std::vector<double> m;
    for (size_t g = 0; g < lrs_.size(); ++g) m.push_back(group_momentum(g));
    sd.emplace_back("param_groups.momentum", per_group_tensor(m));
  }
  size_t g = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    while (i >= group_begin_[g + 1]) ++g;
    const ParamState& s = state_[i];
    if (!s.initialized) continue;
    const StateLayout& layout = layouts_[g];
    const std::string prefix = "state." + std::to_string(i) + ".";
    if (layout.has_step) sd.emplace_back(prefix + "step", scalar_f64(static_cast<double>(s.step)));
    for (size_t b = 0; b < layout.buffers.size(); ++b)
      sd.emplace_back(prefix + layout.buffers[b], raw::clone(s.buffers[b]));
  }
  return sd;
}

// load_state_dict's steps: each entry read into a new state (the param_groups lists, or one parameter's step or
// buffer), an unexpected one refused with what this optimiser has, the parameters' state checked complete, and only
// then everything replaced at once (nothing changes on a throw).
struct Optimizer::StateDictLoad {
  Optimizer& o;
  const std::string op;
  std::vector<size_t> group_of;         // group_of[i]: parameter i's group
  std::vector<ParamState> next;         // the state being read
  std::vector<std::vector<bool>> have;  // have[i][f]: field f (0: step, 1 + b: buffer b) of parameter i was read
  std::optional<std::vector<double>> lrs, initial_lrs, momenta;

  explicit StateDictLoad(Optimizer& opt)
      : o(opt),
        op(std::string(opt.name_) + ".load_state_dict"),
        group_of(opt.params_.size()),
        next(opt.params_.size()),
        have(opt.params_.size()) {
    for (size_t g = 0; g < o.lrs_.size(); ++g)
      for (size_t i = o.group_begin_[g]; i < o.group_begin_[g + 1]; ++i) group_of[i] = g;
    for (size_t i = 0; i < o.params_.size(); ++i) have[i].assign(o.layouts_[group_of[i]].buffers.size() + 1, false);
  }

  void read(const std::string& name, const Tensor& t) {
    EMBER_CHECK(t.defined(), Error, op, ": entry '", name, "' is an undefined tensor");
    if (!read_group_entry(name, t) && !read_param_entry(name, t)) refuse(name);
  }

  // param_groups.lr, .initial_lr (absent from dicts saved before schedulers recorded it: then the current values
  // stay) and .momentum; false for any other name.
  bool read_group_entry(const std::string& name, const Tensor& t) {
    if (name == "param_groups.lr" || name == "param_groups.initial_lr") {
      std::optional<std::vector<double>>& out = name == "param_groups.lr" ? lrs : initial_lrs;
      read_groups(name, t, out);
      for (size_t g = 0; g < out->size(); ++g)
        EMBER_CHECK(std::isfinite((*out)[g]) && (*out)[g] >= 0, Error, op, ": entry '", name, "' holds an invalid lr ",
                    (*out)[g], o.lrs_.size() == 1 ? "" : detail::str(" for param group ", g));
      return true;
    }
    if (name != "param_groups.momentum") return false;
    EMBER_CHECK(o.has_momentum(), Error, op, ": unexpected entry '", name, "' (this ", o.name_, " has no momentum)");
    read_groups(name, t, momenta);
    for (size_t g = 0; g < momenta->size(); ++g) {
      try {
        o.check_momentum((*momenta)[g]);
      } catch (const ValueError& e) {
        throw Error(detail::str(op, ": entry '", name, "'",
                                o.lrs_.size() == 1 ? "" : detail::str(" (param group ", g, ")"), ": ", e.what()));
      }
    }
    return true;
  }
  void read_groups(const std::string& name, const Tensor& t, std::optional<std::vector<double>>& out) {
    EMBER_CHECK(!out, Error, op, ": entry '", name, "' appears twice");
    out = read_per_group(op, name, t, o.lrs_.size(), detail::str("this ", o.name_));
  }

  // state.<i>.step or state.<i>.<buffer> of a parameter whose group keeps that field; false otherwise.
  bool read_param_entry(const std::string& name, const Tensor& t) {
    auto parsed = parse_state_name(name);
    if (!parsed || parsed->first >= o.params_.size()) return false;
    const size_t i = parsed->first;
    const StateLayout& layout = o.layouts_[group_of[i]];
    size_t field = layout.buffers.size() + 1;
    if (layout.has_step && parsed->second == "step") field = 0;
    for (size_t b = 0; b < layout.buffers.size(); ++b)
      if (parsed->second == layout.buffers[b]) field = 1 + b;
    if (field > layout.buffers.size()) return false;
    EMBER_CHECK(!have[i][field], Error, op, ": entry '", name, "' appears twice");
    have[i][field] = true;
    next[i].initialized = true;
    if (field == 0) next[i].step = read_step(name, t);
    else set_buffer(i, field - 1, layout.buffers.size(), name, t);
    return true;
  }
  int64_t read_step(const std::string& name, const Tensor& t) const {
    EMBER_CHECK(t.dim() == 0 && t.dtype() == kFloat64, Error, op, ": entry '", name, "' is ", t.dtype(), t.shape(),
                "; expected a 0-dim float64 tensor");
    const double step = t.to_vector<double>()[0];  // works whatever the device
    EMBER_CHECK(step >= 0 && step == std::floor(step) && step < 9e15, Error, op, ": entry '", name,
                "' holds an invalid step count ", step);
    return static_cast<int64_t>(step);
  }
  void set_buffer(size_t i, size_t b, size_t count, const std::string& name, const Tensor& t) {
    const Tensor& p = o.params_[i];
    EMBER_CHECK(t.shape() == p.shape() && t.dtype() == state_dtype(p.dtype()), Error, op, ": entry '", name, "' is ",
                t.dtype(), t.shape(), " but parameter ", i, " is ", p.dtype(), p.shape(), " (its state is ",
                state_dtype(p.dtype()), ")");
    if (next[i].buffers.empty()) next[i].buffers.resize(count);
    Tensor buf = empty(p.shape(), {.dtype = t.dtype(), .device = p.device()});  // a copy, on the param's device
    raw::copy_(buf, t);
    next[i].buffers[b] = buf;
  }

  // An entry no group or parameter of this optimiser has: the error names what it does have. SGD keeps a
  // momentum_buffer only in the groups with momentum.
  [[noreturn]] void refuse(const std::string& name) const {
    auto parsed = parse_state_name(name);
    if (parsed && parsed->first < o.params_.size())
      for (const StateLayout& layout : o.layouts_)
        EMBER_CHECK(std::find(layout.buffers.begin(), layout.buffers.end(), parsed->second) == layout.buffers.end(),
                    Error, op, ": unexpected entry '", name, "' (parameter ", parsed->first, " is in param group ",
                    group_of[parsed->first], ", which keeps no ", parsed->second, ")");
    std::string fields;
    for (const StateLayout& layout : o.layouts_) {
      std::vector<std::string> names = layout.buffers;
      if (layout.has_step) names.insert(names.begin(), "step");
      for (const std::string& n : names)
        if (fields.find(n) == std::string::npos) fields += (fields.empty() ? "" : ", ") + n;
    }
    throw Error(detail::str(op, ": unexpected entry '", name, "' (", o.name_,
                            " has entries param_groups.{lr, initial_lr", o.has_momentum() ? ", momentum" : "",
                            "} and state.<i>.{", fields, "} for parameters i < ", o.params_.size(), ")"));
  }

  // The lrs are there, and a parameter with some state has all of its group's fields.
  void check_complete() const {
    EMBER_CHECK(lrs.has_value(), Error, op, ": entry 'param_groups.lr' is missing");
    for (size_t i = 0; i < o.params_.size(); ++i) {
      if (!next[i].initialized) continue;
      const StateLayout& layout = o.layouts_[group_of[i]];
      for (size_t f = 0; f < have[i].size(); ++f) {
        if (f == 0 && !layout.has_step) continue;
        EMBER_CHECK(have[i][f], Error, op, ": entry 'state.", i, ".", f == 0 ? "step" : layout.buffers[f - 1],
                    "' is missing (the dict has other state of parameter ", i, ")");
      }
    }
  }

  void commit() {
    o.lrs_ = *lrs;
    if (initial_lrs) o.initial_lrs_ = *initial_lrs;
    if (momenta) {
      for (size_t g = 0; g < o.lrs_.size(); ++g) o.write_momentum(g, (*momenta)[g]);
      o.momentum_set_ = true;
    }
    o.state_ = std::move(next);
  }
};

void Optimizer::load_state_dict(const StateDict& sd) {
  StateDictLoad load(*this);
  for (const auto& [name, t] : sd) load.read(name, t);
  load.check_complete();
  load.commit();
}

}  // namespace ember::optim
