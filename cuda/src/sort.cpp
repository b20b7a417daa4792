// defines: CudaBackend::argsort, on kernels/sort.cu
// (contract in core/include/ember/core/backend.h; checks nothing raw_ops has checked and runs on the current stream
// of its tensors' device).
#include "cuda_backend.h"
#include "ember/core/factory.h"
#include "ember/core/memory_plan.h"
#include "kernel_args.h"
#include "kernels/launch.h"

namespace ember::cuda {

void CudaBackend::argsort(const Tensor& out, const Tensor& x, bool descending) {
  if (out.numel() == 0) return;
  detail::OnDevice on(out);
  const int64_t n = x.size(x.dim() - 1), rows = x.numel() / n;
  // Long rows (CUB's radix sort) sort in a scratch buffer from the caching allocator on this stream (freed with
  // the Tensor).
  const int64_t ws_bytes = kernels::argsort_workspace_bytes(x.dtype(), rows, n);
  const Tensor ws = ws_bytes ? empty({ws_bytes}, {.dtype = kUInt8, .device = out.device()}) : Tensor();
  memory::tag(ws, memory::Category::kWorkspace);  // memory_history.h's counters and timeline (no-op if undefined)
  kernels::launch_argsort(x.dtype(), static_cast<int64_t*>(out.data_ptr()), x.data_ptr(), rows, n, descending,
                          ws_bytes ? ws.data_ptr() : nullptr, ws_bytes, on.stream);
}

}  // namespace ember::cuda
