// defines: data-parallel communication — dist::init (one process per rank, started by mpirun or srun),
// rank / world_size / local_rank / barrier, and collectives on tensors (all_reduce, broadcast, all_gather,
// reduce_scatter), each synchronous or, with .async_op, returning a Work to wait() on. CPU tensors travel over
// Open MPI, CUDA tensors over NCCL (bootstrapped over MPI). docs/distributed.md has the launch recipes.
//
//   ember::dist::init();                         // backend "auto"
//   auto t = ember::full({4}, ember::dist::rank());
//   ember::dist::all_reduce(t, {.op = ember::dist::ReduceOp::Sum});   // every rank: 0 + 1 + ... + (world-1)
//
// Note [Collective timeout]: every collective must be entered by every rank, in the same order. A rank that
// waits longer than the timeout (InitOptions::timeout_s) for the others throws DistError naming the
// collective, its number and the ranks that did not arrive. The group is then broken: later collectives
// throw at once, and finalize() ends the whole job (MPI_Abort) if the late ranks never arrive, so no rank
// hangs forever. A rank that dies is noticed by mpirun, which stops the job.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/core/error.h"
#include "ember/core/tensor.h"

namespace ember::dist {

// A failure of the distributed runtime: not initialised, a timeout, an engine error.
class DistError : public Error {
 public:
  using Error::Error;
};

struct InitOptions {
  // "mpi": Open MPI, CPU tensors only. "nccl": NCCL for CUDA tensors (needs CUDA; MPI still bootstraps it and
  // carries CPU tensors). "auto": MPI, plus NCCL when CUDA is available. With NCCL, init makes CUDA device
  // local_rank() % device_count() current.
  std::string backend = "auto";
  double timeout_s = 1800;  // Note [Collective timeout]
};

// Starts the distributed runtime; rank and world size come from the launcher (mpirun, srun with PMIx). A
// process started without a launcher is a world of one. Throws DistError when the backend cannot start, or
// when already initialised.
void init(const InitOptions& options = {});
bool is_initialized();
// Stops it (also done at exit). Collectives still running are awaited first (up to the timeout).
void finalize();

int rank();
int world_size();
int local_rank();       // rank among the processes on this host (which GPU to use)
std::string backend();  // "mpi", "mpi+nccl" or "self" (a world of one without MPI)
void set_timeout(double seconds);

enum class ReduceOp { Sum, Avg, Max, Min };

// A running collective. wait() blocks until it is done (and rethrows its failure); the tensors it was given
// must not be read or written before. A Work of a synchronous call is already done.
class Work {
 public:
  struct State;
  Work() = default;
  explicit Work(std::shared_ptr<State> s) : s_(std::move(s)) {}
  void wait();
  bool is_completed() const;
  // Seconds from the start of the transfer to its end (measured by the engine's thread; 0 before done).
  double duration_s() const;

 private:
  std::shared_ptr<State> s_;
};

struct CollectiveOptions {
  ReduceOp op = ReduceOp::Sum;  // ignored by broadcast and all_gather
  bool async_op = false;
};

// In place: every rank's t becomes op over the ranks' t. Sum/Max/Min for every dtype (bool: or/or/and), Avg for
// floating dtypes. Same shape, dtype and device on every rank.
Work all_reduce(Tensor& t, const CollectiveOptions& o = {});
// In place: every rank's t becomes root's t.
Work broadcast(Tensor& t, int root, const CollectiveOptions& o = {});
// out[r] becomes rank r's t; out is resized to world_size() tensors of t's shape, dtype and device.
Work all_gather(std::vector<Tensor>& out, const Tensor& t, const CollectiveOptions& o = {});
std::vector<Tensor> all_gather(const Tensor& t);
// `out` becomes op over the ranks' in[rank()]; `in` holds world_size() tensors of out's shape.
Work reduce_scatter(Tensor& out, const std::vector<Tensor>& in, const CollectiveOptions& o = {});
// The same with the inputs stacked along dim 0: t is [world_size() * n, ...], the result [n, ...].
Tensor reduce_scatter(const Tensor& t, const CollectiveOptions& o = {});
void barrier();

}  // namespace ember::dist
