// Collectives, DistributedDataParallel and DistributedSampler on CPU tensors, for any world size: ctest runs this
// under `mpirun -np 2`, as a single process (MPI singleton) and as a world of one without MPI. Every expected value
// is computed from rank() and world_size(). Its own main: dist::init before the tests, finalize after.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <set>

#include "ember/ember.h"

using namespace ember;

namespace {

int R() { return dist::rank(); }
int W() { return dist::world_size(); }

// Values that differ per rank and per element, exactly representable in every dtype (small integers).
Tensor rank_values(int64_t n, DType dt, int rank) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>((i * 7 + rank * 3) % 11);
  return tensor(v, {n}).to(dt);
}

TEST(Dist, RankAndWorld) {
  EXPECT_GE(W(), 1);
  EXPECT_GE(R(), 0);
  EXPECT_LT(R(), W());
  EXPECT_GE(dist::local_rank(), 0);
  EXPECT_TRUE(dist::is_initialized());
  const std::string b = dist::backend();
  EXPECT_TRUE(b == "mpi" || b == "self") << b;
  if (const char* want = std::getenv("EMBER_EXPECT_BACKEND")) EXPECT_EQ(b, want);  // set by ctest
}

TEST(Dist, AllReduceEveryDtypeAndOp) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8}) {
    for (int64_t n : {1, 7, 1001}) {
      for (dist::ReduceOp op : {dist::ReduceOp::Sum, dist::ReduceOp::Max, dist::ReduceOp::Min, dist::ReduceOp::Avg}) {
        if (op == dist::ReduceOp::Avg && !is_floating(dt)) continue;
        Tensor t = rank_values(n, dt, R());
        dist::all_reduce(t, {.op = op});
        ASSERT_EQ(t.dtype(), dt);
        const std::vector<double> got = t.to_vector<double>();
        for (int64_t i = 0; i < n; ++i) {
          double sum = 0, mx = -1e9, mn = 1e9;
          for (int r = 0; r < W(); ++r) {
            const double v = static_cast<double>((i * 7 + r * 3) % 11);
            sum += v;
            mx = std::max(mx, v);
            mn = std::min(mn, v);
          }
          const double want = op == dist::ReduceOp::Sum   ? sum
                              : op == dist::ReduceOp::Max ? mx
                              : op == dist::ReduceOp::Min ? mn
                                                          : sum / W();
          const double tol = is_reduced_float(dt) ? 0.02 * std::abs(want) : 1e-6;
          ASSERT_NEAR(got[static_cast<size_t>(i)], want, tol) << name(dt) << " n=" << n << " i=" << i;
        }
      }
    }
  }
}

TEST(Dist, AllReduceBoolIsLogical) {
  Tensor t = tensor<bool>({R() == 0, false, true});
  dist::all_reduce(t);  // Sum: or
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1, 0, 1}));
  Tensor u = tensor<bool>({R() == 0, true});
  dist::all_reduce(u, {.op = dist::ReduceOp::Min});  // and
  EXPECT_EQ(u.to_vector<double>(), (std::vector<double>{W() == 1 ? 1.0 : 0.0, 1}));
}

TEST(Dist, AllReduceNonContiguousWritesBack) {
  Tensor base = full({3, 5}, static_cast<double>(R() + 1));
  Tensor t = base.t();  // [5, 3], not contiguous
  ASSERT_FALSE(t.is_contiguous());
  dist::all_reduce(t);
  const double want = W() * (W() + 1) / 2.0;
  for (double v : base.to_vector<double>()) ASSERT_EQ(v, want);
}

TEST(Dist, BroadcastFromEveryRoot) {
  for (int root = 0; root < W(); ++root)
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool}) {
      Tensor t = rank_values(13, dt, R());
      dist::broadcast(t, root);
      EXPECT_EQ(t.to_vector<double>(), rank_values(13, dt, root).to_vector<double>()) << name(dt);
    }
}

