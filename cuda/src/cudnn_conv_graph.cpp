// defines: cudnn_graph_conv (cudnn_conv_graph.h): float16 / bfloat16 convolutions on cuDNN's graph API through the
// header-only cudnn-frontend, as PyTorch runs its cuDNN convolutions (the "v8 API"); the legacy cudnnConvolution*
// calls (cudnn.cpp) stay for float32 / float64 and for what the graph path refuses. One graph per pass, shape,
// strides, parameters and setting, built on first use and cached per device; an execution plan from heuristics
// mode A (the first that builds), or, under cuda::set_cudnn_benchmark(true), every plan built and timed once
// (cudnn-frontend's autotune) with the fastest kept. As on the legacy path: deterministic engines only (unless
// benchmark mode without use_deterministic_algorithms), at most 1 GiB of workspace, and the legacy path's cheaper
// algorithm when the workspace does not fit in memory. A refused shape is cached as refused. Graphs run on the
// current stream with a workspace from the caching allocator.
#include "cudnn_conv_graph.h"

#if EMBER_WITH_CUDNN_FRONTEND
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "check.h"
#include "device_guard.h"
#include "ember/core/determinism.h"
#include "ember/core/factory.h"
#include "ember/core/memory_plan.h"
#include "ember/cuda/cuda.h"
#include "handle_pool.h"
#include "stream_internal.h"
#endif

namespace ember::cuda::detail {

#if !EMBER_WITH_CUDNN_FRONTEND

bool cudnn_graph_conv(ConvPass, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) {
  return false;
}

#else

namespace {

namespace fe = cudnn_frontend;
using Graph = fe::graph::Graph;
using Uid = fe::graph::Tensor_attributes::uid_t;

enum : Uid { kX = 1, kW, kY };

constexpr int64_t kMaxWorkspace = int64_t{1} << 30;  // engines wanting more are skipped (the legacy path's limit)

// EMBER_CUDNN_CONV_GRAPH: unset or 1 on, 0 off, "require" on with refusals thrown.
enum class Mode { Off, On, Require };
Mode mode() {
  static const Mode m = [] {
    const char* e = std::getenv("EMBER_CUDNN_CONV_GRAPH");
    if (e && e[0] == '0') return Mode::Off;
    return e && std::strcmp(e, "require") == 0 ? Mode::Require : Mode::On;
  }();
  return m;
}

// Everything a graph depends on: device, dtype, pass, benchmark, deterministic, then x, w, y sizes and strides and
// the convolution's stride and padding.
struct GraphKey {
  int device = 0;
  DType dtype = kFloat16;
  ConvPass pass = ConvPass::Forward;
  bool benchmark = false, deterministic = false;
  std::vector<int64_t> geometry;
  auto operator<=>(const GraphKey&) const = default;
};

void append(std::vector<int64_t>& v, const Tensor& t) {
  v.insert(v.end(), t.shape().begin(), t.shape().end());
  v.insert(v.end(), t.strides().begin(), t.strides().end());
}

GraphKey key_of(ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p) {
  GraphKey k{.device = x.device().index(),
             .dtype = x.dtype(),
             .pass = pass,
             .benchmark = cudnn_benchmark(),
             .deterministic = are_deterministic_algorithms_enabled(),
             .geometry = {}};
  append(k.geometry, x);
  append(k.geometry, w);
  append(k.geometry, y);
  k.geometry.insert(k.geometry.end(), {p.stride_h, p.stride_w, p.pad_h, p.pad_w});
  return k;
}

// A key's graph, built on first use; `tuned` once the benchmark setting has timed its plans (autotune needs real
// buffers, so it runs at the first call rather than at the build). cuDNN does not promise that one execution plan
// runs safely from several threads at once (PyTorch keeps its plans per thread), so an entry's build, autotune and
// every execution hold its own mutex: one shape runs one call at a time, different shapes concurrently.
struct Entry {
  std::mutex mu;
  bool built = false, tuned = false;
  std::shared_ptr<Graph> graph;  // null once built: cuDNN refused the key
};

cudnnHandle_t handle_for(int device) {
  return HandlePool<cudnnHandle_t>::get(device, [](cudnnHandle_t* h) { EMBER_CUDNN_CHECK(cudnnCreate(h)); });
}

std::shared_ptr<fe::graph::Tensor_attributes> tensor_of(Graph& g, const char* name, Uid uid, const Tensor& t) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(std::vector<int64_t>(t.shape().begin(), t.shape().end()))
                      .set_stride(std::vector<int64_t>(t.strides().begin(), t.strides().end())));
}
void mark_output(const std::shared_ptr<fe::graph::Tensor_attributes>& out, Uid uid, const Tensor& t) {
  out->set_output(true)
      .set_uid(uid)
      .set_dim(std::vector<int64_t>(t.shape().begin(), t.shape().end()))
      .set_stride(std::vector<int64_t>(t.strides().begin(), t.strides().end()));
}

