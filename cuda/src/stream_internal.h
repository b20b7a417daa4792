// defines: the plugin's streams: each thread's current stream per device, as the raw handle that the backend
// and the caching allocator pass to CUDA calls, and each device's pool of streams. Private to cuda/src; no
// CUDA headers. See Note [Default stream] in ember/cuda/stream.h.
#pragma once

struct CUstream_st;

namespace ember::cuda::detail {

// The calling thread's current stream on `device` (nullptr: the legacy default stream, the default).
// requires: 0 <= device < num_devices() (no checks here: it is called on every allocation and copy).
CUstream_st* current_stream_handle(int device);
// Makes `stream` the calling thread's current stream on `device` (checked: DeviceError past the supported
// number of devices).
void set_current_stream_handle(int device, CUstream_st* stream);
// The next non-blocking stream of `device`'s pool of 32, taken round-robin; the pool is created on first use
// and never destroyed, so a handle never dangles (PyTorch's stream pool).
CUstream_st* pool_stream(int device);

}  // namespace ember::cuda::detail