TEST(Dist, AllGatherAndReduceScatter) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kInt64, kUInt8}) {
    Tensor t = rank_values(9, dt, R()).reshape({3, 3});
    std::vector<Tensor> all = dist::all_gather(t);
    ASSERT_EQ(static_cast<int>(all.size()), W());
    for (int r = 0; r < W(); ++r) {
      EXPECT_EQ(all[static_cast<size_t>(r)].shape(), (Shape{3, 3}));
      EXPECT_EQ(all[static_cast<size_t>(r)].to_vector<double>(), rank_values(9, dt, r).to_vector<double>());
    }
    // reduce_scatter: rank r gets the sum over ranks of their block r.
    Tensor stacked = rank_values(5 * W(), dt, R()).reshape({W(), 5});
    Tensor mine = dist::reduce_scatter(stacked);
    ASSERT_EQ(mine.shape(), (Shape{1, 5}));
    std::vector<double> want(5, 0.0);
    for (int r = 0; r < W(); ++r) {
      const std::vector<double> v = rank_values(5 * W(), dt, r).to_vector<double>();
      for (int j = 0; j < 5; ++j) want[static_cast<size_t>(j)] += v[static_cast<size_t>(R() * 5 + j)];
    }
    EXPECT_EQ(mine.to_vector<double>(), want) << name(dt);
  }
}

TEST(Dist, AsyncOpsCompleteInAnyWaitOrder) {
  std::vector<Tensor> ts;
  std::vector<dist::Work> works;
  for (int k = 0; k < 6; ++k) {
    ts.push_back(full({257}, static_cast<double>(R() + k)));
    works.push_back(dist::all_reduce(ts.back(), {.op = dist::ReduceOp::Avg, .async_op = true}));
  }
  for (int k = 5; k >= 0; --k) {
    works[static_cast<size_t>(k)].wait();
    EXPECT_TRUE(works[static_cast<size_t>(k)].is_completed());
    const double want = (W() - 1) / 2.0 + k;
    for (double v : ts[static_cast<size_t>(k)].to_vector<double>()) ASSERT_DOUBLE_EQ(v, want);
  }
  dist::barrier();
}

TEST(Dist, BadInputsGiveClearErrors) {
  Tensor i = zeros({4}, {.dtype = kInt64});
  try {
    dist::all_reduce(i, {.op = dist::ReduceOp::Avg});
    FAIL() << "Avg on int64 must throw";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce: ReduceOp::Avg needs a floating dtype, got int64"),
              std::string::npos)
        << e.what();
  }
  Tensor f = zeros({4});
  EXPECT_THROW(dist::broadcast(f, W()), IndexError);
  EXPECT_THROW(dist::broadcast(f, -1), IndexError);
  Tensor out = zeros({2});
  EXPECT_THROW(dist::reduce_scatter(out, std::vector<Tensor>(static_cast<size_t>(W()) + 1, zeros({2}))), ValueError);
  EXPECT_THROW(dist::reduce_scatter(out, std::vector<Tensor>(static_cast<size_t>(W()), zeros({3}))), ShapeError);
  EXPECT_THROW(dist::reduce_scatter(zeros({})), ShapeError);  // no dim 0 to split
  Tensor undefined;
  EXPECT_THROW(dist::all_reduce(undefined), ValueError);
  EXPECT_THROW(dist::init(), dist::DistError);  // already initialised
  EXPECT_THROW(data::DistributedSampler(W(), W()), ValueError);
  dist::barrier();  // the group is still usable after refused calls
}

// --- DistributedDataParallel

nn::Chain make_mlp() {
  manual_seed(7);
  return nn::Chain{nn::Dense(12, 16, nn::relu), nn::Dense(16, 16, nn::tanh), nn::Dense(16, 3)};
}

// The global batch of a step: 2 * B rows per rank; rank r's shard is rows [r * 2B, (r + 1) * 2B).
std::pair<Tensor, Tensor> global_batch(int step, int64_t rows) {
  manual_seed(1000 + static_cast<uint64_t>(step));
  return {randn({rows, 12}), randint(0, 3, {rows})};
}

// The largest relative difference of two parameter lists, tensor by tensor: ||a - b|| / ||b||.
double max_rel_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    const auto x = a[k].to_vector<double>(), y = b[k].to_vector<double>();
    double d = 0, n = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      d += (x[i] - y[i]) * (x[i] - y[i]);
      n += y[i] * y[i];
    }
    worst = std::max(worst, std::sqrt(d / std::max(n, 1e-30)));
  }
  return worst;
}

