// defines: the non-template parts of DataLoader: option checks and the tensor moves its templates call (kept
// here so that the header needs no raw ops).
#include "ember/data/dataloader.h"

#include <cstring>
#include <map>

#include "ember/core/backend.h"
#include "ember/core/raw_ops.h"
#include "ember/cuda/cuda.h"

namespace ember::data::detail {

Tensor u64_tensor(uint64_t v) {
  int64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  return tensor<int64_t>({bits}, Shape{});
}

LoaderState parse_loader_state(const std::vector<std::pair<std::string, Tensor>>& sd, int64_t batch_size) {
  std::map<std::string, int64_t> v;
  for (const auto& [name, t] : sd) {
    EMBER_CHECK_VALUE(t.defined() && t.numel() == 1 && !is_floating(t.dtype()), "DataLoader.load_state_dict: entry \"",
                      name, "\" must be a one-element integer tensor, got ",
                      t.defined() ? ember::detail::str(t.dtype(), t.shape()) : std::string("an undefined tensor"));
    v[name] = t.to_vector<int64_t>()[0];
  }
  for (const char* key : {"epoch", "batches", "seed", "batch_size"})
    EMBER_CHECK_VALUE(v.count(key), "DataLoader.load_state_dict: the state has no \"", key,
                      "\" entry (expected epoch, batches, seed, batch_size)");
  EMBER_CHECK_VALUE(v["epoch"] >= 0 && v["batches"] >= 0, "DataLoader.load_state_dict: negative epoch ", v["epoch"],
                    " or batches ", v["batches"]);
  EMBER_CHECK_VALUE(v["batch_size"] == batch_size, "DataLoader.load_state_dict: the state was saved with batch_size ",
                    v["batch_size"], " but this loader has batch_size ", batch_size,
                    "; the saved position would point at other samples");
  uint64_t seed = 0;
  const int64_t bits = v["seed"];
  std::memcpy(&seed, &bits, sizeof seed);
  return {static_cast<uint64_t>(v["epoch"]), v["batches"], seed};
}

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
