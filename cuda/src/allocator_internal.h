// defines: the memory entry points that the rest of cuda/src uses: each device's caching allocator (for
// StorageImpl), record_stream for cross-stream use of a device block, and the cached pinned host allocator
// with host_record_use for blocks read or written by asynchronous copies. Private to cuda/src; no CUDA headers.
//
//   Storage s = std::make_shared<StorageImpl>(nbytes, device_allocator(1));   // on cuda:1, current stream
//   record_stream(s->data, side_stream);          // `side_stream` also uses it: reuse waits for its work
//   host_record_use(pinned_src, stream);          // after cudaMemcpyAsync(dst, pinned_src, ..., stream)
#pragma once

struct CUstream_st;

namespace ember {
class Allocator;
namespace cuda {
struct HostMemoryStats;
}
}  // namespace ember

namespace ember::cuda::detail {

// The caching allocator of `device`; allocate() serves the calling thread's current stream on that device.
// Throws DeviceError when CUDA is unusable or the index is out of range.
ember::Allocator& device_allocator(int device);

// Marks that work on `stream` uses the live device block starting at `ptr` (a pointer returned by a device
// allocator). When the block is freed it is reused only after that work completes. A no-op for nullptr,
// for the block's own allocation stream, and for memory the caching allocator does not own (from_blob).
void record_stream(void* ptr, CUstream_st* stream);

// The cached pinned host allocator (cudaHostAlloc); device() is the CPU. allocate() throws DeviceError
// when CUDA is unusable.
ember::Allocator& host_allocator();

// Marks that work just enqueued on `stream` (an async copy) reads or writes the pinned block that contains
// `ptr` (any address inside it). Once freed, the block is not handed out again before that work is done.
// A no-op for nullptr and for memory that is not from host_allocator() (e.g. pageable memory).
void host_record_use(void* ptr, CUstream_st* stream);
// The pinned host allocator's statistics (memory.h), their peak reset, and the release of its cached blocks
// (waits for copies that still use them).
HostMemoryStats host_stats();
void host_reset_peak();
void host_release_cache();

}  // namespace ember::cuda::detail
