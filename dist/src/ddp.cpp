// defines: DistributedDataParallel (ddp.h) — the buckets, the gradient hooks that fill them, and the
// end-of-backward callback that averages (Note [Gradient buckets]).
#include "ember/dist/ddp.h"

#include <chrono>
#include <map>
#include <set>
#include <tuple>

#include "ember/autograd/grad_mode.h"
#include "ember/autograd/hooks.h"
#include "ember/core/factory.h"

namespace ember::dist {
namespace {
constexpr int64_t kFirstBucketBytes = 1 << 20;
}

struct DistributedDataParallel::Reducer {
  struct Slot {
    Tensor param;
    int bucket = 0;
    int64_t offset = 0;  // in the bucket's flat buffer
    int index = 0;       // in the bucket: its flag is flat[grad_numel + index]
    bool got = false;    // its gradient arrived in this pass
  };
  struct Bucket {
    Tensor flat;  // [gradients..., one flag per parameter]
    int64_t grad_numel = 0;
    std::vector<int> slots;
    size_t ready = 0;
    bool launched = false;
    Work work;
  };

  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  std::vector<autograd::HookHandle> hooks;
  int world = 1;
  bool overlap = true;
  bool armed = false;
  bool callback_queued = false;
  size_t next_launch = 0;
  DDPStats stats;

  ~Reducer() {
    for (auto& h : hooks) h.remove();
  }

  void arm() {
    // A pass armed by a forward whose backward never finished here (no backward, one that reached no parameter,
    // or one that threw) is finished now, so that this rank starts the same bucket all-reduces as the others.
    if (armed) finish();
    for (Slot& s : slots) s.got = false;
    for (Bucket& b : buckets) {
      b.ready = 0;
      b.launched = false;
      b.work = Work();
      // Every flag starts at 1 (used); finish() zeroes those of parameters that got no gradient.
      b.flat.slice(0, b.grad_numel, b.grad_numel + static_cast<int64_t>(b.slots.size())).fill_(1);
    }
    next_launch = 0;
    callback_queued = false;
    armed = true;
  }

  void launch(Bucket& b) {
    // Avg: the gradients come back averaged, and each flag becomes the fraction of ranks that used the parameter.
    b.work = all_reduce(b.flat, {.op = ReduceOp::Avg, .async_op = true});
    b.launched = true;
  }

