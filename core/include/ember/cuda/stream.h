// defines: cuda::Stream (a cheap handle to a CUDA stream of one device), the calling thread's current stream
// per device (current_stream, default_stream, set_current_stream) and StreamGuard, which makes a stream
// current for one scope. Every CUDA op and copy runs on the current stream of its tensors' device.
// No CUDA headers: the raw handle is a CUstream_st* (cudaStream_t is `CUstream_st*` in CUDA's own headers).
//
//   cuda::Stream side = cuda::Stream::create();
//   {
//     cuda::StreamGuard g(side);                         // ops and copies in this scope run on `side`
//     Tensor y = x_pinned.to(Device::cuda(), /*non_blocking=*/true);
//   }
//   side.synchronize();
//
// Note [Default stream]: unless a thread sets another one, its current stream is the *legacy default
// stream* (handle nullptr). Work on it is ordered with the work of every other blocking stream of the
// device, so code that never mentions streams sees each op run after the previous one — the behaviour
// PyTorch users expect. Streams from Stream::create() are non-blocking: they run concurrently with the
// default stream, and ordering across them is the user's job (cuda::Event::block, Tensor::record_stream).
#pragma once

struct CUstream_st;

namespace ember::cuda {

class Stream {
 public:
  // Wraps an existing stream of `device` without owning it (the caller keeps it alive); nullptr is the
  // legacy default stream. Use Stream::create() for a new one.
  Stream(CUstream_st* handle, int device) : handle_(handle), device_(device) {}

  // A non-blocking stream of `device` (-1: the current device), taken round-robin from a pool of 32 per
  // device that is created on first use and never destroyed, so a Stream never dangles (PyTorch's stream
  // pool). More than 32 "new" streams share the pool's streams: still correct, just less concurrent.
  static Stream create(int device = -1);

  CUstream_st* handle() const { return handle_; }
  int device_index() const { return device_; }
  bool is_default() const { return handle_ == nullptr; }
  // Waits until all work queued on this stream is done.
  void synchronize() const;
  // True when all work queued on this stream is done (never waits).
  bool query() const;

  bool operator==(const Stream& o) const { return handle_ == o.handle_ && device_ == o.device_; }
  bool operator!=(const Stream& o) const { return !(*this == o); }

 private:
  CUstream_st* handle_ = nullptr;
  int device_ = 0;
};

// The calling thread's current stream on `device` (-1: the current device); the legacy default stream
// until set_current_stream / StreamGuard says otherwise.
Stream current_stream(int device = -1);
// The legacy default stream of `device` (-1: the current device).
Stream default_stream(int device = -1);
// Makes `stream` the calling thread's current stream on its device (prefer StreamGuard).
void set_current_stream(const Stream& stream);

// Makes `stream` the current stream of its device, and its device the current device, for one scope;
// both are restored when the guard is destroyed (c10::cuda::CUDAStreamGuard).
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream prev_stream_{nullptr, 0};
  int prev_device_ = 0;
};

}  // namespace ember::cuda
