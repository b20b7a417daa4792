// defines: the cuDNN fused attention of cudnn_attention.h, on NVIDIA's header-only cudnn-frontend (PyPI's
// nvidia-cudnn-frontend; cmake/FindCudnnFrontend.cmake). One graph per shape, options and layout, built on first use
// (operation graph, heuristics mode A, support check, plan) and cached per device; a shape cuDNN refuses is cached
// as refused, and the caller runs Ember's own kernels for it. q, k, v are read where they are (cuDNN takes the
// strides of a [B, H, T, d] view, so the heads of a fused projection need no copy); out, lse and the gradients are
// contiguous. Graphs execute on the tensors' current stream with a workspace from the caching allocator.
#include "cudnn_attention.h"

#if EMBER_WITH_CUDNN_FRONTEND
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "check.h"
#include "ember/core/determinism.h"
#include "ember/core/factory.h"
#include "ember/core/memory_plan.h"
#include "handle_pool.h"
#include "kernel_args.h"
#include "stream_internal.h"
#endif

namespace ember::cuda::detail {

#if !EMBER_WITH_CUDNN_FRONTEND

bool cudnn_attention_takes(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AttentionParams&) {
  return false;
}
bool cudnn_attention_forward(const AttentionArgs&) { return false; }
bool cudnn_attention_backward(const AttentionGradArgs&) { return false; }

#else

namespace {

namespace fe = cudnn_frontend;
using Graph = fe::graph::Graph;
using Uid = fe::graph::Tensor_attributes::uid_t;

enum : Uid { kQ = 1, kK, kV, kO, kStats, kdO, kdQ, kdK, kdV };

// Everything a graph depends on. Strides in elements: batch, head, row (a row's d elements are contiguous).
struct GraphKey {
  int device = 0;
  DType dtype = kFloat16;
  bool backward = false, causal = false, deterministic = false;
  int64_t b = 0, h = 0, tq = 0, tk = 0, d = 0;
  std::array<int64_t, 3> qs{}, ks{}, vs{};
  double scale = 1;
  auto operator<=>(const GraphKey&) const = default;
};

// The graph of a key, or null when cuDNN refused it (cached too, so a refused shape is asked once).
std::shared_ptr<Graph> build(const GraphKey& key, cudnnHandle_t handle);

std::shared_ptr<Graph> graph_for(const GraphKey& key, cudnnHandle_t handle) {
  static std::mutex mu;
  static std::map<GraphKey, std::shared_ptr<Graph> > cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, build(key, handle)).first;
  return it->second;
}

cudnnHandle_t handle_for(int device) {
  return HandlePool<cudnnHandle_t>::get(device, [](cudnnHandle_t* h) { EMBER_CUDNN_CHECK(cudnnCreate(h)); });
}

fe::DataType_t io_type(DType dt) { return dt == kBFloat16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF; }

// A [b, h, t, width] tensor of the graph, at the given (batch, head, row) strides.
std::shared_ptr<fe::graph::Tensor_attributes> input(Graph& g, const char* name, Uid uid, const GraphKey& k, int64_t t,
                                                    const std::array<int64_t, 3>& s) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({k.b, k.h, t, k.d})
                      .set_stride({s[0], s[1], s[2], 1}));
}
// Contiguous [b, h, t, width].
std::array<int64_t, 3> packed_strides(const GraphKey& k, int64_t t) { return {k.h * t * k.d, t * k.d, k.d}; }
std::vector<int64_t> dims(const GraphKey& k, int64_t t, int64_t width) { return {k.b, k.h, t, width}; }
std::vector<int64_t> strides(const std::array<int64_t, 3>& s) { return {s[0], s[1], s[2], 1}; }

std::shared_ptr<Graph> build(const GraphKey& k, cudnnHandle_t handle) {
  auto g = std::make_shared<Graph>();
  g->set_io_data_type(io_type(k.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto Q = input(*g, "q", kQ, k, k.tq, k.qs), K = input(*g, "k", kK, k, k.tk, k.ks),
       V = input(*g, "v", kV, k, k.tk, k.vs);
  const std::vector<int64_t> stats_dims = dims(k, k.tq, 1), stats_strides = {k.h * k.tq, k.tq, 1, 1};
  if (!k.backward) {
    auto opts = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(
        static_cast<float>(k.scale));
    if (k.causal) opts.set_causal_mask(true);  // top-left: key j for query i when j <= i, as Ember's
    auto [O, stats] = g->sdpa(Q, K, V, opts);
    O->set_output(true).set_uid(kO).set_dim(dims(k, k.tq, k.d)).set_stride(strides(packed_strides(k, k.tq)));
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(stats_dims)
        .set_stride(stats_strides);
  } else {
    auto O = input(*g, "o", kO, k, k.tq, packed_strides(k, k.tq));
    auto dO = input(*g, "do", kdO, k, k.tq, packed_strides(k, k.tq));
    auto stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("stats")
                               .set_uid(kStats)
                               .set_dim(stats_dims)
                               .set_stride(stats_strides)
                               .set_data_type(fe::DataType_t::FLOAT));
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("sdpa_backward")
                    .set_attn_scale(static_cast<float>(k.scale))
                    .set_deterministic_algorithm(k.deterministic);
    if (k.causal) opts.set_causal_mask(true);
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, stats, opts);
    dQ->set_output(true).set_uid(kdQ).set_dim(dims(k, k.tq, k.d)).set_stride(strides(packed_strides(k, k.tq)));
    dK->set_output(true).set_uid(kdK).set_dim(dims(k, k.tk, k.d)).set_stride(strides(packed_strides(k, k.tk)));
    dV->set_output(true).set_uid(kdV).set_dim(dims(k, k.tk, k.d)).set_stride(strides(packed_strides(k, k.tk)));
  }
  if (!g->build(handle, {fe::HeurMode_t::A}).is_good()) return nullptr;
  return g;
}