// The pass's operation graph, plans from heuristics mode A (all of them under benchmark, else the first that
// builds), or null where cuDNN offers none.
std::shared_ptr<Graph> build(const GraphKey& k, const Tensor& x, const Tensor& w, const Tensor& y,
                             const Conv2dParams& p, cudnnHandle_t handle) {
  auto g = std::make_shared<Graph>();
  g->set_io_data_type(k.dtype == kBFloat16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const std::vector<int64_t> pad = {p.pad_h, p.pad_w}, stride = {p.stride_h, p.stride_w}, dilation = {1, 1};
  switch (k.pass) {
    case ConvPass::Forward: {
      auto Y =
          g->conv_fprop(tensor_of(*g, "x", kX, x), tensor_of(*g, "w", kW, w),
                        fe::graph::Conv_fprop_attributes().set_padding(pad).set_stride(stride).set_dilation(dilation));
      mark_output(Y, kY, y);
      break;
    }
    case ConvPass::Data: {
      auto DX =
          g->conv_dgrad(tensor_of(*g, "dy", kY, y), tensor_of(*g, "w", kW, w),
                        fe::graph::Conv_dgrad_attributes().set_padding(pad).set_stride(stride).set_dilation(dilation));
      mark_output(DX, kX, x);
      break;
    }
    case ConvPass::Filter: {
      auto DW =
          g->conv_wgrad(tensor_of(*g, "dy", kY, y), tensor_of(*g, "x", kX, x),
                        fe::graph::Conv_wgrad_attributes().set_padding(pad).set_stride(stride).set_dilation(dilation));
      mark_output(DW, kW, w);
      break;
    }
  }
  if (!g->validate().is_good() || !g->build_operation_graph(handle).is_good() ||
      !g->create_execution_plans({fe::HeurMode_t::A}).is_good())
    return nullptr;
  // As the legacy path: deterministic engines only, unless benchmark mode may take the fastest of any (and
  // use_deterministic_algorithms does not forbid it); at most kMaxWorkspace of workspace.
  if (!k.benchmark || k.deterministic) g->deselect_numeric_notes({fe::NumericalNote_t::NONDETERMINISTIC});
  g->deselect_workspace_greater_than(kMaxWorkspace);
  if (!g->check_support().is_good()) return nullptr;
  const fe::BuildPlanPolicy_t policy =
      k.benchmark ? fe::BuildPlanPolicy_t::ALL : fe::BuildPlanPolicy_t::HEURISTICS_CHOICE;
  if (!g->build_plans(policy).is_good()) return nullptr;
  return g;
}

// The cached entry of a key (entries never move or go: a std::map's nodes are stable).
Entry& entry_for(const GraphKey& key) {
  static std::mutex mu;
  static std::map<GraphKey, Entry> cache;
  std::lock_guard<std::mutex> lock(mu);
  return cache[key];
}

Tensor workspace(int64_t bytes, int device) {
  if (bytes <= 0) return {};
  Tensor ws = empty({bytes}, {.dtype = kUInt8, .device = Device::cuda(device)});
  memory::tag(ws, memory::Category::kWorkspace);  // memory_history.h's counters and timeline
  return ws;
}

bool aligned(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

const char* pass_name(ConvPass pass) {
  return pass == ConvPass::Forward ? "conv2d"
         : pass == ConvPass::Data  ? "conv2d_backward (input gradient)"
                                   : "conv2d_backward (weight gradient)";
}

}  // namespace

bool cudnn_graph_conv(ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& out,
                      const Conv2dParams& p) {
  if (mode() == Mode::Off || !is_reduced_float(x.dtype())) return false;
  if (!aligned(x) || !aligned(w) || !aligned(y) || !aligned(out)) return false;
  const int device = x.device().index();
  DeviceGuard guard(device);
  cudnnHandle_t h = handle_for(device);
  EMBER_CUDNN_CHECK(cudnnSetStream(h, current_stream_handle(device)));
  const GraphKey key = key_of(pass, x, w, y, p);
  Entry& e = entry_for(key);
  std::lock_guard<std::mutex> lock(e.mu);
  if (!e.built) {
    e.graph = build(key, x, w, y, p, h);
    e.built = true;
  }
  if (!e.graph) {
    EMBER_CHECK_DEVICE(mode() != Mode::Require, pass_name(pass), ": cuDNN's graph API refused this convolution (x ",
                       x.shape(), ", w ", w.shape(), ", ", x.dtype(), ") and EMBER_CUDNN_CONV_GRAPH=require");
    return false;
  }
  std::unordered_map<Uid, void*> pack = {{kX, x.data_ptr()}, {kW, w.data_ptr()}, {kY, y.data_ptr()}};
  pack[pass == ConvPass::Forward ? kY : pass == ConvPass::Data ? kX : kW] = out.data_ptr();
  try {
    if (key.benchmark && !e.tuned) {  // time every built plan on these buffers once; the fastest goes first
      e.tuned = true;                 // a failed timing leaves the heuristics' order, and is not retried
      const Tensor ws = workspace(e.graph->get_autotune_workspace_size(), device);
      (void)e.graph->autotune(h, pack, ws.defined() ? ws.data_ptr() : nullptr);
    }
    int64_t bytes = 0;
    EMBER_CHECK_DEVICE(e.graph->get_workspace_size(bytes).is_good(), pass_name(pass), ": cuDNN gave no workspace size");
    const Tensor ws = workspace(bytes, device);
    auto status = e.graph->execute(h, pack, ws.defined() ? ws.data_ptr() : nullptr);
    EMBER_CHECK_DEVICE(status.is_good(), pass_name(pass), ": cuDNN's graph failed: ", status.get_message());
  } catch (const OutOfMemoryError&) {
    return false;  // the legacy path, which falls back to its algorithm without workspace
  }
  return true;
}

#endif

}  // namespace ember::cuda::detail
