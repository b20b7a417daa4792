// defines: CudaBackend's allocator, synchronize, copies and fill (the compute ops are in the op-family files
// elementwise.cpp, reduce.cpp, linalg.cpp, conv_pool.cpp, index.cpp, random.cpp, optim.cpp),
// detail::kernel_args (kernel_args.h), and detail::pin, the pinned host copy behind Tensor::pin_memory().
//
// Note [CUDA copies]: every copy has three steps — pack, move, unpack:
//   1. pack: the bytes to move are one contiguous run in the source's dtype: the source itself when it is
//      contiguous, else a contiguous copy made on the source's side (on the host for host -> device, by the
//      copy kernel on the device for device -> host);
//   2. move: one cudaMemcpyAsync (cudaMemcpyPeerAsync between GPUs) on the current stream of the CUDA
//      device, straight into the destination when it is contiguous and of the source's dtype, else into a
//      contiguous landing buffer on the destination's side;
//   3. unpack: the landing buffer is converted into the destination's dtype and layout, on the destination's
//      side (the copy kernel on a GPU, the CPU backend on the host).
// When each call returns (docs/cuda.md, "Copies and non_blocking"):
//   - device -> same device: queued on the current stream, never waits (like every op);
//   - host -> device: waits until the transfer is done, except with non_blocking from pinned memory (the
//     pinned block is then kept from reuse until the stream has read it: host_record_use);
//   - device -> host: waits, except with non_blocking into pinned memory that needs no unpacking;
//   - device -> another device: waits.
#include "cuda_backend.h"

#include <cuda_runtime.h>

#include <initializer_list>
#include <memory>
#include <vector>

#include "allocator_internal.h"
#include "check.h"
#include "device_guard.h"
#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"
#include "host_wait.h"
#include "kernel_args.h"
#include "kernels/launch.h"
#include "stream_internal.h"

namespace ember::cuda {
namespace {

using detail::kernel_args;
using detail::KernelArgs;
static_assert(sizeof(bool) == 1, "kernels store bool as one byte, as the CPU backend does");

size_t nbytes(const Tensor& t) { return static_cast<size_t>(t.numel()) * t.itemsize(); }

// --- the four copy directions (see Note [CUDA copies])

// dst and src on one device.
void copy_on_device(const Tensor& dst, const Tensor& src) {
  const int device = dst.device().index();
  detail::DeviceGuard guard(device);
  cudaStream_t stream = detail::current_stream_handle(device);
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    if (dst.data_ptr() != src.data_ptr())
      EMBER_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), nbytes(dst), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  KernelArgs k = kernel_args("copy", {&dst, &src});
  kernels::launch_copy_cast(k.operands[0], k.operands[1], k.layout, stream);
}

// dst on a GPU, src on the host.
void copy_host_to_device(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const int device = dst.device().index();
  detail::DeviceGuard guard(device);
  cudaStream_t stream = detail::current_stream_handle(device);
  const Tensor packed = raw::contiguous(src);  // a host copy only when src is strided or broadcast
  const bool direct = dst.is_contiguous() && dst.dtype() == src.dtype();
  const Tensor landing = direct ? dst : empty(src.shape(), {.dtype = src.dtype(), .device = dst.device()});
  const bool async = non_blocking && packed.is_pinned();
  EMBER_CUDA_CHECK(
      cudaMemcpyAsync(landing.data_ptr(), packed.data_ptr(), nbytes(packed), cudaMemcpyHostToDevice, stream));
  // The pinned block must not be handed out again before the stream has read it.
  if (async) detail::host_record_use(packed.impl()->storage->data, stream);
  if (!direct) copy_on_device(dst, landing);
  // Pageable memory (or a blocking copy): return only once the data is on the device.
  if (!async) detail::wait_stream(device, stream);
}

// dst on the host, src on a GPU.
void copy_device_to_host(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const int device = src.device().index();
  detail::DeviceGuard guard(device);
  cudaStream_t stream = detail::current_stream_handle(device);
  const Tensor packed = raw::contiguous(src);  // a device copy (the copy kernel) only when strided or broadcast
  const bool direct = dst.is_contiguous() && dst.dtype() == src.dtype();
  const Tensor landing = direct ? dst : empty(src.shape(), {.dtype = src.dtype()});
  EMBER_CUDA_CHECK(
      cudaMemcpyAsync(landing.data_ptr(), packed.data_ptr(), nbytes(packed), cudaMemcpyDeviceToHost, stream));
  if (direct && non_blocking && dst.is_pinned()) {
    // The user synchronizes before reading dst; until then its pinned block must not be reused.
    detail::host_record_use(dst.impl()->storage->data, stream);
    return;
  }
  detail::wait_stream(device, stream);
  if (!direct) backend_for(Device::cpu()).copy(dst, landing);
}

// dst and src on two GPUs. Synchronous: the source's stream is drained before the peer copy reads it, and
// the destination's after it, so that the packed source can be freed and reused on its device at once.
void copy_between_devices(const Tensor& dst, const Tensor& src) {
  const int src_device = src.device().index(), dst_device = dst.device().index();
  const Tensor packed = raw::contiguous(src);  // queued on the source device's current stream
  {
    detail::DeviceGuard guard(src_device);
    detail::wait_stream(src_device, detail::current_stream_handle(src_device));
  }
  detail::DeviceGuard guard(dst_device);
  cudaStream_t stream = detail::current_stream_handle(dst_device);
  const bool direct = dst.is_contiguous() && dst.dtype() == src.dtype();
  const Tensor landing = direct ? dst : empty(src.shape(), {.dtype = src.dtype(), .device = dst.device()});
  EMBER_CUDA_CHECK(
      cudaMemcpyPeerAsync(landing.data_ptr(), dst_device, packed.data_ptr(), src_device, nbytes(packed), stream));
  if (!direct) copy_on_device(dst, landing);
  detail::wait_stream(dst_device, stream);
}

}  // namespace

