// TensorDataset and DataLoader: order, batch contents, partial last batch and drop_last, shuffling per epoch
// and per seed, identical batches for any num_workers, worker exceptions, early exit, custom datasets, options.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "test_util.h"

using namespace ember;

namespace {

// x row i = [i, i + 0.5, -i] (float32), y[i] = 10 * i (int64).
data::TensorDataset make_ds(int64_t n) {
  std::vector<float> xs;
  std::vector<int64_t> ys;
  for (int64_t i = 0; i < n; ++i) {
    xs.insert(xs.end(), {float(i), float(i) + 0.5f, -float(i)});
    ys.push_back(10 * i);
  }
  return data::TensorDataset(tensor(xs, Shape{n, 3}), tensor(ys, Shape{n}));
}

// The dataset index of each row of a batch, read back from y = 10 * i.
std::vector<int64_t> ids(const data::Batch& b) {
  std::vector<int64_t> v = b.y.to_vector<int64_t>();
  for (int64_t& i : v) i /= 10;
  return v;
}

// Every batch of one epoch, by value.
template <class L>
std::vector<data::Batch> epoch(L& loader) {
  std::vector<data::Batch> out;
  for (auto [x, y] : loader) out.push_back({x, y});
  return out;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), static_cast<size_t>(ca.numel()) * ca.itemsize()) == 0;
}

// A user dataset (no get_batch): collated with get(i) + stack. x = [i, i], y = i (0-D).
struct Squares {
  int64_t n = 10;
  int64_t size() const { return n; }
  data::Example get(int64_t i) const {
    return {full({2}, static_cast<double>(i)), full(Shape{}, static_cast<double>(i * i), {.dtype = kInt64})};
  }
};
static_assert(data::Dataset<Squares>);
static_assert(!data::BatchDataset<Squares>);

// Throws for one index.
struct Faulty {
  int64_t bad;
  int64_t size() const { return 40; }
  data::Example get(int64_t i) const {
    if (i == bad) throw std::runtime_error("bad sample " + std::to_string(i));
    return {full({1}, static_cast<double>(i)), full(Shape{}, static_cast<double>(i), {.dtype = kInt64})};
  }
};

// Counts get() calls (shared by the copies a loader makes), to see how far workers got.
struct Counted {
  std::shared_ptr<std::atomic<int64_t>> calls = std::make_shared<std::atomic<int64_t>>(0);
  int64_t size() const { return 1000; }
  data::Example get(int64_t i) const {
    ++*calls;
    return {full({1}, static_cast<double>(i)), full(Shape{}, static_cast<double>(i), {.dtype = kInt64})};
  }
};

// Checks every get() against the window the consumer allows — the batches it has taken plus workers x prefetch,
// in samples, plus one batch a worker may start as the consumer's batch leaves the queue — and records the worst
// overshoot. The test waits for calls on a condition variable: no clock, no sleep.
struct Windowed {
  struct State {
    std::mutex m;
    std::condition_variable cv;
    int64_t calls = 0, taken = 0, worst_overshoot = 0;
  };
  std::shared_ptr<State> s = std::make_shared<State>();
  int64_t ahead_batches = 0, batch = 0;
  int64_t size() const { return 400; }
  data::Example get(int64_t i) const {
    {
      std::lock_guard<std::mutex> l(s->m);
      ++s->calls;
      const int64_t allowed = (s->taken + ahead_batches + 1) * batch;
      s->worst_overshoot = std::max(s->worst_overshoot, s->calls - allowed);
    }
    s->cv.notify_all();
    return {full({1}, static_cast<double>(i)), full(Shape{}, static_cast<double>(i), {.dtype = kInt64})};
  }
  void took_one() const {
    std::lock_guard<std::mutex> l(s->m);
    ++s->taken;
  }
  void wait_for_calls(int64_t n) const {  // a loader that stops short hangs here: ctest's timeout reports it
    std::unique_lock<std::mutex> l(s->m);
    s->cv.wait(l, [&] { return s->calls >= n; });
  }
};

}  // namespace

