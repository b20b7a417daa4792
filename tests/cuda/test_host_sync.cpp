// tests: the host waits Ember makes (cuda::host_sync_count) and the index checks that run on the GPU without one.
// The steps ember_bench_gpu times back to back (the bench's MLP and CNN, cross_entropy, Adam), an Embedding model
// and an SGD step add no wait; clip_grad_norm_ adds one, whatever the number of parameters. Targets or indices out
// of range on the device are reported as IndexError, naming the call and the values, by the next synchronisation;
// the kernels in between read no memory outside their tensors, and the GPU stays usable. from_blob refuses host
// memory handed in as the device's. Skipped without a GPU (the CPU checks at once: tested with each op).
#include <gtest/gtest.h>

#include <cmath>

#include "gpu_or_cpu.h"
#include "models.h"  // bench/models.h: the benchmark's models

namespace ember {
namespace {

class HostSync : public CudaSuite {};

// Steps of `model` on random [batch, 1, 28, 28] inputs held on the GPU, as ember_bench_gpu's "no sync" loop.
uint64_t waits_in_steps(nn::Chain& model, optim::Optimizer& opt, int64_t batch, int steps) {
  const Device dev = Device::cuda();
  const Tensor x = rand({batch, 1, 28, 28}, {.device = dev});
  const Tensor y = randint(0, 10, {batch}, {.dtype = kInt64, .device = dev});
  auto step = [&] {
    Tensor loss = nn::cross_entropy(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  step();  // the first step allocates (and may create handles); not counted
  cuda::synchronize();
  const uint64_t before = cuda::host_sync_count();
  for (int i = 0; i < steps; ++i) step();
  const uint64_t waits = cuda::host_sync_count() - before;
  cuda::synchronize();
  return waits;
}

TEST_F(HostSync, TheBenchmarkStepsMakeNoHostWait) {
  for (const char* kind : {"mlp", "mlp-big", "cnn", "cnn-bn"}) {
    manual_seed(0);
    nn::Chain model = bench::model(kind);
    model.to(Device::cuda());
    optim::Adam adam(model.parameters(), {.lr = 1e-3});
    EXPECT_EQ(waits_in_steps(model, adam, 64, 5), 0u) << kind << " with Adam";
    optim::SGD sgd(model.parameters(), {.lr = 0.01, .momentum = 0.9});
    EXPECT_EQ(waits_in_steps(model, sgd, 64, 5), 0u) << kind << " with SGD";
  }
}

TEST_F(HostSync, EmbeddingAndNllLossMakeNoHostWait) {
  manual_seed(1);
  const Device dev = Device::cuda();
  nn::Embedding emb(100, 16);
  emb.to(dev);
  const Tensor ids = randint(0, 100, {32}, {.dtype = kInt64, .device = dev});
  const Tensor y = randint(0, 16, {32}, {.dtype = kInt64, .device = dev});
  (void)nn::nll_loss(log_softmax(emb(ids), 1), y);
  cuda::synchronize();
  const uint64_t before = cuda::host_sync_count();
  Tensor loss = nn::nll_loss(log_softmax(emb(ids), 1), y);
  loss.backward();
  EXPECT_EQ(cuda::host_sync_count() - before, 0u);
}

// arange runs on the device as one kernel (the index ops build index tensors with it every step): no host copy, no
// wait, exactly the CPU's values (both compute fma(i, step, start) in double), at lengths past one block's too.
TEST_F(HostSync, ArangeIsMadeOnTheDevice) {
  struct Case {
    double start, end, step;
    DType dt;
  };
  for (const Case& c : {Case{0, 10, 1, kInt64}, Case{-3, 7.5, 0.25, kFloat32}, Case{5, -5, -0.7, kFloat64},
                        Case{0, 1e6, 3, kInt32}, Case{1, 1, 1, kFloat32}, Case{0.1, 70000, 1.1, kFloat64},
                        Case{2.5, 300, 0.3, kInt64}, Case{0, 1000, 0.5, kBFloat16}}) {
    cuda::synchronize();
    const uint64_t before = cuda::host_sync_count();
    const Tensor g = arange(c.start, c.end, c.step, {.dtype = c.dt, .device = Device::cuda()});
    EXPECT_EQ(cuda::host_sync_count(), before);
    const Tensor want = arange(c.start, c.end, c.step, {.dtype = c.dt});
    EXPECT_EQ(g.dtype(), c.dt);
    EXPECT_EQ(test::values(g), test::values(want)) << c.start << " " << c.end << " " << c.step;
  }
}

TEST_F(HostSync, EveryWaitIsCounted) {
  const Tensor a = ones({1000}, {.device = Device::cuda()});
  uint64_t n = cuda::host_sync_count();
  cuda::synchronize();
  EXPECT_EQ(cuda::host_sync_count(), n + 1) << "synchronize";
  n = cuda::host_sync_count();
  (void)a.cpu();
  EXPECT_EQ(cuda::host_sync_count(), n + 1) << "a copy to the host";
  n = cuda::host_sync_count();
  cuda::Event e;
  e.record();
  e.synchronize();
  EXPECT_EQ(cuda::host_sync_count(), n + 1) << "an event wait";
}

TEST_F(HostSync, ClipGradNormReadsOncePerDevice) {
  manual_seed(2);
  nn::Chain model = bench::model("mlp-big");  // 6 parameters
  model.to(Device::cuda());
  Tensor loss = sum(square(model(rand({8, 1, 28, 28}, {.device = Device::cuda()}))));
  loss.backward();
  double want = 0;
  for (const Tensor& p : model.parameters()) want += test::values(sum(square(p.grad().to(kFloat64))))[0];
  cuda::synchronize();
  const uint64_t before = cuda::host_sync_count();
  const double norm = nn::clip_grad_norm_(model.parameters(), 0.5);
  EXPECT_EQ(cuda::host_sync_count() - before, 1u);
  EXPECT_NEAR(norm, std::sqrt(want), 1e-9 * std::sqrt(want));
  double after = 0;
  for (const Tensor& p : model.parameters()) after += test::values(sum(square(p.grad().to(kFloat64))))[0];
  EXPECT_NEAR(std::sqrt(after), 0.5, 1e-5);
}

// Bad targets: cross_entropy returns at once; the next synchronisation throws, naming the call and the values.
TEST_F(HostSync, BadTargetsAreReportedByTheNextSynchronisation) {
  const Device dev = Device::cuda();
  const Tensor logits = randn({4, 3}, {.device = dev});
  const Tensor bad = tensor<int64_t>({0, 1, 7, 2}).to(dev);
  cuda::synchronize();
  const uint64_t before = cuda::host_sync_count();
  Tensor loss;
  EXPECT_NO_THROW(loss = nn::cross_entropy(logits, bad));
  EXPECT_EQ(cuda::host_sync_count(), before) << "the check must not wait";
  EXPECT_THROW_MSG((void)loss.cpu(), IndexError, "cross_entropy", "[0, 3)", "[4, 3]", "from 0 to 7", "cuda:0",
                   "synchronisation");
  // reported once; the GPU goes on working
  EXPECT_NO_THROW(cuda::synchronize());
  EXPECT_EQ(test::values(nn::cross_entropy(logits, tensor<int64_t>({0, 1, 2, 2}).to(dev)).cpu()).size(), 1u);
  EXPECT_THROW_MSG(
      {
        (void)nn::nll_loss(log_softmax(logits, 1), tensor<int64_t>({-3, 0, 0, 0}).to(dev));
        cuda::synchronize();
      },
      IndexError, "nll_loss", "from -3 to 0");
}

TEST_F(HostSync, BadIndicesReadNothingOutsideTheTensorAndAreReported) {
  const Device dev = Device::cuda();
  const Tensor x = arange(12, {.dtype = kFloat32}).reshape({3, 4}).to(dev);
  Tensor picked;
  EXPECT_NO_THROW(picked = index_select(x, 0, tensor<int64_t>({2, 1000000, 0}).to(dev)));
  EXPECT_THROW_MSG(cuda::synchronize(), IndexError, "index_select", "index 1000000", "dim 0", "size 3");
  // the bad row was skipped (zeros), the good ones were read
  EXPECT_EQ(test::values(picked), (std::vector<double>{8, 9, 10, 11, 0, 0, 0, 0, 0, 1, 2, 3}));
  nn::Embedding emb(10, 4);
  emb.to(dev);
  EXPECT_THROW_MSG((void)emb(tensor<int64_t>({3, -1}).to(dev)).cpu(), IndexError, "index -1", "num_embeddings = 10");
  EXPECT_THROW_MSG((void)gather(x, 1, tensor<int64_t>({0, 4, 1}, {3, 1}).to(dev)).cpu(), IndexError, "gather",
                   "index 4", "size 4");
  EXPECT_THROW_MSG(
      {
        (void)nn::onehotbatch(tensor<int64_t>({0, 9}).to(dev), 5);
        cuda::synchronize();
      },
      IndexError, "onehotbatch", "[0, 5)", "from 0 to 9");
  EXPECT_EQ(test::values(index_select(x, 1, tensor<int64_t>({3}).to(dev))), (std::vector<double>{3, 7, 11}));
}

TEST_F(HostSync, FromBlobTakesDeviceMemoryAndRefusesHostMemory) {
  const Tensor owner = arange(6, {.dtype = kFloat32, .device = Device::cuda()});
  const Tensor view = from_blob(owner.data_ptr(), {2, 3}, {.device = Device::cuda()});
  EXPECT_EQ(test::values(view), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  float host[6] = {};
  EXPECT_THROW_MSG(from_blob(host, {2, 3}, {.device = Device::cuda()}), DeviceError, "from_blob", "cuda:0",
                   "host memory", "to(cuda:0)");
  EXPECT_THROW_MSG(from_blob(owner.data_ptr(), {2}, {.device = Device::cuda(cuda::device_count())}), DeviceError,
                   "from_blob", "out of range");
}

TEST(HostSyncWithoutGpu, NoWaitsAreCounted) {
  if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(cuda::host_sync_count(), 0u);
}

}  // namespace
}  // namespace ember
