// defines: current_stream_handle(device), the calling thread's current stream as the raw handle that the
// backend and the caching allocator pass to CUDA calls. Private to cuda/src; no CUDA headers.
#pragma once

struct CUstream_st;

namespace ember::cuda::detail {

// The calling thread's current stream on `device` (nullptr: the legacy default stream, the default).
// requires: 0 <= device < device_count() (no checks here: it is called on every allocation and copy).
CUstream_st* current_stream_handle(int device);

}  // namespace ember::cuda::detail