TEST(TensorDataset, GetReturnsRowViews) {
  data::TensorDataset ds = make_ds(5);
  EXPECT_EQ(ds.size(), 5);
  auto [x, y] = ds.get(3);
  EXPECT_TENSOR_NEAR(x, Shape({3}), std::vector<double>({3, 3.5, -3}));
  EXPECT_EQ(y.dim(), 0);
  EXPECT_EQ(y.item<int64_t>(), 30);
  // A view: it shares the dataset's storage.
  EXPECT_EQ(static_cast<const char*>(x.data_ptr()),
            static_cast<const char*>(ds.x().data_ptr()) + 3 * ds.x().stride(0) * ds.x().itemsize());
  data::Batch b = ds.get_batch({4, 0, 2});
  EXPECT_TENSOR_NEAR(b.x, Shape({3, 3}), std::vector<double>({4, 4.5, -4, 0, 0.5, 0, 2, 2.5, -2}));
  EXPECT_EQ(ids(b), std::vector<int64_t>({4, 0, 2}));
}

TEST(TensorDataset, Errors) {
  EXPECT_THROW_MSG(data::TensorDataset(zeros({4, 2}), zeros({5})), ShapeError, "TensorDataset", "[4, 2]", "[5]");
  EXPECT_THROW_MSG(data::TensorDataset(zeros(Shape{}), zeros(Shape{})), ShapeError, "dim 0");
  EXPECT_THROW_MSG(data::TensorDataset(Tensor(), zeros({2})), ShapeError, "defined");
  data::TensorDataset ds = make_ds(3);
  EXPECT_THROW_MSG(ds.get(3), IndexError, "out of range");
  EXPECT_THROW(ds.get(-1), IndexError);
  EXPECT_THROW(ds.get_batch({0, 7}), IndexError);
}

