// defines: SampleRng, the random stream of one sample, and the thread-local scope through which a DataLoader tells
// a dataset's get(i) which sample it is building. A sample's stream depends only on (the loader's seed, the epoch,
// the index), never on which worker thread builds it or when, so random augmentation gives the same batches for
// any num_workers — and a resumed run (DataLoader::set_epoch) the same batches as an uninterrupted one.
// The scope also makes a Generator of that sample the thread's current generator (core/generator.h), so ember's own
// random functions called inside get(i) — randn, rand, a Dropout — are per-sample deterministic too.
//
//   Example get(int64_t i) const {
//     data::SampleRng rng = data::sample_rng(i);           // this sample's stream
//     bool flip = rng.bernoulli(0.5);
//     ...
//   }
//
// The generator is counter-based (SplitMix64 over a key mixed from seed, epoch and index), so deriving a stream
// is free; it is meant for augmentation, not cryptography. Note that get() runs on the loader's worker threads
// when num_workers > 0: ember's global generator (randn, rand) is shared by all threads and gives a different
// interleaving each run — which is why the loader scopes a per-sample generator around each get(i) (below).
#pragma once
#include <cstdint>

#include "ember/core/generator.h"

namespace ember::data {

class SampleRng {
 public:
  SampleRng(uint64_t seed, uint64_t epoch, int64_t index);
  uint64_t next_u64();
  double uniform();                         // in [0, 1)
  int64_t randint(int64_t lo, int64_t hi);  // in [lo, hi); hi > lo
  bool bernoulli(double p);                 // true with probability p
  double normal();                          // standard normal (Box–Muller)

 private:
  uint64_t state_;
};

// The stream of sample `index` as the DataLoader building it on this thread sees it: keyed by (the loader's seed,
// the epoch, index) and by how many times sample_rng was called before while building this sample, so that two
// transforms of one sample draw different numbers. Any index works (a dataset that remaps indices, like a subset,
// still gets the loader's seed and epoch). Outside a loader it is (0, 0, index), the same on every call.
SampleRng sample_rng(int64_t index);

// Set by the DataLoader around each get(i); a dataset wrapping another may nest its own. While it lives, randn/rand
// without a generator draw from this sample's own Philox stream, keyed by (seed, epoch, index). The loader also
// passes the sample's position in the epoch's order, so that an index drawn twice in one epoch (sampling with
// replacement, a padded DistributedSampler) gets two different augmentations, as it would in PyTorch.
class SampleScope {
 public:
  SampleScope(uint64_t seed, uint64_t epoch, int64_t index, int64_t position = -1);
  ~SampleScope();
  SampleScope(const SampleScope&) = delete;
  SampleScope& operator=(const SampleScope&) = delete;

 private:
  uint64_t prev_seed_, prev_epoch_;
  int64_t prev_index_;
  bool prev_active_;
  uint64_t prev_draws_;
  Generator gen_;       // this sample's stream for ember's random functions
  GeneratorScope use_;  // makes gen_ the thread's current generator
};

}  // namespace ember::data
