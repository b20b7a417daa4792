// defines: cuda::Event (a CUDA event, for ordering work across streams and for timing) and EventOptions.
// No CUDA headers: the raw handle is a CUevent_st* (cudaEvent_t is `CUevent_st*` in CUDA's own headers).
//
//   cuda::Event start({.enable_timing = true}), stop({.enable_timing = true});
//   start.record();
//   Tensor y = matmul(a, b);
//   stop.record();
//   float ms = start.elapsed_ms(stop);      // waits for both events
//
//   cuda::Event ready;
//   ready.record(side);                      // after the copy queued on `side`
//   ready.block(cuda::current_stream());     // later work on the current stream waits for it
//
// The CUDA event is created on the first record(), on the recording stream's device; an event that was
// never recorded counts as complete (query() is true, synchronize() and block() do nothing).
#pragma once
#include "ember/cuda/stream.h"

struct CUevent_st;

namespace ember::cuda {

struct EventOptions {
  bool enable_timing = false;  // timing costs a little on every record; leave it off for pure ordering
};

class Event {
 public:
  explicit Event(EventOptions options = {}) : timing_(options.enable_timing) {}
  ~Event();  // never throws
  Event(Event&& o) noexcept : event_(o.event_), device_(o.device_), timing_(o.timing_) { o.event_ = nullptr; }
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Captures the work queued on `stream` so far; a later record replaces the earlier capture. An event
  // belongs to the device of the stream it was first recorded on.
  void record(const Stream& stream);
  void record();  // on the current stream of the current device
  // Waits until the captured work is done.
  void synchronize() const;
  // True when the captured work is done (never waits).
  bool query() const;
  // Milliseconds from this event to `end`; both need enable_timing and a record(); waits for both.
  float elapsed_ms(const Event& end) const;
  // Makes all work queued on `stream` after this call wait for the captured work (cudaStreamWaitEvent);
  // the host does not wait.
  void block(const Stream& stream) const;

  bool recorded() const { return event_ != nullptr; }
  CUevent_st* handle() const { return event_; }
  int device_index() const { return device_; }

 private:
  CUevent_st* event_ = nullptr;  // created by the first record()
  int device_ = -1;
  bool timing_ = false;
};

}  // namespace ember::cuda
