// defines: backend_for(Device) — the CPU backend of the kernel variant in use (core/cpu/isa.h); a CUDA device's
// backend from the CUDA plugin
// (ember/internal/cuda_hooks.h), which is opened on the first use of a CUDA device.
#include <atomic>

#include "../cpu/isa.h"
#include "ember/core/backend.h"
#include "ember/cuda/cuda.h"
#include "ember/internal/cuda_hooks.h"
#include "memory_plan_internal.h"

namespace ember {

namespace {
// The CUDA backends handed out so far, by device index: backend_for runs on every op, so a device's backend is
// looked up through the plugin once and read from here afterwards.
constexpr int kMaxCachedDevices = 64;
std::atomic<Backend*> g_cuda_backends[kMaxCachedDevices] = {};

Backend& cuda_backend(Device d) {
  const int i = d.index();
  if (i >= 0 && i < kMaxCachedDevices)
    if (Backend* b = g_cuda_backends[i].load(std::memory_order_acquire)) return *b;
  std::string why;
  detail::CudaHooks* h = detail::cuda_hooks(&why);
  if (h && h->device_count() == 0) why = h->unavailable_reason();
  EMBER_CHECK_DEVICE(h && h->device_count() > 0, "cannot use ", d, ": ", why);
  EMBER_CHECK_DEVICE(i >= 0 && i < h->device_count(), "cannot use ", d, ": device index ", i, " is out of range (",
                     h->device_count(), " CUDA device(s))");
  Backend& b = h->backend(i);
  if (i < kMaxCachedDevices) g_cuda_backends[i].store(&b, std::memory_order_release);
  return b;
}
}  // namespace

Backend& backend_for(Device d) {
  if (Backend* planned = memory::internal::planning_backend(d.type())) [[unlikely]]
    return *planned;  // inside memory::plan: shape-only (Note [How a plan runs] in memory_plan.cpp)
  if (d.is_cpu()) {
    static Backend& cpu = cpu::active_backend();  // the kernel variant of this CPU (core/cpu/isa.h), chosen once
    return cpu;
  }
  return cuda_backend(d);
}

}  // namespace ember
