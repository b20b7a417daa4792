// defines: the MPI communication engine (libember_dist_mpi.so), Comm over MPI's non-blocking collectives on
// host buffers, and ember_dist_mpi_create, the entry point dist::init opens. Every call comes from dist's
// communication thread, so MPI is initialised with MPI_THREAD_FUNNELED from that thread.
//
// Failure detection runs on a duplicate of MPI_COMM_WORLD, so its messages never mix with the collectives':
// a rank asks "which collective have you reached?" (TAG_QUERY, the collective's number) and each rank answers
// (TAG_REPLY, the number of collectives it has started) from serve(), which dist calls while waiting.
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <thread>

#include "ember/core/error.h"
#include "ember/internal/comm.h"

namespace ember::dist::detail {
namespace {

constexpr int TAG_QUERY = 101;
constexpr int TAG_REPLY = 102;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw Error(ember::detail::str("MPI ", what, " failed: ", std::string(msg, len)));
}

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case kFloat32:
      return MPI_FLOAT;
    case kFloat64:
      return MPI_DOUBLE;
    case kInt64:
      return MPI_INT64_T;
    case kInt32:
      return MPI_INT32_T;
    case kUInt8:
      return MPI_UINT8_T;
    case kBool:
      return MPI_C_BOOL;
    default:
      break;  // half types are reduced as float32 by dist.cpp
  }
  throw DTypeError(ember::detail::str("MPI: no reduction for dtype ", d));
}