TEST(DataLoader, SequentialOrderPartialLastBatchAndSize) {
  data::TensorDataset ds = make_ds(10);
  data::DataLoader loader(ds, {.batch_size = 4});
  EXPECT_EQ(loader.size(), 3);
  std::vector<data::Batch> bs = epoch(loader);
  ASSERT_EQ(bs.size(), 3u);
  EXPECT_EQ(ids(bs[0]), std::vector<int64_t>({0, 1, 2, 3}));
  EXPECT_EQ(ids(bs[1]), std::vector<int64_t>({4, 5, 6, 7}));
  EXPECT_EQ(ids(bs[2]), std::vector<int64_t>({8, 9}));
  // Batch contents are the dataset's rows.
  for (const data::Batch& b : bs) {
    std::vector<int64_t> rows = ids(b);
    ASSERT_EQ(b.x.size(0), static_cast<int64_t>(rows.size()));
    EXPECT_EQ(b.x.dtype(), kFloat32);
    EXPECT_EQ(b.y.dtype(), kInt64);
    for (size_t r = 0; r < rows.size(); ++r) {
      auto [xi, yi] = ds.get(rows[r]);
      EXPECT_TRUE(same_bytes(b.x.select(0, static_cast<int64_t>(r)), xi));
    }
  }
  data::DataLoader dropping(ds, {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(dropping.size(), 2);
  EXPECT_EQ(epoch(dropping).size(), 2u);
  data::DataLoader exact(make_ds(8), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(exact.size(), 2);
  data::DataLoader bigger(ds, {.batch_size = 64});
  EXPECT_EQ(bigger.size(), 1);
  EXPECT_EQ(epoch(bigger)[0].x.shape(), Shape({10, 3}));
  data::DataLoader none(ds, {.batch_size = 64, .drop_last = true});
  EXPECT_EQ(none.size(), 0);
  EXPECT_TRUE(epoch(none).empty());
}

TEST(DataLoader, ShuffleCoversEveryIndexOnceAndChangesPerEpoch) {
  data::DataLoader loader(make_ds(50), {.batch_size = 8, .shuffle = true, .seed = 7});
  std::vector<std::vector<int64_t>> orders;
  for (int e = 0; e < 3; ++e) {
    std::vector<int64_t> order;
    for (const auto& b : loader) {
      std::vector<int64_t> v = ids(b);
      order.insert(order.end(), v.begin(), v.end());
    }
    ASSERT_EQ(order.size(), 50u);
    EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), 50u);
    orders.push_back(order);
  }
  EXPECT_NE(orders[0], orders[1]);
  EXPECT_NE(orders[1], orders[2]);
  EXPECT_NE(orders[0], data::sequential_order(50));
  EXPECT_EQ(loader.epoch(), 3u);

  // Same seed, same orders; another seed, another order.
  data::DataLoader again(make_ds(50), {.batch_size = 8, .shuffle = true, .seed = 7});
  data::DataLoader other(make_ds(50), {.batch_size = 8, .shuffle = true, .seed = 8});
  for (int e = 0; e < 3; ++e) {
    std::vector<int64_t> a, o;
    for (const auto& b : again)
      for (int64_t i : ids(b)) a.push_back(i);
    for (const auto& b : other)
      for (int64_t i : ids(b)) o.push_back(i);
    EXPECT_EQ(a, orders[static_cast<size_t>(e)]);
    EXPECT_NE(o, orders[static_cast<size_t>(e)]);
  }
  // set_epoch replays an epoch's order.
  again.set_epoch(1);
  std::vector<int64_t> replay;
  for (const auto& b : again)
    for (int64_t i : ids(b)) replay.push_back(i);
  EXPECT_EQ(replay, orders[1]);
}

TEST(DataLoader, BatchesIdenticalWhateverNumWorkers) {
  data::TensorDataset ds(randn({203, 4, 5}), randint(0, 10, {203}));
  std::vector<std::vector<data::Batch>> runs;
  for (int workers : {0, 1, 3}) {
    data::DataLoader loader(ds, {.batch_size = 16, .shuffle = true, .num_workers = workers, .prefetch = 2, .seed = 3});
    std::vector<data::Batch> all = epoch(loader);
    std::vector<data::Batch> second = epoch(loader);
    all.insert(all.end(), second.begin(), second.end());
    runs.push_back(all);
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].size(), runs[0].size());
    for (size_t b = 0; b < runs[0].size(); ++b) {
      EXPECT_TRUE(same_bytes(runs[r][b].x, runs[0][b].x)) << "run " << r << " batch " << b;
      EXPECT_TRUE(same_bytes(runs[r][b].y, runs[0][b].y)) << "run " << r << " batch " << b;
    }
  }
  // The two epochs differ (a new shuffle), and the last batch is partial (203 = 12 * 16 + 11).
  EXPECT_FALSE(same_bytes(runs[0][0].y, runs[0][13].y));
  EXPECT_EQ(runs[0][12].x.shape(), Shape({11, 4, 5}));
}

TEST(DataLoader, CustomDatasetIsCollatedWithStack) {
  for (int workers : {0, 2}) {
    data::DataLoader loader(Squares{}, {.batch_size = 4, .num_workers = workers});
    EXPECT_EQ(loader.size(), 3);
    std::vector<data::Batch> bs = epoch(loader);
    ASSERT_EQ(bs.size(), 3u);
    EXPECT_TENSOR_NEAR(bs[0].x, Shape({4, 2}), std::vector<double>({0, 0, 1, 1, 2, 2, 3, 3}));
    EXPECT_EQ(bs[0].y.dtype(), kInt64);
    EXPECT_TENSOR_NEAR(bs[2].y, Shape({2}), std::vector<double>({64, 81}));
  }
}

TEST(DataLoader, WorkerExceptionIsRethrownAtItsBatch) {
  for (int workers : {0, 1, 3}) {
    Faulty ds{.bad = 13};
    int seen = 0;
    {
      data::DataLoader loader(ds, {.batch_size = 4, .num_workers = workers, .prefetch = 2});
      try {
        for (auto [x, y] : loader) {
          EXPECT_LT(y.to_vector<int64_t>().back(), 13);
          ++seen;
        }
        ADD_FAILURE() << "no exception with num_workers = " << workers;
      } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "bad sample 13");
      }
      // Batches 0, 1, 2 (indices 0..11) come out before batch 3 (12..15) throws.
      EXPECT_EQ(seen, 3) << "num_workers = " << workers;
      // The loader still works for a new epoch after the failure.
      int again = 0;
      try {
        for (const auto& b : loader) (void)b, ++again;
      } catch (const std::runtime_error&) {}
      EXPECT_EQ(again, 3);
    }  // destroying the loader joins the workers
  }
}

