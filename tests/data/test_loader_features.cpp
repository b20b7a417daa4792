// DataLoader beyond (x, y) pairs and one-shot workers: the samplers (sequential, random with and without
// replacement, weighted), custom collates (dict, list, tuple and pair samples, variable-length sequences padded, a
// batch type of the user's own), and persistent workers (the same threads every epoch, an abandoned epoch).
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "test_util.h"

using namespace ember;

namespace {

data::TensorDataset ids_ds(int64_t n) { return data::TensorDataset(arange(n).unsqueeze(1), arange(n)); }

template <class L>
std::vector<int64_t> order_of(L& loader) {
  std::vector<int64_t> out;
  for (auto [x, y] : loader)
    for (int64_t v : y.template to_vector<int64_t>()) out.push_back(v);
  return out;
}

// Samples as dicts: {"a": [i, i], "b": i * 10}.
struct Dicts {
  int64_t size() const { return 7; }
  data::TensorDict get(int64_t i) const {
    return {{"a", full({2}, static_cast<double>(i))}, {"b", full(Shape{}, static_cast<double>(i * 10))}};
  }
};

// Samples as a tuple and as a pair of tensors.
struct Tuples {
  int64_t size() const { return 6; }
  std::tuple<Tensor, Tensor, Tensor> get(int64_t i) const {
    return {full({2}, static_cast<double>(i)), full(Shape{}, static_cast<double>(-i)), full({1, 1}, 1.0)};
  }
};
struct Pairs {
  int64_t size() const { return 4; }
  std::pair<Tensor, Tensor> get(int64_t i) const { return {full({3}, static_cast<double>(i)), full(Shape{}, 1.0)}; }
};

// Token sequences of length i % 4 + 1, values i.
struct Sequences {
  int64_t size() const { return 9; }
  Tensor get(int64_t i) const { return full({i % 4 + 1}, static_cast<double>(i), {.dtype = kInt64}); }
};

struct PadCollate {
  data::TensorDict operator()(std::vector<Tensor>&& seqs) const {
    return {{"tokens", data::pad_sequence(seqs, -1)}, {"lengths", data::lengths(seqs)}};
  }
};

// A batch type the loader cannot look into.
struct Summary {
  int64_t count = 0, total = 0;
};
struct Summarise {
  Summary operator()(std::vector<data::Example>&& es) const {
    Summary s;
    for (auto& e : es) {
      ++s.count;
      s.total += e.y.item<int64_t>();
    }
    return s;
  }
};

// Counts the threads that ran get(): a thread_local flag is fresh in every new thread (thread ids are not: the
// C library reuses the id of a joined thread).
struct ThreadSpy {
  std::shared_ptr<std::atomic<int>> threads = std::make_shared<std::atomic<int>>(0);
  int64_t size() const { return 24; }
  data::Example get(int64_t i) const {
    thread_local bool counted = false;
    if (!counted) {
      counted = true;
      ++*threads;
    }
    return {full({1}, static_cast<double>(i)), full(Shape{}, static_cast<double>(i), {.dtype = kInt64})};
  }
};

// Samples as lists of two tensors: [i], [i, i, i].
struct Lists {
  int64_t size() const { return 5; }
  std::vector<Tensor> get(int64_t i) const {
    return {full({1}, static_cast<double>(i)), full({3}, static_cast<double>(i))};
  }
};

}  // namespace

TEST(Samplers, SequentialAndRandomWithAndWithoutReplacement) {
  auto ds = ids_ds(20);
  data::DataLoader seq(ds, {.batch_size = 6, .sampler = std::make_shared<data::SequentialSampler>()});
  EXPECT_EQ(order_of(seq), data::sequential_order(20));

  auto perm = std::make_shared<data::RandomSampler>(data::RandomSamplerOptions{.seed = 4});
  data::DataLoader a(ds, {.batch_size = 6, .sampler = perm});
  auto e0 = order_of(a), e1 = order_of(a);
  EXPECT_EQ(std::set<int64_t>(e0.begin(), e0.end()).size(), 20u);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e0, data::shuffled_order(20, 4, 0));

  auto sub = std::make_shared<data::RandomSampler>(data::RandomSamplerOptions{.num_samples = 8, .seed = 1});
  data::DataLoader b(ds, {.batch_size = 3, .sampler = sub});
  EXPECT_EQ(b.size(), 3);
  auto s = order_of(b);
  EXPECT_EQ(s.size(), 8u);
  EXPECT_EQ(std::set<int64_t>(s.begin(), s.end()).size(), 8u);

  auto repl = std::make_shared<data::RandomSampler>(data::RandomSamplerOptions{.replacement = true, .seed = 2});
  data::DataLoader c(ds, {.batch_size = 8, .sampler = repl});
  auto r = order_of(c);
  EXPECT_EQ(r.size(), 20u);
  EXPECT_LT(std::set<int64_t>(r.begin(), r.end()).size(), 20u);  // 20 draws from 20 with replacement repeat
  for (int64_t v : r) EXPECT_TRUE(v >= 0 && v < 20);
  EXPECT_EQ(repl->indices(20, 3), repl->indices(20, 3));

  // A sampler whose indices() disagrees with its size() is caught at begin(), not read past on a worker.
  struct Liar final : data::Sampler {
    std::vector<int64_t> indices(int64_t, uint64_t) const override { return {0, 1}; }
    int64_t size(int64_t) const override { return 9; }
  };
  data::DataLoader lying(ds, {.batch_size = 4, .num_workers = 2, .sampler = std::make_shared<Liar>()});
  EXPECT_THROW_MSG(lying.begin(), ValueError, "returned 2 indices", "size() says 9");
  // batch_size near INT64_MAX: one batch, no overflow.
  data::DataLoader all(ds, {.batch_size = INT64_MAX});
  EXPECT_EQ(all.size(), 1);

  auto too_many = std::make_shared<data::RandomSampler>(data::RandomSamplerOptions{.num_samples = 30});
  EXPECT_THROW_MSG(data::DataLoader(ds, {.sampler = too_many}).size(), ValueError, "num_samples = 30", "20");
}

