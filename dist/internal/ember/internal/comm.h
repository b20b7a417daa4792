// defines: Comm, what the dist module asks of a communication engine, and the entry points of the plugins
// that provide one: libember_dist_mpi.so (Open MPI, host buffers) and libember_dist_nccl.so (NCCL, device
// buffers). They are plugins for the reason the CUDA backend is one (ember/internal/cuda_hooks.h): libember
// links neither MPI nor NCCL, so a program that never calls dist::init runs where neither is installed.
//
// Contracts:
// - Buffers are contiguous and of one dtype; counts are elements, sizes bytes. The caller keeps them alive
//   and untouched until the request is done.
// - start_*() return at once with a request; test() makes progress and is true (and the request freed) once
//   it is done. Every rank must start the same collectives in the same order.
// - MPI: every call comes from one thread (dist's communication thread), which initialised MPI.
//   NCCL: calls come from the thread that owns the tensors; requests are ordered on the caller's current
//   CUDA stream.
// - Errors are thrown as ember::Error with the engine's own message.
// Private to dist/ (not installed).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ember/core/dtype.h"

namespace ember::dist::detail {

inline constexpr int kCommVersion = 1;

enum class CommOp { Sum, Max, Min };  // Avg is Sum followed by a division (dist.cpp)
using Request = void*;

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int local_rank() const = 0;  // rank among the processes on this host

  virtual Request start_all_reduce(void* buf, int64_t count, DType dtype, CommOp op) = 0;
  virtual Request start_broadcast(void* buf, int64_t bytes, int root) = 0;
  // out holds world_size() blocks of `bytes`, rank r's input in block r.
  virtual Request start_all_gather(const void* in, void* out, int64_t bytes) = 0;
  // in holds world_size() blocks of `count`; rank r gets block r reduced over all ranks.
  virtual Request start_reduce_scatter(const void* in, void* out, int64_t count, DType dtype, CommOp op) = 0;
  virtual Request start_barrier() = 0;
  virtual bool test(Request r) = 0;

  // Failure detection (MPI; others may keep the defaults). serve() answers other ranks' "which collective
  // have you reached?" queries with `reached` (the number of collectives this rank has started); it is
  // called often while waiting. absent_ranks() asks every other rank and returns those that have not reached
  // collective `seq` or did not answer within `wait_s` seconds.
  virtual void serve(uint64_t /*reached*/) {}
  virtual std::vector<int> absent_ranks(uint64_t /*seq*/, double /*wait_s*/) { return {}; }
  // Ends the whole job (all ranks) after an unrecoverable failure.
  virtual void abort(int code) = 0;
  // Releases the engine (MPI_Finalize); no call follows.
  virtual void finalize() = 0;
};

// MPI plugin: `extern "C" Comm* ember_dist_mpi_create(int version, std::string* why)`; null with a reason
// when the version differs or MPI cannot start.
using MpiEntry = Comm* (*)(int version, std::string* why);
inline constexpr const char* kMpiEntryName = "ember_dist_mpi_create";

// NCCL plugin: `extern "C" Comm* ember_dist_nccl_create(int version, int rank, int world, int device,
// const void* unique_id, std::string* why)`; `unique_id` is the 128 bytes made by ember_dist_nccl_unique_id
// on rank 0 and broadcast to every rank over MPI.
using NcclEntry = Comm* (*)(int version, int rank, int world, int device, const void* unique_id, std::string* why);
using NcclIdEntry = bool (*)(void* unique_id_out, std::string* why);
inline constexpr const char* kNcclEntryName = "ember_dist_nccl_create";
inline constexpr const char* kNcclIdEntryName = "ember_dist_nccl_unique_id";
inline constexpr int kNcclUniqueIdBytes = 128;

}  // namespace ember::dist::detail
