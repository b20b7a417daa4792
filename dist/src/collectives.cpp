// defines: dist.h's functions — the checks every collective makes, and how a tensor becomes an engine buffer:
// contiguous, and for MPI's reductions float32 in place of float16/bfloat16 (MPI has no half types), copied
// back by Work::wait() on the caller's thread.
#include <chrono>
#include <thread>

#include "ember/autograd/grad_mode.h"
#include "ember/core/factory.h"
#include "ember/cuda/cuda.h"
#include "runtime.h"

namespace ember::dist {
namespace {

using detail::CommOp;
using detail::Runtime;

CommOp comm_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max:
      return CommOp::Max;
    case ReduceOp::Min:
      return CommOp::Min;
    default:
      return CommOp::Sum;  // Avg: a sum, divided afterwards
  }
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "Sum";
    case ReduceOp::Avg:
      return "Avg";
    case ReduceOp::Max:
      return "Max";
    case ReduceOp::Min:
      return "Min";
  }
  return "?";
}

void check_tensor(const char* what, const Tensor& t) {
  EMBER_CHECK_VALUE(t.defined(), what, ": got an undefined tensor");
  EMBER_CHECK(t.is_cpu() || t.is_cuda(), DeviceError, what, ": unsupported device ", t.device());
}

void check_reduce(const char* what, const Tensor& t, ReduceOp op) {
  EMBER_CHECK(op != ReduceOp::Avg || is_floating(t.dtype()), DTypeError, what, ": ReduceOp::Avg needs a floating ",
              "dtype, got ", t.dtype(), t.shape(), " (use Sum and divide, or convert to float)");
}

// The dtype a reduction runs in on the engine of t's device: MPI lacks the half types.
DType wire_dtype(const Tensor& t) { return t.is_cpu() && is_reduced_float(t.dtype()) ? kFloat32 : t.dtype(); }

// A contiguous buffer holding t's values in `dtype`: t itself when it already is one.
Tensor buffer_of(const Tensor& t, DType dtype) {
  if (t.is_contiguous() && t.dtype() == dtype) return t;
  return t.to(dtype).contiguous();
}

Work submit(std::string what, const Tensor& on, std::function<detail::Request(detail::Comm&)> start,
            std::vector<Tensor> keep, std::function<void()> finish, bool async_op) {
  Runtime& rt = Runtime::get();
  Work w = on.is_cuda() ? rt.run_device(std::move(what), start, std::move(keep), std::move(finish))
                        : rt.run_host(std::move(what), std::move(start), std::move(keep), std::move(finish));
  if (!async_op) w.wait();
  return w;
}

}  // namespace

// --- Work
void Work::wait() {
  if (!s_) return;
  if (s_->device_comm) {
    // NCCL: poll the engine here; a collective that does not end within the timeout breaks the group.
    while (!s_->done) {
      if (s_->device_comm->test(s_->device_request)) {
        s_->duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - s_->started).count();
        s_->done = true;
        break;
      }
      if (std::chrono::steady_clock::now() - s_->started > std::chrono::duration<double>(s_->timeout_s)) {
        const std::string why =
            ember::detail::str(s_->what, " timed out after ", s_->timeout_s, " s on the NCCL engine");
        detail::Runtime::get().mark_failed(why);
        s_->done = true;
        s_->error = std::make_exception_ptr(DistError(why));
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  } else {
    std::unique_lock<std::mutex> l(s_->m);
    s_->cv.wait(l, [&] { return s_->done; });
  }
  if (s_->error) std::rethrow_exception(s_->error);
  if (s_->finish) {
    auto f = std::move(s_->finish);
    s_->finish = nullptr;
    NoGradGuard no_grad;
    f();
  }
  s_->keep.clear();
}

bool Work::is_completed() const {
  if (!s_) return true;
  if (s_->device_comm) {  // NCCL: ask the engine (only this thread polls it)
    if (!s_->done && s_->device_comm->test(s_->device_request)) {
      s_->duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - s_->started).count();
      s_->done = true;
    }
    return s_->done;
  }
  std::lock_guard<std::mutex> l(s_->m);
  return s_->done;
}

double Work::duration_s() const { return s_ ? s_->duration : 0.0; }

// --- the process group
void init(const InitOptions& options) { Runtime::get().init(options); }
bool is_initialized() { return Runtime::get().running(); }
void finalize() { Runtime::get().finalize(); }
int rank() { return Runtime::get().host().rank(); }
int world_size() { return Runtime::get().host().world_size(); }
int local_rank() { return Runtime::get().host().local_rank(); }
std::string backend() { return Runtime::get().backend_name(); }
void set_timeout(double seconds) {
  EMBER_CHECK_VALUE(seconds > 0, "dist::set_timeout: expected a positive number of seconds, got ", seconds);
  Runtime::get().set_timeout(seconds);
}

void barrier() {
  Runtime::get().run_host("barrier", [](detail::Comm& c) { return c.start_barrier(); }).wait();
}

