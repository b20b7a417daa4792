// defines: the non-template parts of DataLoader: option checks, collating one field, pinning, delivery to
// the device (plain, or on a side stream: DeviceFeeder).
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
  // pin_memory: nothing to check; without CUDA it is a documented no-op.
}

Tensor collate_field(const std::vector<Tensor>& ts, const char* field) {
  size_t defined = 0;
  for (const Tensor& t : ts) defined += t.defined();
  if (defined == 0) return {};
  EMBER_CHECK_VALUE(defined == ts.size(), "DataLoader: cannot collate ", field, ": ", ts.size() - defined, " of ",
                    ts.size(), " examples in the batch have an undefined ", field);
  try {
    return raw::stack(ts, 0);
  } catch (const ShapeError& e) {
    throw ShapeError(ember::detail::str("DataLoader: cannot collate the examples' ", field,
                                        " into a batch (every example's ", field,
                                        " needs the same shape): ", e.what()));
  }
}

Batch deliver(Batch b, const DataLoaderOptions& o) {
  if (o.device.is_cpu()) return b;
  if (b.x.defined()) b.x = raw::to_device(b.x, o.device);
  if (b.y.defined()) b.y = raw::to_device(b.y, o.device);
  return b;
}

bool pinning(const DataLoaderOptions& o) { return o.pin_memory && cuda::is_available(); }

Batch pin(Batch b) {
  if (b.x.defined()) b.x = b.x.pin_memory();
  if (b.y.defined()) b.y = b.y.pin_memory();
  return b;
}

DeviceFeeder::DeviceFeeder(Device device) : device_(device), side_(cuda::Stream::create(device.index())) {}

void DeviceFeeder::start(const Batch& host) {
  cuda::StreamGuard guard(side_);  // the device memory is allocated on, and the copy queued on, the side stream
  batch_.x = host.x.defined() ? raw::to_device(host.x, device_, /*non_blocking=*/true) : Tensor();
  batch_.y = host.y.defined() ? raw::to_device(host.y, device_, /*non_blocking=*/true) : Tensor();
  ready_.record(side_);
  busy_ = true;
}

Batch DeviceFeeder::finish() {
  const cuda::Stream cur = cuda::current_stream(device_.index());
  ready_.block(cur);  // the caller's later work waits for the copy, the host does not
  // The memory was allocated on the side stream: without this, freeing the batch would let the side
  // stream's next allocation reuse it while the caller's work may still be reading it.
  if (batch_.x.defined()) batch_.x.record_stream(cur);
  if (batch_.y.defined()) batch_.y.record_stream(cur);
  busy_ = false;
  return std::exchange(batch_, Batch{});
}

}  // namespace ember::data::detail