  // Buckets start strictly in index order, the same on every rank.
  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].ready == buckets[next_launch].slots.size())
      launch(buckets[next_launch++]);
  }

  void on_grad(int i, const std::weak_ptr<Reducer>& self) {
    if (!armed) return;
    Slot& s = slots[static_cast<size_t>(i)];
    if (s.got) return;
    if (!callback_queued) {
      autograd::queue_callback([self] {
        if (auto r = self.lock()) r->finish();
      });
      callback_queued = true;
    }
    Bucket& b = buckets[static_cast<size_t>(s.bucket)];
    const int64_t n = s.param.numel();
    b.flat.slice(0, s.offset, s.offset + n).copy_(s.param.grad().reshape({n}));
    s.got = true;
    ++b.ready;
    if (overlap) launch_ready();
  }

  void finish() {
    if (!armed) return;
    armed = false;
    const auto t0 = std::chrono::steady_clock::now();
    // Parameters without a gradient in this pass contribute zeros (and a zero flag).
    for (; next_launch < buckets.size(); ++next_launch) {
      Bucket& b = buckets[next_launch];
      for (int i : b.slots) {
        Slot& s = slots[static_cast<size_t>(i)];
        if (s.got) continue;
        b.flat.slice(0, s.offset, s.offset + s.param.numel()).zero_();
        b.flat.slice(0, b.grad_numel + s.index, b.grad_numel + s.index + 1).zero_();
      }
      launch(b);
    }
    stats = DDPStats{};
    stats.buckets = static_cast<int>(buckets.size());
    for (Bucket& b : buckets) {
      b.work.wait();
      stats.comm_s += b.work.duration_s();
    }
    stats.exposed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (Bucket& b : buckets) {
      const std::vector<double> used =
          b.flat.slice(0, b.grad_numel, b.grad_numel + static_cast<int64_t>(b.slots.size())).to_vector<double>();
      for (size_t k = 0; k < b.slots.size(); ++k) {
        if (used[k] == 0) continue;  // no rank used it: .grad stays as it was
        Slot& s = slots[static_cast<size_t>(b.slots[k])];
        const int64_t n = s.param.numel();
        Tensor avg = b.flat.slice(0, s.offset, s.offset + n).reshape(s.param.shape());
        Tensor g = s.param.grad();
        if (g.defined()) g.copy_(avg);
        else s.param.set_grad(avg.clone());
      }
    }
  }
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> model, DDPOptions options)
    : model_(std::move(model)), reducer_(std::make_shared<Reducer>()), opts_(options) {
  EMBER_CHECK_VALUE(model_ != nullptr, "DistributedDataParallel: got no model");
  EMBER_CHECK_VALUE(opts_.bucket_bytes > 0, "DistributedDataParallel: bucket_bytes must be positive, got ",
                    opts_.bucket_bytes);
  EMBER_CHECK(is_initialized(), DistError, "DistributedDataParallel: call dist::init() first");
  add_child("module", model_);
  NoGradGuard no_grad;
  Reducer& r = *reducer_;
  r.world = world_size();
  r.overlap = opts_.overlap;

  // Every rank starts from rank 0's state.
  for (Tensor p : model_->parameters()) broadcast(p, 0);
  for (Tensor b : model_->buffers()) broadcast(b, 0);

  // Buckets (Note [Gradient buckets]): reverse registration order, split by dtype and device.
  std::vector<Tensor> params;
  for (const Tensor& p : model_->parameters())
    if (p.requires_grad()) params.push_back(p);
  std::map<std::tuple<int, int, int>, int> open;  // (dtype, device type, device index) -> bucket being filled
  std::set<int> first_of_kind;                    // buckets that are the first of their (dtype, device)
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const Tensor& p = *it;
    const auto key =
        std::make_tuple(static_cast<int>(p.dtype()), static_cast<int>(p.device().type()), p.device().index());
    auto o = open.find(key);
    const int64_t bytes = p.numel() * static_cast<int64_t>(p.itemsize());
    bool fresh = o == open.end();
    if (!fresh) {
      // The first bucket of each kind is small, so the last layers' all-reduce starts early (as PyTorch).
      const Reducer::Bucket& cur = r.buckets[static_cast<size_t>(o->second)];
      const int64_t cap = first_of_kind.count(o->second) ? std::min<int64_t>(kFirstBucketBytes, opts_.bucket_bytes)
                                                         : opts_.bucket_bytes;
      fresh = cur.grad_numel * static_cast<int64_t>(p.itemsize()) + bytes > cap;
    }
    if (fresh) {
      if (o == open.end()) first_of_kind.insert(static_cast<int>(r.buckets.size()));
      r.buckets.emplace_back();
      open[key] = static_cast<int>(r.buckets.size()) - 1;
      o = open.find(key);
    }
    Reducer::Bucket& b = r.buckets[static_cast<size_t>(o->second)];
    Reducer::Slot s;
    s.param = p;
    s.bucket = o->second;
    s.offset = b.grad_numel;
    s.index = static_cast<int>(b.slots.size());
    b.grad_numel += p.numel();
    b.slots.push_back(static_cast<int>(r.slots.size()));
    r.slots.push_back(s);
  }
  for (Reducer::Bucket& b : r.buckets) {
    const Tensor& p0 = r.slots[static_cast<size_t>(b.slots[0])].param;
    b.flat = zeros({b.grad_numel + static_cast<int64_t>(b.slots.size())}, {.dtype = p0.dtype(), .device = p0.device()});
  }
  std::weak_ptr<Reducer> weak = reducer_;
  for (size_t i = 0; i < r.slots.size(); ++i)
    r.hooks.push_back(
        autograd::register_post_accumulate_grad_hook(r.slots[i].param, [weak, i = static_cast<int>(i)](const Tensor&) {
          if (auto red = weak.lock()) red->on_grad(i, weak);
        }));
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  if (opts_.broadcast_buffers && reducer_->world > 1) {
    NoGradGuard no_grad;
    std::vector<Work> works;  // all in flight at once, then awaited
    for (Tensor b : model_->buffers()) works.push_back(broadcast(b, 0, {.async_op = true}));
    for (Work& w : works) w.wait();
  }
  if (sync_ && GradMode::is_enabled()) reducer_->arm();
  return (*model_)(x);
}

std::string DistributedDataParallel::repr() const {
  return ember::detail::str("DistributedDataParallel(world ", reducer_->world, ", ", reducer_->buckets.size(),
                            " buckets)");
}

DDPStats DistributedDataParallel::last_stats() const { return reducer_->stats; }
int DistributedDataParallel::num_buckets() const { return static_cast<int>(reducer_->buckets.size()); }

}  // namespace ember::dist
