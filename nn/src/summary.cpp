// defines: nn::summary (summary.h), from forward hooks inside one memory::plan.
#include "ember/nn/summary.h"

#include <iomanip>
#include <sstream>
#include <vector>

#include "ember/autograd/engine.h"
#include "ember/autograd/ops.h"
#include "ember/core/factory.h"
#include "ember/core/memory_plan.h"
#include "module_state.h"

namespace ember::nn {
namespace {

struct Row {
  std::string path, type;
  std::string out;  // the output shapes
  int64_t params = 0;
  size_t activation = 0;
  int depth = 0;
  bool called = false;
};

// The bytes a tensor's storage takes in `d`'s caching allocator.
size_t allocated_size(const Tensor& t, Device d) { return memory::allocated_size(d, t.impl()->storage->nbytes); }

// The table: a header, then one line per module (indented by depth). The text columns are as wide as their
// longest entry plus two spaces (at least the usual widths), so a long layer name or type never runs into the next.
void print_rows(std::ostream& os, const std::vector<Row>& rows) {
  std::vector<std::string> names, shapes;
  size_t name_w = 28, type_w = 20, shape_w = 22;
  for (const Row& r : rows) {
    names.push_back(std::string(static_cast<size_t>(2 * std::max(0, r.depth - 1)), ' ') + r.path);
    shapes.push_back(r.called ? r.out : "(not called)");
    name_w = std::max(name_w, names.back().size() + 2);
    type_w = std::max(type_w, r.type.size() + 2);
    shape_w = std::max(shape_w, shapes.back().size() + 2);
  }
  constexpr int kParamsW = 12, kActW = 14;
  auto w = [](size_t n) { return static_cast<int>(n); };
  os << std::left << std::setw(w(name_w)) << "Layer" << std::setw(w(type_w)) << "Type" << std::setw(w(shape_w))
     << "Output shape" << std::right << std::setw(kParamsW) << "Params" << std::setw(kActW) << "Activations" << "\n"
     << std::string(name_w + type_w + shape_w + kParamsW + kActW, '-') << "\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    os << std::left << std::setw(w(name_w)) << names[i] << std::setw(w(type_w)) << r.type << std::setw(w(shape_w))
       << shapes[i] << std::right << std::setw(kParamsW) << internal::group_digits(r.params, ',') << std::setw(kActW)
       << (r.called ? detail::format_bytes(r.activation, 2) : "-") << "\n";
  }
}

struct InputSpec {
  Shape shape;
  DType dtype;
  Device device;
};

// Calls the model on planned zero tensors of `specs` and the backward of its outputs' sum.
void run_planned_call(const Module& model, const std::vector<InputSpec>& specs) {
  std::vector<Tensor> x;
  for (const InputSpec& s : specs) x.push_back(zeros(s.shape, {.dtype = s.dtype, .device = s.device}));
  const std::vector<Tensor> y = model.call(x);  // whichever forward form the model has, through its hooks
  Tensor loss;
  for (const Tensor& t : y)
    if (t.defined() && t.requires_grad()) loss = loss.defined() ? loss + t.sum() : t.sum();
  if (loss.defined()) loss.backward();
}

// The shapes of a call's outputs: "[64, 10]", or "[2, 8, 16], [2, 16]" for several.
std::string shapes_text(const std::vector<Tensor>& ts) {
  std::ostringstream os;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (i) os << ", ";
    if (ts[i].defined()) os << ts[i].shape();
    else os << "(none)";
  }
  return os.str();
}

// "[64, 1, 28, 28] float32", or "[2, 16] int64, [2, 16] float32" for several inputs.
std::string inputs_text(const std::vector<InputSpec>& specs) {
  std::ostringstream os;
  for (size_t i = 0; i < specs.size(); ++i) os << (i ? ", " : "") << specs[i].shape << " " << specs[i].dtype;
  return os.str();
}

