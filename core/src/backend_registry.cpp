// defines: backend_for(Device) — the CPU backend always, the CUDA backend when built and available. The CUDA backend is reached by a direct call, never a static registrar (a static library
// would drop a registrar object silently).
#include "ember/config.h"
#include "ember/core/backend.h"
#include "ember/cuda/cuda.h"
#include "../cpu/cpu_backend.h"
#include "cuda_hooks.h"

namespace ember {

namespace cpu {
CpuBackend& cpu_backend() {
  static CpuBackend b;
  return b;
}
}  // namespace cpu

Backend& backend_for(Device d) {
  if (d.is_cpu()) return cpu::cpu_backend();
#if EMBER_WITH_CUDA
  std::string why;
  if (Backend* b = cuda::detail::backend_or_null(d.index(), &why)) return *b;
  throw DeviceError(detail::str("cannot use ", d, ": ", why));
#else
  throw DeviceError(detail::str("cannot use ", d, ": ", cuda::unavailable_reason()));
#endif
}

}  // namespace ember
