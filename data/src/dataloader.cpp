// defines: the non-template parts of DataLoader: option checks and the tensor moves its templates call (kept
// here so that the header needs no raw ops).
#include "ember/data/dataloader.h"

#include "ember/core/backend.h"
#include "ember/core/raw_ops.h"
#include "ember/cuda/cuda.h"

namespace ember::data::detail {

void check_loader_options(const DataLoaderOptions& o) {
  EMBER_CHECK_VALUE(o.batch_size > 0, "DataLoader: batch_size must be > 0, got ", o.batch_size);
  EMBER_CHECK_VALUE(o.num_workers >= 0, "DataLoader: num_workers must be >= 0, got ", o.num_workers);
  EMBER_CHECK_VALUE(o.prefetch >= 1, "DataLoader: prefetch must be >= 1, got ", o.prefetch);
  EMBER_CHECK_VALUE(!(o.sampler && o.shuffle), "DataLoader: .sampler and .shuffle exclude each other (the sampler ",
                    "decides the order; a DistributedSampler shuffles with its own option)");
  if (!o.device.is_cpu()) {
    // backend_for throws DeviceError saying why the device is unusable (no CUDA build, no GPU, no driver).
    try {
      (void)backend_for(o.device);
    } catch (const DeviceError& e) {
      throw DeviceError(ember::detail::str("DataLoader: cannot deliver batches to .device = ", o.device,
                                           " because CUDA is unavailable: ", e.what()));
    }
  }
  EMBER_CHECK_VALUE(!o.persistent_workers || o.num_workers > 0,
                    "DataLoader: persistent_workers needs num_workers > 0 (there are no workers to keep)");
  // pin_memory: nothing to check; without CUDA it is a documented no-op.
}

Tensor to_device(const Tensor& t, Device device, bool non_blocking) { return raw::to_device(t, device, non_blocking); }

Tensor pinned(const Tensor& t) { return t.pin_memory(); }

cuda::Stream current_stream(Device device) { return cuda::current_stream(device.index()); }

bool pinning(const DataLoaderOptions& o) { return o.pin_memory && cuda::is_available(); }

}  // namespace ember::data::detail
