// defines: the non-template parts of DataLoader: option checks, collating one field, delivery to the device.
#include "ember/data/dataloader.h"

#include "ember/autograd/ops.h"
#include "ember/core/backend.h"

namespace ember::data::detail {

void check_loader_options(const DataLoaderOptions& o) {
  EMBER_CHECK_VALUE(o.batch_size > 0, "DataLoader: batch_size must be > 0, got ", o.batch_size);
  EMBER_CHECK_VALUE(o.num_workers >= 0, "DataLoader: num_workers must be >= 0, got ", o.num_workers);
  EMBER_CHECK_VALUE(o.prefetch >= 1, "DataLoader: prefetch must be >= 1, got ", o.prefetch);
  if (!o.device.is_cpu()) {
    // backend_for throws DeviceError saying why the device is unusable (no CUDA build, no GPU, no driver).
    try {
      (void)backend_for(o.device);
    } catch (const DeviceError& e) {
      throw DeviceError(ember::detail::str("DataLoader: cannot deliver batches to .device = ", o.device,
                                           " because CUDA is unavailable: ", e.what()));
    }
  }
  // pin_memory: nothing to check; it is a documented no-op until the CUDA backend exists.
}

Tensor collate_field(const std::vector<Tensor>& ts, const char* field) {
  size_t defined = 0;
  for (const Tensor& t : ts) defined += t.defined();
  if (defined == 0) return {};
  EMBER_CHECK_VALUE(defined == ts.size(), "DataLoader: cannot collate ", field, ": ", ts.size() - defined, " of ",
                    ts.size(), " examples in the batch have an undefined ", field);
  try {
    return stack(ts, 0);
  } catch (const ShapeError& e) {
    throw ShapeError(ember::detail::str("DataLoader: cannot collate the examples' ", field,
                                        " into a batch (every example's ", field, " needs the same shape): ", e.what()));
  }
}

Batch deliver(Batch b, const DataLoaderOptions& o) {
  if (o.device.is_cpu()) return b;
  if (b.x.defined()) b.x = b.x.to(o.device);
  if (b.y.defined()) b.y = b.y.to(o.device);
  return b;
}

}  // namespace ember::data::detail