// Leaving an epoch early, and destroying the loader (or moving it) with an iterator alive, stops the workers: they
// fetch a window's worth of samples, never the epoch's 1000 (a hang would be ctest's timeout).
TEST(DataLoader, BreakingOutAndDestroyingStopsTheWorkers) {
  for (int workers : {1, 4}) {
    Counted ds;
    {
      data::DataLoader loader(ds, {.batch_size = 4, .num_workers = workers, .prefetch = 3});
      int n = 0;
      for (const auto& b : loader) {
        (void)b;
        if (++n == 2) break;
      }
      EXPECT_EQ(n, 2);
      auto it = loader.begin();  // an iterator left mid-epoch while the loader dies
      ++it;
    }
    EXPECT_LT(*ds.calls, 1000) << workers << " workers ran through the epoch";
  }
  Counted ds;
  {
    data::DataLoader loader(ds, {.batch_size = 4, .num_workers = 2});
    auto it = loader.begin();  // iterator outlives the loader: it holds the dataset and its workers
    {
      data::DataLoader<Counted> moved = std::move(loader);
      (void)moved;
    }
    ++it;
    EXPECT_EQ(it->x.size(0), 4);
  }
  EXPECT_LT(*ds.calls, 1000);
}

TEST(DataLoader, WorkersStayWithinThePrefetchWindow) {
  Windowed ds;
  ds.ahead_batches = 2 * 2;  // 2 workers x prefetch 2
  ds.batch = 5;
  data::DataLoader loader(ds, {.batch_size = 5, .num_workers = 2, .prefetch = 2});
  auto it = loader.begin();  // batch 0 taken: workers may build batches 1..4 and no more
  ds.took_one();
  ds.wait_for_calls((1 + 4) * 5);  // they fill the window
  ++it;
  ds.took_one();
  ds.wait_for_calls((2 + 4) * 5);  // and one more batch once one more is taken
  EXPECT_TENSOR_NEAR(it->y, Shape({5}), std::vector<double>({5, 6, 7, 8, 9}));
  int64_t batches = 2;
  for (++it; it != loader.end(); ++it) {
    ds.took_one();
    ++batches;
  }
  EXPECT_EQ(batches, 80);
  EXPECT_EQ(ds.s->calls, 400);
  EXPECT_LE(ds.s->worst_overshoot, 0) << "workers fetched samples beyond the prefetch window";
}

TEST(DataLoader, BadOptionsThrow) {
  data::TensorDataset ds = make_ds(4);
  EXPECT_THROW_MSG(data::DataLoader(ds, {.batch_size = 0}), ValueError, "batch_size", "0");
  EXPECT_THROW_MSG(data::DataLoader(ds, {.num_workers = -1}), ValueError, "num_workers");
  EXPECT_THROW_MSG(data::DataLoader(ds, {.prefetch = 0}), ValueError, "prefetch");
}

TEST(DataLoader, CudaDeviceWithoutCudaThrowsAndPinMemoryIsANoOp) {
  data::TensorDataset ds = make_ds(6);
  if (!cuda::is_available()) {
    EXPECT_THROW_MSG(data::DataLoader(ds, {.device = Device::cuda()}), DeviceError, "DataLoader", "cuda:0",
                     "CUDA is unavailable");
  }
  // Without CUDA, pin_memory is accepted and does nothing: the batches are ordinary CPU tensors.
  data::DataLoader loader(ds, {.batch_size = 4, .pin_memory = true});
  for (auto [x, y] : loader) {
    EXPECT_TRUE(x.is_cpu());
    if (!cuda::is_available()) {
      EXPECT_FALSE(x.is_pinned());
    }
  }
}
