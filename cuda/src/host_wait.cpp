// defines: host_wait.h — the counted host waits, and the range checks that record a failure on the GPU without the
// host waiting, thrown by the next wait.
#include "host_wait.h"

#include <array>
#include <atomic>
#include <mutex>
#include <new>
#include <string>

#include "check.h"
#include "device_guard.h"
#include "ember/core/error.h"
#include "kernels/launch.h"

namespace ember::cuda::detail {
namespace {

std::atomic<uint64_t> g_waits{0};

// What the host keeps of a queued check until it is known to have passed: its number, device and message. A
// ring: 4096 checks queued between two waits would be needed to overwrite one that then fails.
struct QueuedCheck {
  uint32_t number = 0;
  int device = -1;
  RangeMessage message;
};
constexpr size_t kRing = 4096;

struct Checks {
  std::mutex mu;
  std::array<QueuedCheck, kRing> ring;
  uint32_t next = 1;
  // One record for the process, in mapped pinned host memory (under unified addressing every GPU writes it at
  // this address): the host reads a failure without a copy, so a wait that finds none costs one load.
  std::atomic<kernels::RangeCheckRecord*> record{nullptr};
};
Checks& checks() {
  static Checks* c = new Checks();  // never destroyed: waits may run in static destructors
  return *c;
}

kernels::RangeCheckRecord* record(Checks& c) {  // under c.mu
  if (kernels::RangeCheckRecord* r = c.record.load()) return r;
  void* host = nullptr;
  EMBER_CUDA_CHECK(
      cudaHostAlloc(&host, sizeof(kernels::RangeCheckRecord), cudaHostAllocMapped | cudaHostAllocPortable));
  auto* r = new (host) kernels::RangeCheckRecord();
  c.record.store(r);
  return r;
}

void after_wait() {
  g_waits.fetch_add(1, std::memory_order_relaxed);
  raise_recorded_failure();
}

}  // namespace

void wait_stream(int device, cudaStream_t stream) {
  DeviceGuard g(device);
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
  after_wait();
}
void wait_device(int device) {
  DeviceGuard g(device);
  EMBER_CUDA_CHECK(cudaDeviceSynchronize());
  after_wait();
}
void wait_event(cudaEvent_t event) {
  EMBER_CUDA_CHECK(cudaEventSynchronize(event));
  after_wait();
}
void count_internal_wait() { g_waits.fetch_add(1, std::memory_order_relaxed); }
uint64_t host_sync_count() { return g_waits.load(std::memory_order_relaxed); }

void defer_range_check(int device, cudaStream_t stream, const int64_t* minmax, int64_t lo, int64_t hi,
                       const RangeMessage& message) {
  Checks& c = checks();
  std::lock_guard<std::mutex> lock(c.mu);
  kernels::RangeCheckRecord* r = record(c);
  const uint32_t number = c.next;
  c.next = c.next + 1 == 0 ? 1 : c.next + 1;  // 0 marks an empty slot
  c.ring[number % kRing] = {number, device, message};
  DeviceGuard g(device);
  kernels::launch_check_range(minmax, lo, hi, number, r, stream);
}

void raise_recorded_failure() {
  Checks& c = checks();
  volatile kernels::RangeCheckRecord* r = c.record.load();
  if (r == nullptr || r->failed == 0) return;
  std::atomic_thread_fence(std::memory_order_acquire);
  const int64_t lo = r->min, hi = r->max;
  const uint32_t number = r->check;
  QueuedCheck q;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    QueuedCheck& slot = c.ring[number % kRing];
    if (slot.number == number) q = std::move(slot);
    slot = {};
    r->failed = 0;
    r->claimed = 0;  // the next failure may record itself
  }
  const std::string what =
      q.message ? q.message(lo, hi)
                : ::ember::detail::str("an index check queued on the GPU failed: values from ", lo, " to ", hi,
                                       " (its message was overwritten by 4096 later checks)");
  EMBER_CHECK_INDEX(false, what, " (checked on cuda:", q.device, " without the host waiting, and reported at this ",
                    "synchronisation: the work queued in between skipped the out-of-range values)");
}

}  // namespace ember::cuda::detail