std::string summary_of(const Module& model, const std::vector<InputSpec>& specs, Device device, DType dtype) {
  const NamedModules modules = model.named_modules();
  std::vector<Row> rows(modules.size());
  std::vector<HookHandle> handles;
  std::vector<size_t> before(modules.size(), 0);
  for (size_t i = 0; i < modules.size(); ++i) {
    const auto& [path, m] = modules[i];
    Row& r = rows[i];
    r.path = path.empty() ? "(model)" : path;
    r.type = internal::type_name(*m);
    r.depth = path.empty() ? 0 : 1 + static_cast<int>(std::count(path.begin(), path.end(), '.'));
    for (const Tensor& p : m->parameters()) r.params += p.numel();
    handles.push_back(m->register_forward_pre_hook([&before, i, device](Module&, const std::vector<Tensor>&) {
      before[i] = memory::planned_bytes_in_use(device);
    }));
    handles.push_back(m->register_forward_hook(
        [&rows, &before, i, device](Module&, const std::vector<Tensor>&, const std::vector<Tensor>& y) {
          const size_t now = memory::planned_bytes_in_use(device);
          rows[i].out = shapes_text(y);
          rows[i].activation = now > before[i] ? now - before[i] : 0;
          rows[i].called = true;
        }));
  }
  // Gradients land in the real parameters' .grad during the planned backward: keep and restore them.
  std::vector<Tensor> params = model.parameters();
  std::vector<Tensor> grads;
  for (const Tensor& p : params) grads.push_back(p.grad());
  memory::Plan plan;
  try {
    plan = memory::plan(device, [&] { run_planned_call(model, specs); });
  } catch (...) {
    for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(grads[i]);
    for (HookHandle& h : handles) h.remove();
    throw;
  }
  for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(grads[i]);
  for (HookHandle& h : handles) h.remove();

  int64_t trainable = 0, frozen = 0;
  size_t param_bytes = 0;
  for (const Tensor& p : params) {
    (p.requires_grad() ? trainable : frozen) += p.numel();
    param_bytes += allocated_size(p, device);
  }
  for (const auto& [_, b] : model.named_buffers()) param_bytes += allocated_size(b, device);

  auto fmt = [](size_t b) { return detail::format_bytes(b, 2); };
  std::ostringstream os;
  print_rows(os, rows);
  os << std::string(96, '-') << "\n"
     << "Parameters: " << internal::group_digits(trainable + frozen, ',') << " (trainable "
     << internal::group_digits(trainable, ',') << ", frozen " << internal::group_digits(frozen, ',') << "), "
     << fmt(param_bytes) << " with buffers on " << device << "\n"
     << "Input " << inputs_text(specs) << "; planned forward + backward peak: " << fmt(param_bytes + plan.peak_bytes)
     << " (parameters " << fmt(param_bytes) << ", gradients " << fmt(plan.bytes(memory::Category::kGradients))
     << ", activations " << fmt(plan.bytes(memory::Category::kActivations)) << ", temporaries "
     << fmt(plan.bytes(memory::Category::kTemporaries)) << ")\n"
     << "An optimiser step adds its state: SGD with momentum 1x, Adam/AdamW 2x the trainable parameters ("
     << fmt(2 * static_cast<size_t>(trainable) * itemsize(dtype)) << " for Adam)\n";
  return os.str();
}

// The dtype and device of the model's first floating parameter (float32 on the CPU without one).
std::pair<DType, Device> model_dtype_device(const Module& model) {
  for (const Tensor& p : model.parameters())
    if (is_floating(p.dtype())) return {p.dtype(), p.device()};
  return {kFloat32, Device::cpu()};
}
}  // namespace

std::string summary(const Module& model, const Shape& input_shape) {
  const auto [dtype, device] = model_dtype_device(model);
  return summary_of(model, {{input_shape, dtype, device}}, device, dtype);
}

std::string summary(const Module& model, const std::vector<Tensor>& example_inputs) {
  EMBER_CHECK_VALUE(!example_inputs.empty(), "nn::summary: no example inputs given");
  std::vector<InputSpec> specs;
  for (size_t i = 0; i < example_inputs.size(); ++i) {
    const Tensor& t = example_inputs[i];
    EMBER_CHECK_VALUE(t.defined(), "nn::summary: example input ", i, " is an undefined tensor");
    specs.push_back({t.shape(), t.dtype(), t.device()});
  }
  const auto [dtype, device] = model_dtype_device(model);
  const bool has_params = !model.parameters().empty();
  return summary_of(model, specs, has_params ? device : specs[0].device, dtype);
}

}  // namespace ember::nn