// MPI's logical operators for bool (its arithmetic ones are not defined on MPI_C_BOOL): sum and max are "or",
// min is "and", as in PyTorch.
MPI_Op mpi_op(CommOp op, DType d) {
  if (d == kBool) return op == CommOp::Min ? MPI_LAND : MPI_LOR;
  switch (op) {
    case CommOp::Sum:
      return MPI_SUM;
    case CommOp::Max:
      return MPI_MAX;
    case CommOp::Min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

// MPI counts are int: larger buffers are an error here rather than a silent truncation.
int as_count(int64_t n, const char* what) {
  EMBER_CHECK_VALUE(n >= 0 && n <= INT32_MAX, "MPI ", what, ": ", n, " elements exceed MPI's int count");
  return static_cast<int>(n);
}

class MpiComm final : public Comm {
 public:
  MpiComm() {
    int initialised = 0, finalised = 0;
    MPI_Finalized(&finalised);
    if (finalised)
      throw Error("MPI was already finalised in this process (by an earlier dist::finalize()); MPI cannot start twice");
    MPI_Initialized(&initialised);
    int provided = 0;
    if (!initialised) {
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owns_mpi_ = true;
      if (provided < MPI_THREAD_FUNNELED) {
        MPI_Finalize();
        throw Error("this MPI does not support MPI_THREAD_FUNNELED (dist's communication thread owns MPI)");
      }
    } else {
      // The application started MPI itself and may call it from its own thread too: only MULTIPLE is safe.
      MPI_Query_thread(&provided);
      if (provided < MPI_THREAD_MULTIPLE)
        throw Error(
            "MPI was initialised by the application without MPI_THREAD_MULTIPLE; dist calls MPI from its "
            "own communication thread, so initialise with MPI_Init_thread(MPI_THREAD_MULTIPLE) or let "
            "dist::init start MPI");
    }
    // Errors come back as codes (check() turns them into ember::Error) instead of aborting the job.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_dup(MPI_COMM_WORLD, &world_), "MPI_Comm_dup");
    check(MPI_Comm_dup(MPI_COMM_WORLD, &control_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(world_, &rank_);
    MPI_Comm_size(world_, &size_);
    MPI_Comm node;
    check(MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_free(&node);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  int local_rank() const override { return local_rank_; }

  Request start_all_reduce(void* buf, int64_t count, DType d, CommOp op) override {
    auto* r = new MPI_Request;
    check(MPI_Iallreduce(MPI_IN_PLACE, buf, as_count(count, "all_reduce"), mpi_type(d), mpi_op(op, d), world_, r),
          "MPI_Iallreduce");
    return r;
  }
  Request start_broadcast(void* buf, int64_t bytes, int root) override {
    auto* r = new MPI_Request;
    check(MPI_Ibcast(buf, as_count(bytes, "broadcast"), MPI_BYTE, root, world_, r), "MPI_Ibcast");
    return r;
  }
  Request start_all_gather(const void* in, void* out, int64_t bytes) override {
    auto* r = new MPI_Request;
    const int n = as_count(bytes, "all_gather");
    check(MPI_Iallgather(in, n, MPI_BYTE, out, n, MPI_BYTE, world_, r), "MPI_Iallgather");
    return r;
  }
  Request start_reduce_scatter(const void* in, void* out, int64_t count, DType d, CommOp op) override {
    auto* r = new MPI_Request;
    check(MPI_Ireduce_scatter_block(in, out, as_count(count, "reduce_scatter"), mpi_type(d), mpi_op(op, d), world_, r),
          "MPI_Ireduce_scatter_block");
    return r;
  }
  Request start_barrier() override {
    auto* r = new MPI_Request;
    check(MPI_Ibarrier(world_, r), "MPI_Ibarrier");
    return r;
  }
  bool test(Request req) override {
    auto* r = static_cast<MPI_Request*>(req);
    int done = 0;
    check(MPI_Test(r, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) delete r;
    return done != 0;
  }

  void serve(uint64_t reached) override {
    for (;;) {
      int pending = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, TAG_QUERY, control_, &pending, &st);
      if (!pending) return;
      uint64_t asked = 0;
      MPI_Recv(&asked, 1, MPI_UINT64_T, st.MPI_SOURCE, TAG_QUERY, control_, MPI_STATUS_IGNORE);
      replies_.push_back(reached);  // the buffer must outlive the send
      MPI_Request r;
      MPI_Isend(&replies_.back(), 1, MPI_UINT64_T, st.MPI_SOURCE, TAG_REPLY, control_, &r);
      MPI_Request_free(&r);
    }
  }

  std::vector<int> absent_ranks(uint64_t seq, double wait_s) override {
    std::vector<uint64_t> answers(size_, 0);
    std::vector<MPI_Request> recvs(size_, MPI_REQUEST_NULL);
    std::vector<int> answered(size_, 0);
    queries_.push_back(seq);  // the send buffer must outlive the send
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request s;
      MPI_Isend(&queries_.back(), 1, MPI_UINT64_T, r, TAG_QUERY, control_, &s);
      MPI_Request_free(&s);
      MPI_Irecv(&answers[r], 1, MPI_UINT64_T, r, TAG_REPLY, control_, &recvs[r]);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    for (;;) {
      bool all = true;
      for (int r = 0; r < size_; ++r) {
        if (r == rank_ || answered[r]) continue;
        MPI_Test(&recvs[r], &answered[r], MPI_STATUS_IGNORE);
        all = all && answered[r];
      }
      serve(seq);  // this rank has reached `seq`: it is the one waiting in it
      if (all || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::vector<int> absent;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      if (!answered[r]) {
        // Cancel and complete the receive here: a late answer must not land in `answers` after it is gone.
        MPI_Cancel(&recvs[r]);
        MPI_Wait(&recvs[r], MPI_STATUS_IGNORE);
        absent.push_back(r);
      } else if (answers[r] < seq) {
        absent.push_back(r);
      }
    }
    return absent;
  }

  void abort(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

  void finalize() override {
    MPI_Comm_free(&control_);
    MPI_Comm_free(&world_);
    if (owns_mpi_) MPI_Finalize();
  }

 private:
  MPI_Comm world_ = MPI_COMM_NULL, control_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  bool owns_mpi_ = false;
  // Send buffers of serve()'s answers and absent_ranks()' questions (a handful per failure; a deque, because
  // growing it never moves the elements that pending sends read).
  std::deque<uint64_t> replies_, queries_;
};

}  // namespace
}  // namespace ember::dist::detail

extern "C" __attribute__((visibility("default"))) ember::dist::detail::Comm* ember_dist_mpi_create(int version,
                                                                                                   std::string* why) {
  using namespace ember::dist::detail;
  if (version != kCommVersion) {
    *why = ember::detail::str("built for dist interface version ", kCommVersion, ", libember has ", version);
    return nullptr;
  }
  try {
    return new MpiComm();
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
}