TEST(DDP, MatchesOneProcessOnTheWholeBatch) {
  const int64_t per_rank = 8, rows = per_rank * W();
  auto model = make_mlp();
  dist::DistributedDataParallel ddp(model, {.bucket_bytes = 1024});  // several buckets
  EXPECT_GT(ddp.num_buckets(), 1);
  optim::SGD opt(ddp.parameters(), {.lr = 0.1, .momentum = 0.9});
  auto ref = make_mlp();  // the same initial weights, trained alone on the whole batch
  optim::SGD ref_opt(ref.parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 20; ++step) {
    auto [x, y] = global_batch(step, rows);
    opt.zero_grad();
    nn::cross_entropy(ddp(x.slice(0, R() * per_rank, (R() + 1) * per_rank)),
                      y.slice(0, R() * per_rank, (R() + 1) * per_rank))
        .backward();
    opt.step();
    ref_opt.zero_grad();
    nn::cross_entropy(ref(x), y).backward();
    ref_opt.step();
  }
  EXPECT_LE(max_rel_diff(ddp.parameters(), ref.parameters()), 1e-6);
  // and the ranks agree exactly
  for (Tensor p : ddp.parameters()) {
    Tensor q = p.clone();
    dist::broadcast(q, 0);
    EXPECT_EQ(q.to_vector<double>(), p.to_vector<double>());
  }
  const dist::DDPStats s = ddp.last_stats();
  EXPECT_EQ(s.buckets, ddp.num_buckets());
  EXPECT_GE(s.hidden_fraction(), 0.0);
  EXPECT_LE(s.hidden_fraction(), 1.0);
}

TEST(DDP, StartsFromRankZerosWeights) {
  manual_seed(100 + static_cast<uint64_t>(R()));  // different weights on every rank
  nn::Chain m{nn::Dense(4, 5), nn::Dense(5, 2)};
  dist::DistributedDataParallel ddp(m);
  for (Tensor p : ddp.parameters()) {
    std::vector<Tensor> all = dist::all_gather(p);
    for (const Tensor& q : all) EXPECT_EQ(q.to_vector<double>(), all[0].to_vector<double>());
  }
}

TEST(DDP, NoSyncAccumulatesThenAverages) {
  const int64_t per_rank = 4, rows = 2 * per_rank * W();  // two micro-batches per rank
  auto model = make_mlp();
  dist::DistributedDataParallel ddp(model);
  auto ref = make_mlp();
  auto [x, y] = global_batch(3, rows);
  // micro-batch k of rank r: rows [(k * W + r) * per_rank, ... + per_rank)
  auto part = [&](const Tensor& t, int k) {
    const int64_t s = (k * W() + R()) * per_rank;
    return t.slice(0, s, s + per_rank);
  };
  {
    auto guard = ddp.no_sync();
    nn::cross_entropy(ddp(part(x, 0)), part(y, 0)).backward();
  }
  // Inside no_sync nothing was communicated: the gradient is this rank's own.
  nn::cross_entropy(ddp(part(x, 1)), part(y, 1)).backward();
  // The reference: the sum over both micro-batches of the mean loss over all ranks' rows of that micro-batch.
  for (int k = 0; k < 2; ++k)
    nn::cross_entropy(ref(x.slice(0, k * W() * per_rank, (k + 1) * W() * per_rank)),
                      y.slice(0, k * W() * per_rank, (k + 1) * W() * per_rank))
        .backward();
  std::vector<Tensor> g, rg;
  for (Tensor p : ddp.parameters()) g.push_back(p.grad());
  for (Tensor p : ref.parameters()) rg.push_back(p.grad());
  EXPECT_LE(max_rel_diff(g, rg), 1e-5);
}

// A model whose second head is used only by rank 0, and whose third head is used by nobody.
struct TwoHeads : nn::Module {
  nn::Dense body{6, 8, nn::relu}, a{8, 2}, b{8, 2}, unused{8, 2};
  TwoHeads() {
    register_module("body", body);
    register_module("a", a);
    register_module("b", b);
    register_module("unused", unused);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = body(x);
    Tensor out = a(h);
    if (dist::rank() == 0) out = out + b(h);
    return out;
  }
};

TEST(DDP, ParametersWithoutGradientsDoNotHang) {
  manual_seed(5);
  TwoHeads m;
  dist::DistributedDataParallel ddp(m, {.bucket_bytes = 64});
  manual_seed(50 + static_cast<uint64_t>(R()));
  Tensor x = randn({4, 6});
  for (int step = 0; step < 3; ++step) {
    ddp.zero_grad();
    sum(ddp(x)).backward();
    // b: the average of rank 0's gradient and zeros from the others, the same on every rank.
    Tensor gb = m.b.parameters()[0].grad();
    ASSERT_TRUE(gb.defined());
    std::vector<Tensor> all = dist::all_gather(gb);
    for (const Tensor& q : all) EXPECT_EQ(q.to_vector<double>(), all[0].to_vector<double>());
    // no rank used `unused`: its .grad stays undefined
    EXPECT_FALSE(m.unused.parameters()[0].grad().defined());
  }
}