// --- collectives
Work all_reduce(Tensor& t, const CollectiveOptions& o) {
  NoGradGuard no_grad;  // buffers and copies are not part of any graph
  check_tensor("all_reduce", t);
  check_reduce("all_reduce", t, o.op);
  Tensor buf = buffer_of(t, wire_dtype(t));
  const int world = world_size();
  const CommOp op = comm_op(o.op);
  auto start = [buf, op](detail::Comm& c) { return c.start_all_reduce(buf.data_ptr(), buf.numel(), buf.dtype(), op); };
  auto finish = [t, buf, avg = o.op == ReduceOp::Avg, world]() mutable {
    if (avg) buf.div_(static_cast<double>(world));
    if (!buf.is_same(t)) t.copy_(buf);
  };
  return submit(ember::detail::str("all_reduce(", op_name(o.op), ")"), t, start, {buf}, finish, o.async_op);
}

Work broadcast(Tensor& t, int root, const CollectiveOptions& o) {
  NoGradGuard no_grad;  // buffers and copies are not part of any graph
  check_tensor("broadcast", t);
  const int world = world_size();
  EMBER_CHECK(root >= 0 && root < world, IndexError, "broadcast: root ", root, " is not a rank of a world of ", world);
  Tensor buf = buffer_of(t, t.dtype());
  const int64_t bytes = buf.numel() * static_cast<int64_t>(buf.itemsize());
  auto start = [buf, bytes, root](detail::Comm& c) { return c.start_broadcast(buf.data_ptr(), bytes, root); };
  auto finish = [t, buf]() mutable {
    if (!buf.is_same(t)) t.copy_(buf);
  };
  return submit("broadcast", t, start, {buf}, finish, o.async_op);
}

Work all_gather(std::vector<Tensor>& out, const Tensor& t, const CollectiveOptions& o) {
  NoGradGuard no_grad;  // buffers and copies are not part of any graph
  check_tensor("all_gather", t);
  const int world = world_size();
  Tensor in = buffer_of(t, t.dtype());
  Shape stacked = t.shape();
  stacked.insert(0, world);
  Tensor all = empty(stacked, {.dtype = t.dtype(), .device = t.device()});
  const int64_t bytes = in.numel() * static_cast<int64_t>(in.itemsize());
  out.clear();
  for (int r = 0; r < world; ++r) out.push_back(all.select(0, r));
  auto start = [in, all, bytes](detail::Comm& c) { return c.start_all_gather(in.data_ptr(), all.data_ptr(), bytes); };
  return submit("all_gather", t, start, {in, all}, {}, o.async_op);
}

std::vector<Tensor> all_gather(const Tensor& t) {
  std::vector<Tensor> out;
  all_gather(out, t);
  return out;
}

Work reduce_scatter(Tensor& out, const std::vector<Tensor>& in, const CollectiveOptions& o) {
  NoGradGuard no_grad;  // buffers and copies are not part of any graph
  check_tensor("reduce_scatter", out);
  check_reduce("reduce_scatter", out, o.op);
  const int world = world_size();
  EMBER_CHECK_VALUE(static_cast<int>(in.size()) == world, "reduce_scatter: expected ", world,
                    " input tensors (one per rank), got ", in.size());
  for (size_t r = 0; r < in.size(); ++r) {
    check_tensor("reduce_scatter", in[r]);
    EMBER_CHECK_SHAPE(in[r].shape() == out.shape(), "reduce_scatter: input ", r, " is ", in[r].shape(),
                      " but the output is ", out.shape());
    EMBER_CHECK(in[r].dtype() == out.dtype(), DTypeError, "reduce_scatter: input ", r, " is ", in[r].dtype(),
                " but the output is ", out.dtype());
    EMBER_CHECK(in[r].device() == out.device(), DeviceError, "reduce_scatter: input ", r, " is on ", in[r].device(),
                " but the output is on ", out.device());
  }
  const DType wire = wire_dtype(out);
  Shape stacked = out.shape();
  stacked.insert(0, world);
  Tensor send = empty(stacked, {.dtype = wire, .device = out.device()});
  for (int r = 0; r < world; ++r) send.select(0, r).copy_(in[r]);
  Tensor recv = buffer_of(out, wire);
  const CommOp op = comm_op(o.op);
  auto start = [send, recv, op](detail::Comm& c) {
    return c.start_reduce_scatter(send.data_ptr(), recv.data_ptr(), recv.numel(), recv.dtype(), op);
  };
  auto finish = [out, recv, avg = o.op == ReduceOp::Avg, world]() mutable {
    if (avg) recv.div_(static_cast<double>(world));
    if (!recv.is_same(out)) out.copy_(recv);
  };
  return submit(ember::detail::str("reduce_scatter(", op_name(o.op), ")"), out, start, {send, recv}, finish,
                o.async_op);
}

Tensor reduce_scatter(const Tensor& t, const CollectiveOptions& o) {
  check_tensor("reduce_scatter", t);
  const int world = world_size();
  EMBER_CHECK_SHAPE(t.dim() >= 1 && t.size(0) % world == 0, "reduce_scatter: dim 0 of ", t.shape(),
                    " must be a multiple of the world size ", world);
  const int64_t n = t.size(0) / world;
  std::vector<Tensor> in;
  for (int r = 0; r < world; ++r) in.push_back(t.slice(0, r * n, (r + 1) * n));
  Shape s = t.shape();
  s[0] = n;
  Tensor out = empty(s, {.dtype = t.dtype(), .device = t.device()});
  CollectiveOptions sync = o;
  sync.async_op = false;
  reduce_scatter(out, in, sync);
  return out;
}

}  // namespace ember::dist