GraphKey key_of(bool backward, const Tensor& q, const AttentionParams& p) {
  GraphKey k;
  k.device = q.device().index();
  k.dtype = q.dtype();
  k.backward = backward;
  k.causal = p.causal;
  k.deterministic = backward && are_deterministic_algorithms_enabled();
  k.b = p.batch_heads / p.heads;
  k.h = p.heads;
  k.tq = p.tq;
  k.tk = p.tk;
  k.d = p.d;
  k.qs = {p.q_stride[0], p.q_stride[1], p.q_stride[2]};
  k.ks = {p.k_stride[0], p.k_stride[1], p.k_stride[2]};
  k.vs = {p.v_stride[0], p.v_stride[1], p.v_stride[2]};
  k.scale = p.scale;
  return k;
}

// Runs graph g with these tensors on the current stream of `device`, its workspace from the caching allocator.
void execute(const Graph& g, int device, std::unordered_map<Uid, void*> pack, const char* op) {
  int64_t bytes = 0;
  if (!g.get_workspace_size(bytes).is_good())
    throw DeviceError(ember::detail::str(op, ": cuDNN gave no workspace size"));
  Tensor ws;
  if (bytes > 0) {
    ws = empty({bytes}, {.dtype = kUInt8, .device = Device::cuda(device)});
    memory::tag(ws, memory::Category::kWorkspace);
  }
  cudnnHandle_t h = handle_for(device);
  EMBER_CUDNN_CHECK(cudnnSetStream(h, current_stream_handle(device)));
  auto status = g.execute(h, pack, bytes > 0 ? ws.data_ptr() : nullptr);
  if (!status.is_good())
    throw DeviceError(ember::detail::str(op, ": cuDNN's fused attention failed: ", status.get_message()));
}

bool aligned(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }
bool rows_aligned(const int64_t* s) { return s[0] % 8 == 0 && s[1] % 8 == 0 && s[2] % 8 == 0; }

bool cc8_or_newer(int device) {
  int major = 0;
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 8;
}

}  // namespace

bool cudnn_attention_takes(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                           const AttentionParams& p) {
  static const bool enabled = [] {
    const char* e = std::getenv("EMBER_CUDNN_ATTENTION");
    return !(e && e[0] == '0');
  }();
  if (!enabled || mask.defined() || p.mask != AttnMask::None) return false;
  if (q.dtype() != kFloat16 && q.dtype() != kBFloat16) return false;
  if (p.d != p.dv || p.d % 8 != 0 || p.d > 128 || p.tq == 0 || p.tk == 0 || p.heads <= 0) return false;
  if (!aligned(q) || !aligned(k) || !aligned(v) || !rows_aligned(p.q_stride) || !rows_aligned(p.k_stride) ||
      !rows_aligned(p.v_stride))
    return false;
  return cc8_or_newer(q.device().index());
}

bool cudnn_attention_forward(const AttentionArgs& a) {
  OnDevice on(a.out);
  const GraphKey key = key_of(false, a.q, a.p);
  const std::shared_ptr<Graph> g = graph_for(key, handle_for(key.device));
  if (!g) return false;
  execute(*g, key.device,
          {{kQ, a.q.data_ptr()},
           {kK, a.k.data_ptr()},
           {kV, a.v.data_ptr()},
           {kO, a.out.data_ptr()},
           {kStats, a.lse.data_ptr()}},
          "scaled_dot_product_attention");
  return true;
}

bool cudnn_attention_backward(const AttentionGradArgs& a) {
  OnDevice on(a.gq);
  const GraphKey key = key_of(true, a.q, a.p);
  cudnnHandle_t h = handle_for(key.device);
  // only after a cuDNN forward (its graph is cached by now): lse is then cuDNN's statistics
  if (!graph_for(key_of(false, a.q, a.p), h)) return false;
  const std::shared_ptr<Graph> g = graph_for(key, h);
  if (!g) return false;
  execute(*g, key.device,
          {{kQ, a.q.data_ptr()},
           {kK, a.k.data_ptr()},
           {kV, a.v.data_ptr()},
           {kO, a.out.data_ptr()},
           {kdO, a.gout.data_ptr()},
           {kStats, a.lse.data_ptr()},
           {kdQ, a.gq.data_ptr()},
           {kdK, a.gk.data_ptr()},
           {kdV, a.gv.data_ptr()}},
          "scaled_dot_product_attention backward");
  return true;
}

#endif

}  // namespace ember::cuda::detail