TEST(DDP, ARankThatSkipsBackwardStaysInStep) {
  auto model = make_mlp();
  dist::DistributedDataParallel ddp(model, {.bucket_bytes = 1024});
  manual_seed(60 + static_cast<uint64_t>(R()));
  Tensor x = randn({3, 12});
  Tensor out = ddp(x);
  if (R() == 0) sum(out).backward();  // the other ranks drop this pass; their next forward finishes it
  for (int step = 0; step < 2; ++step) {
    ddp.zero_grad();
    sum(ddp(x)).backward();
    for (Tensor p : ddp.parameters()) {
      std::vector<Tensor> all = dist::all_gather(p.grad());
      for (const Tensor& q : all) EXPECT_EQ(q.to_vector<double>(), all[0].to_vector<double>());
    }
  }
}

TEST(DDP, HooksAreRemovedWithTheWrapper) {
  auto model = make_mlp();
  {
    dist::DistributedDataParallel ddp(model);
    sum(ddp(randn({2, 12}))).backward();
  }
  // Without the wrapper, backward is local: no collective is started (a rank-dependent loss stays different).
  for (Tensor p : model.parameters()) p.set_grad({});
  sum(model(full({2, 12}, static_cast<double>(R())))).backward();
  Tensor g = model.parameters()[0].grad();
  std::vector<Tensor> all = dist::all_gather(g);
  if (W() > 1) EXPECT_NE(all[0].to_vector<double>(), all[1].to_vector<double>());
}

// --- DistributedSampler

TEST(DistributedSampler, ShardsAreDisjointEqualAndCoverTheData) {
  for (bool drop_last : {false, true})
    for (int64_t n : {10, 11, 3}) {
      std::multiset<int64_t> seen;
      int64_t per = -1;
      for (int r = 0; r < 3; ++r) {
        data::DistributedSampler s(r, 3, {.shuffle = true, .seed = 4, .drop_last = drop_last});
        auto idx = s.indices(n, 2);
        EXPECT_EQ(static_cast<int64_t>(idx.size()), s.size(n));
        if (per >= 0) EXPECT_EQ(static_cast<int64_t>(idx.size()), per);
        per = static_cast<int64_t>(idx.size());
        seen.insert(idx.begin(), idx.end());
      }
      for (int64_t i : seen) EXPECT_TRUE(i >= 0 && i < n);
      std::set<int64_t> distinct(seen.begin(), seen.end());
      if (drop_last) EXPECT_EQ(seen.size(), distinct.size());    // no sample twice
      else EXPECT_EQ(static_cast<int64_t>(distinct.size()), n);  // every sample at least once
    }
  // a new epoch, a new order; the same epoch, the same order
  data::DistributedSampler s(0, 2, {.seed = 9});
  EXPECT_NE(s.indices(100, 0), s.indices(100, 1));
  EXPECT_EQ(s.indices(100, 1), s.indices(100, 1));
}

TEST(DistributedSampler, DrivesTheDataLoader) {
  Tensor x = arange(20, {.dtype = kFloat32}).reshape({20, 1});
  data::TensorDataset ds(x, x);
  data::DataLoader loader(ds, {.batch_size = 4,
                               .sampler = std::make_shared<data::DistributedSampler>(
                                   R(), W(), data::DistributedSamplerOptions{.shuffle = false})});
  std::vector<double> mine;
  for (auto [xb, yb] : loader)
    for (double v : xb.to_vector<double>()) mine.push_back(v);
  EXPECT_EQ(static_cast<int64_t>(mine.size()), (20 + W() - 1) / W());
  for (size_t k = 0; k < mine.size(); ++k) EXPECT_EQ(mine[k], static_cast<double>((R() + k * W()) % 20));
  EXPECT_THROW(data::DataLoader(ds, {.shuffle = true, .sampler = std::make_shared<data::DistributedSampler>(0, 1)}),
               ValueError);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // A short timeout: a test that fails on one rank and skips a collective must not hang the suite.
  dist::init({.timeout_s = 120});
  const int rc = RUN_ALL_TESTS();
  dist::finalize();
  return rc;
}