TEST(Samplers, WeightedRandomFollowsTheWeights) {
  std::vector<double> w = {1, 0, 3, 0, 6};
  data::WeightedRandomSampler ws(w, 20000, {.seed = 9});
  std::vector<int> counts(5, 0);
  for (int64_t i : ws.indices(5, 0)) ++counts[static_cast<size_t>(i)];
  EXPECT_EQ(counts[1], 0);
  EXPECT_EQ(counts[3], 0);
  EXPECT_NEAR(counts[0], 2000, 200);
  EXPECT_NEAR(counts[2], 6000, 300);
  EXPECT_NEAR(counts[4], 12000, 300);
  EXPECT_NE(ws.indices(5, 0), ws.indices(5, 1));

  data::WeightedRandomSampler distinct(w, 3, {.replacement = false, .seed = 2});
  auto d = distinct.indices(5, 0);
  EXPECT_EQ(std::set<int64_t>(d.begin(), d.end()), (std::set<int64_t>{0, 2, 4}));

  EXPECT_THROW_MSG(data::WeightedRandomSampler({1, -1}, 4), ValueError, "weight 1", "-1");
  EXPECT_THROW_MSG(data::WeightedRandomSampler({0, 0}, 4), ValueError, "sum to 0");
  EXPECT_THROW_MSG(data::WeightedRandomSampler({1, 0}, 2, {.replacement = false}), ValueError, "only 1");
  EXPECT_THROW_MSG(ws.indices(7, 0), ValueError, "5 weights", "7 samples");
}

