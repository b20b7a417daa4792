// defines: CudaBackend::random, the Philox fills of kernels/random.cu
// (contracts in core/include/ember/core/backend.h; each checks nothing raw_ops has checked and runs on the
// current stream of its tensors' device).
#include "cuda_backend.h"
#include "kernel_args.h"
#include "kernels/launch.h"

namespace ember::cuda {
namespace {

using detail::OnDevice;

}  // namespace

void CudaBackend::random(RandomKind kind, const Tensor& out, double lo, double hi, PhiloxState state) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  kernels::launch_random(kind, out.dtype(), out.data_ptr(), out.numel(), lo, hi, state.seed, state.offset, on.stream);
}

}  // namespace ember::cuda
