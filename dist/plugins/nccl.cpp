// defines: the NCCL communication engine (libember_dist_nccl.so), Comm over NCCL on CUDA buffers, and its two
// entry points: ember_dist_nccl_unique_id (rank 0 makes the id that dist::init broadcasts over MPI) and
// ember_dist_nccl_create. A collective is queued on the caller's current CUDA stream (so it follows the
// kernels that produced its buffer and precedes those that read it); its request is an event recorded after
// it, polled by test(). Every call runs on the communicator's own device, whatever the caller's current device.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "ember/core/error.h"
#include "ember/core/factory.h"
#include "ember/cuda/stream.h"
#include "ember/internal/comm.h"

namespace ember::dist::detail {
namespace {

void check(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) throw Error(ember::detail::str("NCCL ", what, " failed: ", ncclGetErrorString(rc)));
}
void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw Error(ember::detail::str("CUDA ", what, " failed: ", cudaGetErrorString(rc)));
}

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case kFloat32:
      return ncclFloat32;
    case kFloat64:
      return ncclFloat64;
    case kFloat16:
      return ncclFloat16;
    case kBFloat16:
      return ncclBfloat16;
    case kInt64:
      return ncclInt64;
    case kInt32:
      return ncclInt32;
    case kUInt8:
    case kBool:
      return ncclUint8;
  }
  throw DTypeError(ember::detail::str("NCCL: unsupported dtype ", d));
}

// bool as uint8 0/1: "or" is max, "and" is min (as PyTorch).
ncclRedOp_t nccl_op(CommOp op, DType d) {
  if (d == kBool) return op == CommOp::Min ? ncclMin : ncclMax;
  switch (op) {
    case CommOp::Sum:
      return ncclSum;
    case CommOp::Max:
      return ncclMax;
    case CommOp::Min:
      return ncclMin;
  }
  return ncclSum;
}

// Makes `device` current for a scope (events are created, and collectives queued, on the communicator's device,
// whichever device the calling thread had current).
class OnDevice {
 public:
  explicit OnDevice(int device) {
    check(cudaGetDevice(&prev_), "cudaGetDevice");
    if (prev_ != device) check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~OnDevice() { cudaSetDevice(prev_); }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int prev_ = 0;
};

class NcclComm final : public Comm {
 public:
  NcclComm(int rank, int world, int device, const ncclUniqueId& id) : rank_(rank), world_(world), device_(device) {
    OnDevice on(device);
    check(ncclCommInitRank(&comm_, world, id, rank), "ncclCommInitRank");
  }
  ~NcclComm() override {
    OnDevice on(device_);
    for (cudaEvent_t ev : pending_) cudaEventDestroy(ev);
    if (comm_) ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  int local_rank() const override { return device_; }

  Request start_all_reduce(void* buf, int64_t count, DType d, CommOp op) override {
    OnDevice on(device_);
    auto s = stream();
    check(ncclAllReduce(buf, buf, static_cast<size_t>(count), nccl_type(d), nccl_op(op, d), comm_, s), "ncclAllReduce");
    return mark(s);
  }
  Request start_broadcast(void* buf, int64_t bytes, int root) override {
    OnDevice on(device_);
    auto s = stream();
    check(ncclBroadcast(buf, buf, static_cast<size_t>(bytes), ncclUint8, root, comm_, s), "ncclBroadcast");
    return mark(s);
  }
  Request start_all_gather(const void* in, void* out, int64_t bytes) override {
    OnDevice on(device_);
    auto s = stream();
    check(ncclAllGather(in, out, static_cast<size_t>(bytes), ncclUint8, comm_, s), "ncclAllGather");
    return mark(s);
  }
  Request start_reduce_scatter(const void* in, void* out, int64_t count, DType d, CommOp op) override {
    OnDevice on(device_);
    auto s = stream();
    check(ncclReduceScatter(in, out, static_cast<size_t>(count), nccl_type(d), nccl_op(op, d), comm_, s),
          "ncclReduceScatter");
    return mark(s);
  }
  // NCCL has no barrier: an all-reduce of one element on a scratch tensor (from Ember's caching allocator, freed
  // with the communicator), which every rank must reach.
  Request start_barrier() override {
    if (!scratch_.defined()) scratch_ = zeros({1}, {.device = Device::cuda(device_)});
    return start_all_reduce(scratch_.data_ptr(), 1, kFloat32, CommOp::Sum);
  }
  // A request is an event recorded after its collective; it is destroyed once seen complete, and a finished (or
  // unknown) request tests complete from then on.
  bool test(Request r) override {
    auto ev = static_cast<cudaEvent_t>(r);
    if (pending_.count(ev) == 0) return true;
    OnDevice on(device_);
    const cudaError_t q = cudaEventQuery(ev);
    if (q == cudaSuccess) {
      pending_.erase(ev);
      cudaEventDestroy(ev);
      return true;
    }
    if (q != cudaErrorNotReady) check(q, "cudaEventQuery");
    (void)cudaGetLastError();  // "not ready" is an answer
    ncclResult_t async = ncclSuccess;
    check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
    check(async, "collective (asynchronous error)");
    return false;
  }
  void abort(int code) override {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    std::_Exit(code);
  }
  void finalize() override {}

 private:
  // The calling thread's current stream on the communicator's device (so a collective follows the kernels that
  // produced its buffer there).
  cudaStream_t stream() const { return reinterpret_cast<cudaStream_t>(ember::cuda::current_stream(device_).handle()); }
  Request mark(cudaStream_t s) {
    cudaEvent_t ev;
    check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(ev, s), "cudaEventRecord");
    pending_.insert(ev);
    return ev;
  }

  ncclComm_t comm_ = nullptr;
  int rank_, world_, device_;
  std::unordered_set<cudaEvent_t> pending_;  // requests not yet seen complete (one thread polls: no lock)
  Tensor scratch_;
};

}  // namespace
}  // namespace ember::dist::detail

extern "C" __attribute__((visibility("default"))) bool ember_dist_nccl_unique_id(void* out, std::string* why) {
  static_assert(sizeof(ncclUniqueId) == ember::dist::detail::kNcclUniqueIdBytes, "NCCL's unique id size changed");
  ncclUniqueId id;
  const ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) {
    *why = ncclGetErrorString(rc);
    return false;
  }
  std::memcpy(out, &id, sizeof id);
  return true;
}

extern "C" __attribute__((visibility("default"))) ember::dist::detail::Comm* ember_dist_nccl_create(
    int version, int rank, int world, int device, const void* unique_id, std::string* why) {
  using namespace ember::dist::detail;
  if (version != kCommVersion) {
    *why = ember::detail::str("built for dist interface version ", kCommVersion, ", libember has ", version);
    return nullptr;
  }
  try {
    ncclUniqueId id;
    std::memcpy(&id, unique_id, sizeof id);
    return new NcclComm(rank, world, device, id);
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
}
