// defines: the NCCL communication engine (libember_dist_nccl.so), Comm over NCCL on CUDA buffers, and its two
// entry points: ember_dist_nccl_unique_id (rank 0 makes the id that dist::init broadcasts over MPI) and
// ember_dist_nccl_create. A collective is queued on the caller's current CUDA stream (so it follows the
// kernels that produced its buffer and precedes those that read it); its request is an event recorded after
// it, polled by test(). Compiled here; it has not run on a GPU yet (docs/gpu-results.md).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>

#include "ember/core/error.h"
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

class NcclComm final : public Comm {
 public:
  NcclComm(int rank, int world, int device, const ncclUniqueId& id) : rank_(rank), world_(world), device_(device) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(ncclCommInitRank(&comm_, world, id, rank), "ncclCommInitRank");
  }
  ~NcclComm() override {
    if (comm_) ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  int local_rank() const override { return device_; }

  Request start_all_reduce(void* buf, int64_t count, DType d, CommOp op) override {
    auto s = stream();
    check(ncclAllReduce(buf, buf, static_cast<size_t>(count), nccl_type(d), nccl_op(op, d), comm_, s), "ncclAllReduce");
    return mark(s);
  }
  Request start_broadcast(void* buf, int64_t bytes, int root) override {
    auto s = stream();
    check(ncclBroadcast(buf, buf, static_cast<size_t>(bytes), ncclUint8, root, comm_, s), "ncclBroadcast");
    return mark(s);
  }
  Request start_all_gather(const void* in, void* out, int64_t bytes) override {
    auto s = stream();
    check(ncclAllGather(in, out, static_cast<size_t>(bytes), ncclUint8, comm_, s), "ncclAllGather");
    return mark(s);
  }
  Request start_reduce_scatter(const void* in, void* out, int64_t count, DType d, CommOp op) override {
    auto s = stream();
    check(ncclReduceScatter(in, out, static_cast<size_t>(count), nccl_type(d), nccl_op(op, d), comm_, s),
          "ncclReduceScatter");
    return mark(s);
  }
  // NCCL has no barrier: an all-reduce of one element on a scratch buffer, which every rank must reach.
  Request start_barrier() override {
    if (!scratch_) check(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc");
    return start_all_reduce(scratch_, 1, kFloat32, CommOp::Sum);
  }
  bool test(Request r) override {
    auto ev = static_cast<cudaEvent_t>(r);
    const cudaError_t q = cudaEventQuery(ev);
    if (q == cudaSuccess) {
      cudaEventDestroy(ev);
      return true;
    }
    if (q != cudaErrorNotReady) check(q, "cudaEventQuery");
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
  static cudaStream_t stream() { return reinterpret_cast<cudaStream_t>(ember::cuda::current_stream().handle()); }
  static Request mark(cudaStream_t s) {
    cudaEvent_t ev;
    check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(ev, s), "cudaEventRecord");
    return ev;
  }

  ncclComm_t comm_ = nullptr;
  int rank_, world_, device_;
  void* scratch_ = nullptr;
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