namespace detail {
KernelArgs kernel_args(const char* op, std::initializer_list<const Tensor*> list) {
  const Tensor* tensors[4] = {};
  int n = 0;
  for (const Tensor* t : list) tensors[n++] = t;
  const Tensor& a = *tensors[0];
  const Shape& shape = a.shape();
  // Built innermost dim first, reversed at the end.
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides[4];
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    bool merge = !sizes.empty();
    for (int k = 0; k < n && merge; ++k) merge = tensors[k]->strides()[d] == strides[k].back() * sizes.back();
    if (merge) {
      sizes.back() *= shape[d];
      continue;
    }
    sizes.push_back(shape[d]);
    for (int k = 0; k < n; ++k) strides[k].push_back(tensors[k]->strides()[d]);
  }
  EMBER_CHECK_DEVICE(sizes.size() <= static_cast<size_t>(kernels::kMaxDims), op, ": ", a.dtype(), a.shape(), " has ",
                     sizes.size(), " dims that cannot be merged; CUDA kernels take at most ", kernels::kMaxDims,
                     " (make it contiguous first)");
  KernelArgs args;
  args.layout.ndim = static_cast<int>(sizes.size());
  args.layout.numel = a.numel();
  for (size_t j = 0; j < sizes.size(); ++j) {
    const size_t d = sizes.size() - 1 - j;  // back to outermost first
    args.layout.sizes[d] = sizes[j];
    for (int k = 0; k < n; ++k) args.operands[k].strides[d] = strides[k][j];
  }
  for (int k = 0; k < n; ++k) {
    args.operands[k].data = tensors[k]->data_ptr();
    args.operands[k].type = tensors[k]->dtype();
  }
  return args;
}
}  // namespace detail

Allocator& CudaBackend::allocator(int device_index) { return detail::device_allocator(device_index); }

void CudaBackend::synchronize(int device_index) { detail::wait_device(device_index); }

void CudaBackend::copy(const Tensor& dst, const Tensor& src, bool non_blocking) {
  if (dst.numel() == 0) return;
  const Device d = dst.device(), s = src.device();
  if (d.is_cuda() && s.is_cuda()) {
    if (d == s) copy_on_device(dst, src);
    else copy_between_devices(dst, src);
  } else if (d.is_cuda()) {
    copy_host_to_device(dst, src, non_blocking);
  } else {
    copy_device_to_host(dst, src, non_blocking);
  }
}

void CudaBackend::fill(const Tensor& dst, double v) {
  if (dst.numel() == 0) return;
  const int device = dst.device().index();
  detail::DeviceGuard guard(device);
  KernelArgs k = kernel_args("fill", {&dst});
  kernels::launch_fill(k.operands[0], v, k.layout, detail::current_stream_handle(device));
}

void CudaBackend::arange(const Tensor& out, double start, double step) {
  if (out.numel() == 0) return;
  const int device = out.device().index();
  detail::DeviceGuard guard(device);
  kernels::launch_arange(out.dtype(), out.data_ptr(), out.numel(), start, step, detail::current_stream_handle(device));
}

namespace detail {
// Declared in cuda_backend.h. requires: t is a CPU tensor and CUDA is usable (pin_memory checks).
Tensor pin(const Tensor& t) {
  auto storage = std::make_shared<StorageImpl>(nbytes(t), host_allocator());
  storage->pinned = true;
  Tensor out(std::make_shared<TensorImpl>(std::move(storage), 0, t.shape(), contiguous_strides(t.shape()), t.dtype()));
  EMBER_INTERNAL_ASSERT(out.is_cpu(), "the pinned host allocator must report the CPU device");
  if (t.numel()) backend_for(Device::cpu()).copy(out, t);
  return out;
}
}  // namespace detail

}  // namespace ember::cuda