TEST(Collate, DictAndListSamplesAndPaddedSequences) {
  data::DataLoader dicts(Dicts{}, {.batch_size = 3, .num_workers = 2});
  int64_t batches = 0;
  for (const data::TensorDict& b : dicts) {
    EXPECT_EQ(b.at("a").size(1), 2);
    EXPECT_EQ(b.at("b").dim(), 1);
    EXPECT_EQ(b.at("b").select(0, 0).item<float>(), 10.0f * static_cast<float>(3 * batches));
    ++batches;
  }
  EXPECT_EQ(batches, 3);

  data::DataLoader lists(Lists{}, {.batch_size = 2});
  auto li = lists.begin();
  ASSERT_EQ(li->size(), 2u);
  EXPECT_EQ((*li)[0].shape(), (Shape{2, 1}));
  EXPECT_EQ((*li)[1].shape(), (Shape{2, 3}));
  EXPECT_EQ(test::values((*li)[1].select(0, 1)), (std::vector<double>{1, 1, 1}));

  data::DataLoader tuples(Tuples{}, {.batch_size = 4, .num_workers = 2});
  int64_t seen = 0;
  for (const auto& [a, b, c] : tuples) {
    EXPECT_EQ(a.size(1), 2);
    EXPECT_EQ(b.dim(), 1);
    EXPECT_EQ(c.shape(), (Shape{a.size(0), 1, 1}));
    EXPECT_EQ(b.select(0, 0).item<float>(), -static_cast<float>(seen));
    seen += a.size(0);
  }
  EXPECT_EQ(seen, 6);
  data::DataLoader pairs(Pairs{}, {.batch_size = 4});
  auto pi = pairs.begin();
  EXPECT_EQ(pi->first.shape(), (Shape{4, 3}));
  EXPECT_EQ(pi->second.shape(), (Shape{4}));
  static_assert(data::TensorBatch<std::tuple<Tensor, Tensor>> && data::TensorBatch<std::pair<Tensor, Tensor>>);

  data::DataLoader padded(Sequences{}, {.batch_size = 4}, PadCollate{});
  auto it = padded.begin();
  const data::TensorDict& first = *it;
  EXPECT_EQ(first.at("tokens").shape(), (Shape{4, 4}));
  EXPECT_EQ(first.at("tokens").to_vector<int64_t>(),
            (std::vector<int64_t>{0, -1, -1, -1, 1, 1, -1, -1, 2, 2, 2, -1, 3, 3, 3, 3}));
  EXPECT_EQ(first.at("lengths").to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4}));

  // The options' .collate for Example datasets: variable-length x padded, with workers, instead of get_batch.
  struct Ragged {
    int64_t size() const { return 6; }
    data::Example get(int64_t i) const {
      return {full({i % 3 + 1}, static_cast<double>(i)), full(Shape{}, static_cast<double>(i), {.dtype = kInt64})};
    }
  };
  auto pad_x = [](std::vector<data::Example>&& es) {
    std::vector<Tensor> xs, ys;
    for (auto& e : es) {
      xs.push_back(e.x);
      ys.push_back(e.y);
    }
    return data::Batch{data::pad_sequence(xs, -1), stack(ys, 0)};
  };
  data::DataLoader ragged(Ragged{}, {.batch_size = 3, .num_workers = 2, .collate = pad_x});
  auto ri = ragged.begin();
  EXPECT_EQ(ri->x.to_vector<float>(), (std::vector<float>{0, -1, -1, 1, 1, -1, 2, 2, 2}));
  EXPECT_EQ(ri->y.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  // A TensorDataset would be gathered with get_batch; with .collate, its Examples go through the collate.
  int calls = 0;
  data::DataLoader counted(ids_ds(4), {.batch_size = 2, .collate = [&](std::vector<data::Example>&& es) {
                                         ++calls;
                                         return data::DefaultCollate{}(std::move(es));
                                       }});
  EXPECT_EQ(order_of(counted), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(calls, 2);
  EXPECT_THROW_MSG(data::DataLoader(Sequences{}, {.collate = pad_x}), ValueError, ".collate", "third argument");

  // Without a padding collate, sequences of different lengths cannot be stacked: the error says why.
  data::DataLoader unpadded(Sequences{}, {.batch_size = 4});
  EXPECT_THROW_MSG(unpadded.begin(), ShapeError, "cannot collate", "same shape");
  EXPECT_THROW_MSG(data::pad_sequence({zeros({2, 3}), zeros({1, 4})}), ShapeError, "only dim 0 may differ");
}

TEST(Collate, ABatchTypeOfTheUsersOwn) {
  data::DataLoader loader(ids_ds(10), {.batch_size = 4, .num_workers = 2}, Summarise{});
  std::vector<int64_t> totals;
  for (const Summary& s : loader) totals.push_back(s.total);
  EXPECT_EQ(totals, (std::vector<int64_t>{0 + 1 + 2 + 3, 4 + 5 + 6 + 7, 8 + 9}));
  EXPECT_THROW_MSG(data::DataLoader(ids_ds(10), {.pin_memory = true}, Summarise{}), ValueError, "pin_memory",
                   "not one the loader can move");
}

TEST(PersistentWorkers, KeepTheirThreadsAndGiveTheSameBatches) {
  ThreadSpy spy;
  data::DataLoader persistent(
      spy, {.batch_size = 4, .shuffle = true, .num_workers = 2, .seed = 3, .persistent_workers = true});
  data::DataLoader fresh(ThreadSpy{}, {.batch_size = 4, .shuffle = true, .num_workers = 2, .seed = 3});
  for (int e = 0; e < 3; ++e) EXPECT_EQ(order_of(persistent), order_of(fresh)) << "epoch " << e;
  // Persistent: the same (at most two) workers every epoch. Without: new threads each epoch, so at least one new
  // thread per epoch (a worker may find no batch left to take, so not always two).
  EXPECT_LE(spy.threads->load(), 2);
  EXPECT_GE(fresh.dataset().threads->load(), 3);

  // Breaking out mid-epoch and beginning again: the new epoch is whole; the old iterator is abandoned.
  auto old = persistent.begin();
  ++old;
  std::vector<int64_t> next = order_of(persistent);
  EXPECT_EQ(next, data::shuffled_order(24, 3, 4));
  EXPECT_THROW_MSG(++old, ValueError, "abandoned");
  // Also when the abandoned iterator sits on its last batch (it must not end quietly).
  auto last = persistent.begin();
  for (int b = 0; b < 5; ++b) ++last;  // 6 batches: now on the last one
  (void)persistent.begin();
  EXPECT_THROW_MSG(++last, ValueError, "abandoned");
  EXPECT_THROW_MSG(data::DataLoader(ids_ds(4), {.persistent_workers = true}), ValueError, "num_workers > 0");
}
