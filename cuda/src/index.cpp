// defines: CudaBackend::index_select, index_add and check_range, on kernels/index.cu
// (contracts in core/include/ember/core/backend.h; each checks nothing raw_ops has checked and runs on the
// current stream of its tensors' device).
#include "cuda_backend.h"
#include "ember/core/raw_ops.h"
#include "host_wait.h"
#include "kernel_args.h"
#include "kernels/launch.h"

namespace ember::cuda {
namespace {

using detail::OnDevice;

}  // namespace

void CudaBackend::index_select(const Tensor& out, const Tensor& x_in, int64_t dim, const Tensor& index_in) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  const Tensor x = raw::contiguous(x_in), index = raw::contiguous(index_in);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  kernels::launch_index_select(out.data_ptr(), x.data_ptr(), static_cast<const int64_t*>(index.data_ptr()), outer,
                               x.size(dim), index.numel(), inner, static_cast<int>(x.itemsize()), on.stream);
}

void CudaBackend::check_range(const Tensor& minmax, int64_t lo, int64_t hi, const RangeMessage& message) {
  OnDevice on(minmax);
  detail::defer_range_check(minmax.device().index(), on.stream, static_cast<const int64_t*>(minmax.data_ptr()), lo, hi,
                            message);
}

void CudaBackend::index_add(const Tensor& out, int64_t dim, const Tensor& index_in, const Tensor& src_in) {
  if (src_in.numel() == 0) return;
  // Atomics exist for float32/64 and int32/64: the other types add in a wider one (float32 for the reduced
  // floats, as on the CPU; int32 for uint8 and bool, converted back with the same wrap / != 0 rules).
  const DType dt = out.dtype();
  if (is_reduced_float(dt) || dt == kUInt8 || dt == kBool) {
    const DType wide = is_reduced_float(dt) ? kFloat32 : kInt32;
    Tensor tmp = raw::cast(out, wide);
    index_add(tmp, dim, index_in, raw::cast(src_in, wide));
    copy(out, tmp);
    return;
  }
  OnDevice on(out);
  const Tensor src = raw::contiguous(src_in), index = raw::contiguous(index_in);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.size(d);
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.size(d);
  kernels::launch_index_add(dt, out.data_ptr(), src.data_ptr(), static_cast<const int64_t*>(index.data_ptr()), outer,
                            out.size(dim), index.numel(), inner, on.stream);
}

}  // namespace ember::cuda
