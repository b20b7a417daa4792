// defines: autocast's per-thread state, its guards and the casts the op files ask for (amp.h), with the cast
// cache of parameters.
#include "ember/autograd/amp.h"

#include <unordered_map>

#include "ember/autograd/grad_mode.h"
#include "ember/core/error.h"

namespace ember::amp {
namespace {

struct CacheEntry {
  Tensor source;     // kept alive, so that its address is not reused by another tensor while cached
  uint32_t version;  // an in-place update of the parameter (an optimiser step) makes the entry stale
  Tensor cast;
};

struct State {
  bool enabled[2] = {false, false};  // by DeviceType: CPU, CUDA
  DType dtype[2] = {kBFloat16, kFloat16};
  int depth = 0;      // guards alive on this thread
  int suspended = 0;  // AutocastSuspend alive (backward)
  // Two caches: a cast made with grad mode off has no graph and must not be handed to a recording op.
  std::unordered_map<const TensorImpl*, CacheEntry> cache[2];
};
thread_local State state;

int slot(DeviceType t) { return t == DeviceType::CUDA ? 1 : 0; }

void refresh() { detail::any_enabled = state.suspended == 0 && (state.enabled[0] || state.enabled[1]); }

bool on_for(const Tensor& t) { return t.defined() && state.enabled[slot(t.device().type())]; }

void check_dtype(DType dtype) {
  EMBER_CHECK_DTYPE(dtype == kFloat16 || dtype == kBFloat16, "amp::AutocastGuard: autocast computes in float16 or ",
                    "bfloat16, got ", dtype, " (for float32 everywhere, leave autocast off or pass enabled = false)");
}

}  // namespace

namespace detail {
thread_local bool any_enabled = false;

Tensor to_lower(const Tensor& t) {
  if (!on_for(t)) return t;
  const DType low = state.dtype[slot(t.device().type())];
  // As PyTorch: float64 is left alone (it was asked for on purpose), integers and low tensors too.
  if (!is_floating(t.dtype()) || t.dtype() == low || t.dtype() == kFloat64) return t;
  const bool cacheable = t.dtype() == kFloat32 && t.requires_grad() && t.is_leaf();
  if (!cacheable) return t.to(low);
  auto& cache = state.cache[GradMode::is_enabled() ? 1 : 0];
  auto it = cache.find(t.impl());
  if (it != cache.end() && it->second.version == t.version() && it->second.cast.dtype() == low) return it->second.cast;
  Tensor c = t.to(low);
  cache[t.impl()] = CacheEntry{t, t.version(), c};
  return c;
}

bool casts_to_fp32(const Tensor& t) { return on_for(t) && is_reduced_float(t.dtype()); }

Tensor to_fp32(const Tensor& t) {
  if (!casts_to_fp32(t)) return t;
  return t.to(kFloat32);
}

}  // namespace detail

std::vector<Tensor> promote(const std::vector<Tensor>& ts) {
  if (!detail::any_enabled) return ts;
  // float16 with bfloat16 gives float32 (promote_types), as PyTorch.
  bool any = false;
  DType w = kFloat16;
  for (const Tensor& t : ts) {
    if (!on_for(t) || !is_floating(t.dtype())) continue;
    w = any ? promote_types(w, t.dtype()) : t.dtype();
    any = true;
  }
  if (!any) return ts;
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(on_for(t) && is_floating(t.dtype()) && t.dtype() != w ? t.to(w) : t);
  return out;
}

AutocastGuard::AutocastGuard(DType dtype, bool enabled) {
  check_dtype(dtype);
  for (int s = 0; s < 2; ++s) {
    prev_[s] = {state.enabled[s], state.dtype[s]};
    state.enabled[s] = enabled;
    state.dtype[s] = dtype;
  }
  ++state.depth;
  refresh();
}

AutocastGuard::AutocastGuard(Device device, DType dtype, bool enabled) {
  check_dtype(dtype);
  for (int s = 0; s < 2; ++s) prev_[s] = {state.enabled[s], state.dtype[s]};
  const int s = slot(device.type());
  state.enabled[s] = enabled;
  state.dtype[s] = dtype;
  ++state.depth;
  refresh();
}

AutocastGuard::~AutocastGuard() {
  for (int s = 0; s < 2; ++s) {
    state.enabled[s] = prev_[s].enabled;
    state.dtype[s] = prev_[s].dtype;
  }
  if (--state.depth == 0) clear_autocast_cache();
  refresh();
}

AutocastSuspend::AutocastSuspend() {
  ++state.suspended;
  refresh();
}
AutocastSuspend::~AutocastSuspend() {
  --state.suspended;
  refresh();
}

AutocastSnapshot autocast_snapshot() {
  return {{state.enabled[0], state.enabled[1]}, {state.dtype[0], state.dtype[1]}};
}
AutocastRestore::AutocastRestore(const AutocastSnapshot& s)
    : prev_(autocast_snapshot()), prev_suspended_(state.suspended) {
  for (int i = 0; i < 2; ++i) {
    state.enabled[i] = s.enabled[i];
    state.dtype[i] = s.dtype[i];
  }
  state.suspended = 0;
  ++state.depth;
  refresh();
}
AutocastRestore::~AutocastRestore() {
  for (int i = 0; i < 2; ++i) {
    state.enabled[i] = prev_.enabled[i];
    state.dtype[i] = prev_.dtype[i];
  }
  state.suspended = prev_suspended_;
  if (--state.depth == 0) clear_autocast_cache();
  refresh();
}

bool is_autocast_enabled() { return state.enabled[0] || state.enabled[1]; }
bool is_autocast_enabled(DeviceType type) { return state.enabled[slot(type)]; }
DType autocast_dtype() { return state.enabled[1] ? state.dtype[1] : state.dtype[0]; }
DType autocast_dtype(DeviceType type) { return state.dtype[slot(type)]; }

void clear_autocast_cache() {
  state.cache[0].clear();
  state.cache[1].clear();
}

}  // namespace ember::amp
