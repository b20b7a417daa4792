// defines: the plugin's host waits and its checks that do not wait. Every place where the host waits for a GPU
// (a copy to the host, synchronize, a stream or event wait) goes through wait_stream / wait_device / wait_event,
// so that
//   1. each wait is counted: host_sync_count() (public: cuda::host_sync_count()) lets a test prove that a training
//      step makes none;
//   2. a failure that a kernel recorded without the host waiting (defer_range_check: index values out of range,
//      checked on the device) is thrown as an ember::IndexError by the first wait after it, naming the call that
//      queued the check. Like PyTorch's device-side asserts, but the CUDA context stays usable.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "ember/core/backend.h"

namespace ember::cuda::detail {

// The host waits: count, wait, then throw a recorded failure if there is one.
void wait_stream(int device, cudaStream_t stream);
void wait_device(int device);
void wait_event(cudaEvent_t event);
// A wait inside the plugin's own machinery (the allocators): counted, but throws nothing recorded.
void count_internal_wait();
uint64_t host_sync_count();

// Queues on `stream` a check that minmax ([2] int64 on `device`: the min and max of some index values) lies in
// [lo, hi); returns at once. A failure is thrown by the next wait as IndexError(message(min, max) + where).
void defer_range_check(int device, cudaStream_t stream, const int64_t* minmax, int64_t lo, int64_t hi,
                       const RangeMessage& message);
// Throws the failure a check recorded, if any, and clears it.
void raise_recorded_failure();

}  // namespace ember::cuda::detail
