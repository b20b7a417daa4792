// tests: the NCCL engine (libember_dist_nccl.so) on its own, as a world of one on cuda:0 — dist::init needs MPI to
// hand out NCCL's id, which the GPU machine lacks. Its collectives reduce on the device; a request tests complete
// again after it completed (its event is gone by then: no use after destruction); the barrier's scratch comes from
// Ember's allocator and is given back with the engine. Skipped without a GPU or without the engine in this build.
#include <gtest/gtest.h>

#include <memory>

#include "ember/internal/comm.h"
#include "ember/internal/plugin_loader.h"
#include "gpu_or_cpu.h"

namespace ember {
namespace {

using dist::detail::Comm;

class NcclEngine : public CudaSuite {
 protected:
  void SetUp() override {
    CudaSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    std::string tried, opened;
    auto files = ember::detail::plugin_candidates("libember_dist_nccl.so", "EMBER_DIST_NCCL_PLUGIN");
    auto id = reinterpret_cast<dist::detail::NcclIdEntry>(
        ember::detail::find_plugin_entry(files, dist::detail::kNcclIdEntryName, &tried, &opened));
    auto create = reinterpret_cast<dist::detail::NcclEntry>(
        ember::detail::find_plugin_entry(files, dist::detail::kNcclEntryName, &tried, &opened));
    if (!id || !create) GTEST_SKIP() << "no NCCL engine in this build:" << tried;
    unsigned char uid[dist::detail::kNcclUniqueIdBytes];
    std::string why;
    ASSERT_TRUE(id(uid, &why)) << why;
    comm_.reset(create(dist::detail::kCommVersion, 0, 1, 0, uid, &why));
    ASSERT_NE(comm_, nullptr) << why;
  }
  // Polls a request as Work::wait does.
  static void wait(Comm& c, dist::detail::Request r) {
    while (!c.test(r)) {}
  }
  std::unique_ptr<Comm> comm_;
};

TEST_F(NcclEngine, CollectivesOfAWorldOfOne) {
  Tensor x = arange(6, {.dtype = kFloat32, .device = Device::cuda()});
  dist::detail::Request r = comm_->start_all_reduce(x.data_ptr(), 6, kFloat32, dist::detail::CommOp::Sum);
  wait(*comm_, r);
  EXPECT_TRUE(comm_->test(r)) << "a finished request stays finished";
  EXPECT_TRUE(comm_->test(r));
  EXPECT_EQ(test::values(x), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  Tensor out = zeros({6}, {.dtype = kFloat32, .device = Device::cuda()});
  wait(*comm_, comm_->start_all_gather(x.data_ptr(), out.data_ptr(), 6 * 4));
  EXPECT_EQ(test::values(out), test::values(x));
  wait(*comm_, comm_->start_barrier());
}

TEST_F(NcclEngine, TheBarrierScratchIsEmbersAndIsGivenBack) {
  cuda::synchronize();
  const size_t before = cuda::memory_allocated(0);
  wait(*comm_, comm_->start_barrier());
  EXPECT_GT(cuda::memory_allocated(0), before) << "the scratch comes from Ember's caching allocator";
  comm_.reset();
  EXPECT_EQ(cuda::memory_allocated(0), before);
}

}  // namespace
}  // namespace ember
