// defines: DistributedDataParallel, the module wrapper for data-parallel training: each rank runs the same
// model on its own shard of the data, and after backward every rank holds the average of all ranks'
// gradients, so the optimiser steps stay identical.
//
//   ember::dist::init();
//   auto model = nn::Chain(nn::Dense(784 => 128, nn::relu), nn::Dense(128 => 10));
//   ember::dist::DistributedDataParallel ddp(model, {.bucket_bytes = 25 << 20});
//   optim::Adam opt(ddp.parameters(), {.lr = 1e-3});
//   for (auto [x, y] : loader) {      // loader with a data::DistributedSampler
//     opt.zero_grad();
//     nn::cross_entropy(ddp(x), y).backward();   // gradients averaged over the ranks here
//     opt.step();
//   }
//
// Note [Gradient buckets]: at construction the parameters (those that require grad) are grouped, in reverse
// registration order (roughly the order backward produces their gradients), into buckets of at most
// bucket_bytes per dtype and device (the first one of each at most 1 MiB, so that the last layers' all-reduce
// starts early, as in PyTorch); a parameter larger than the cap gets a bucket of its own; rank 0's parameters and
// buffers are broadcast to every rank. During backward a hook on each parameter copies its accumulated .grad into its
// bucket; a bucket whose gradients are all in starts its all-reduce at once, on the communication thread, while
// backward goes on — buckets start in index order on every rank, as collectives must. When backward ends, buckets still
// waiting (parameters that got no gradient in this pass) start with zeros for the missing gradients, every all-reduce
// is awaited and each .grad becomes the average. A parameter no rank used keeps its .grad as it was; one used by only
// some ranks gets the average with zeros from the others. Each bucket carries one extra element per
// parameter, 1 where this rank used it, which the averaging turns into the fraction of ranks that did.
//
// Every rank must run the same forwards in grad mode (they arm the reduction). A forward whose backward never
// finishes on a rank (skipped, reaching no parameter, or throwing) is finished at that rank's next forward, so
// the ranks' all-reduces stay paired.
//
// no_sync(): inside the scope, backward accumulates into .grad locally without communicating (gradient
// accumulation); the first backward after it averages the accumulated gradients.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ember/dist/dist.h"
#include "ember/nn/module.h"

namespace ember::dist {

struct DDPOptions {
  int64_t bucket_bytes = 25 << 20;  // Note [Gradient buckets]
  bool broadcast_buffers = true;    // rank 0's buffers (BatchNorm statistics) to every rank at each forward
  bool overlap = true;              // false: every all-reduce starts after backward (for measuring the overlap)
};

// Time spent in the all-reduces of the last backward pass (DistributedDataParallel::last_stats()).
struct DDPStats {
  int buckets = 0;
  double comm_s = 0;     // sum over buckets of each all-reduce's duration on the communication thread
  double exposed_s = 0;  // time backward's end waited for them: the communication not hidden behind compute
  double hidden_fraction() const { return comm_s > 0 ? std::max(0.0, 1.0 - exposed_s / comm_s) : 0.0; }
};

class DistributedDataParallel : public nn::Module {
 public:
  template <class M>
  explicit DistributedDataParallel(const M& model, DDPOptions options = {})
      : DistributedDataParallel(nn::Module::share_handle(model), options) {}
  DistributedDataParallel(std::shared_ptr<nn::Module> model, DDPOptions options);

  Tensor forward(const Tensor& x) override;
  std::string repr() const override;
  nn::Module& module() const { return *model_; }

  // Scope guard: no gradient communication while it lives (Note [Gradient buckets]).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& d) : d_(&d), prev_(d.sync_) { d.sync_ = false; }
    ~NoSync() { d_->sync_ = prev_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel* d_;
    bool prev_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  DDPStats last_stats() const;
  int num_buckets() const;

 private:
  struct Reducer;
  std::shared_ptr<nn::Module> model_;
  std::shared_ptr<Reducer> reducer_;  // shared with the gradient hooks
  DDPOptions opts_;
  bool sync_ = true;
};

}  // namespace ember::dist
