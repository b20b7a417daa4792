// Tests of BlockPool (core/internal/ember/internal/block_pool.h), the caching policy shared by the CUDA caching
// allocator and memory::plan's simulation of it: best fit, split, merge, pending blocks, segment release. Runs on
// any machine: the policy makes no driver call.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "ember/internal/block_pool.h"

namespace {

using ember::detail::BlockPool;
using ember::detail::kCudaSmallSize;

constexpr size_t KiB = 1024, MiB = 1024 * 1024;

int g_live_blocks = 0;  // blocks alive: the pool must delete exactly the blocks it merges or releases

struct TestBlock : ember::detail::PoolBlockBase<TestBlock> {
  TestBlock(uintptr_t addr, size_t bytes, void* stream, bool small)
      : PoolBlockBase(reinterpret_cast<void*>(addr), bytes, stream, small) {
    ++g_live_blocks;
  }
  TestBlock(const TestBlock& n, void* p, size_t bytes) : PoolBlockBase(p, bytes, n.stream, n.small) {
    ++g_live_blocks;
  }
  ~TestBlock() { --g_live_blocks; }
};
using Pool = BlockPool<TestBlock>;

uintptr_t addr(const TestBlock* b) { return reinterpret_cast<uintptr_t>(b->ptr); }
void* stream(int i) { return reinterpret_cast<void*>(static_cast<uintptr_t>(i)); }

// As the allocators do: a new segment for `size`, split, allocated.
TestBlock* take_new(Pool& pool, uintptr_t at, size_t segment, size_t size, void* s = nullptr) {
  auto* b = new TestBlock(at, segment, s, Pool::is_small(size));
  pool.split(b, size);
  b->allocated = true;
  return b;
}
TestBlock* take(Pool& pool, size_t size, void* s = nullptr) {
  TestBlock* b = pool.take_best_fit(s, size);
  if (b) {
    pool.split(b, size);
    b->allocated = true;
  }
  return b;
}
void give(Pool& pool, TestBlock* b) {
  b->allocated = false;
  pool.put_back(b);
}

class BlockPoolTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(g_live_blocks, 0) << "blocks leaked or deleted twice"; }
};

TEST_F(BlockPoolTest, SmallSegmentIsSplitIntoTheRequestAndAFreeRest) {
  Pool pool;
  TestBlock* a = take_new(pool, 0x100000, 2 * MiB, 512 * KiB);
  EXPECT_EQ(a->size, 512 * KiB);
  ASSERT_NE(a->next, nullptr);
  EXPECT_EQ(addr(a->next), 0x100000 + 512 * KiB);
  EXPECT_EQ(a->next->size, 2 * MiB - 512 * KiB);
  EXPECT_EQ(pool.free_blocks(true), 1u);
  EXPECT_EQ(pool.free_blocks(false), 0u);
  // The next request is carved from the rest, right after the first.
  TestBlock* b = take(pool, 512 * KiB);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(addr(b), 0x100000 + 512 * KiB);
  EXPECT_EQ(b->prev, a);
  give(pool, a);
  give(pool, b);
  EXPECT_EQ(pool.free_blocks(true), 1u) << "the three pieces merged back into one segment";
  EXPECT_EQ(pool.largest_free(), 2 * MiB);
  pool.release_segments([](TestBlock*) {});
}

TEST_F(BlockPoolTest, LargePoolKeepsARestOfAtMostOneMiBInsteadOfSplitting) {
  Pool pool;
  // 20 MiB segment, 19 MiB asked: the 1 MiB rest is not worth a block of its own.
  TestBlock* a = take_new(pool, 0x1000000, 20 * MiB, 19 * MiB);
  EXPECT_EQ(a->size, 20 * MiB);
  EXPECT_EQ(a->next, nullptr);
  EXPECT_EQ(pool.free_blocks(false), 0u);
  // 3 MiB asked: the 17 MiB rest is split off.
  TestBlock* b = take_new(pool, 0x4000000, 20 * MiB, 3 * MiB);
  EXPECT_EQ(b->size, 3 * MiB);
  EXPECT_EQ(pool.free_blocks(false), 1u);
  give(pool, a);
  give(pool, b);
  pool.release_segments([](TestBlock*) {});
}

TEST_F(BlockPoolTest, BestFitIsTheSmallestThatHoldsTheRequestOnItsStreamLowestAddressFirst) {
  Pool pool;
  // Three small-pool segments; freed whole: free blocks of 2 MiB at two addresses on stream 1, one on stream 2.
  TestBlock* s1a = take_new(pool, 0x800000, 2 * MiB, 1 * MiB, stream(1));
  TestBlock* s1b = take_new(pool, 0x200000, 2 * MiB, 1 * MiB, stream(1));
  TestBlock* s2 = take_new(pool, 0x400000, 2 * MiB, 1 * MiB, stream(2));
  give(pool, s1a);
  give(pool, s1b);
  give(pool, s2);
  TestBlock* got = pool.take_best_fit(stream(1), 1 * MiB);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(addr(got), 0x200000u) << "ties go to the lowest address";
  EXPECT_EQ(got->stream, stream(1));
  pool.put_back(got);
  EXPECT_EQ(pool.take_best_fit(stream(3), 512 * KiB), nullptr) << "no block of another stream is handed out";
  // A smaller free piece on stream 1 is preferred over a whole segment.
  TestBlock* small = take(pool, 1 * MiB, stream(1));  // leaves a 1 MiB rest in the 0x200000 segment
  TestBlock* fit = pool.take_best_fit(stream(1), 512 * KiB);
  ASSERT_NE(fit, nullptr);
  EXPECT_EQ(addr(fit), 0x200000u + 1 * MiB);
  pool.put_back(fit);
  give(pool, small);
  pool.release_segments([](TestBlock*) {});
  EXPECT_EQ(pool.free_blocks(true), 0u);
}

TEST_F(BlockPoolTest, APendingBlockIsNeitherMergedNorHandedOut) {
  Pool pool;
  TestBlock* a = take_new(pool, 0x100000, 2 * MiB, 512 * KiB);
  TestBlock* b = take(pool, 512 * KiB);
  a->allocated = false;
  a->event_count = 1;  // freed, but another stream may still read it
  give(pool, b);       // must not absorb the pending `a`
  EXPECT_EQ(b->prev, a);
  EXPECT_EQ(addr(b), 0x100000 + 512 * KiB);
  EXPECT_EQ(b->size, 2 * MiB - 512 * KiB) << "b merged with the free rest after it, not with a";
  EXPECT_EQ(pool.take_best_fit(nullptr, 2 * MiB), nullptr);
  a->event_count = 0;
  pool.put_back(a);
  EXPECT_EQ(pool.free_blocks(true), 1u);
  EXPECT_EQ(pool.largest_free(), 2 * MiB);
  pool.release_segments([](TestBlock*) {});
}

TEST_F(BlockPoolTest, OnlySegmentsThatAreOneFreeBlockAreReleased) {
  Pool pool;
  TestBlock* whole = take_new(pool, 0x100000, 2 * MiB, 1 * MiB);
  TestBlock* part = take_new(pool, 0x400000, 2 * MiB, 512 * KiB);  // its free rest belongs to a split segment
  TestBlock* large = take_new(pool, 0x2000000, 20 * MiB, 20 * MiB);
  EXPECT_FALSE(large->small);
  give(pool, whole);
  give(pool, large);
  std::vector<uintptr_t> released;
  pool.release_segments([&](TestBlock* b) { released.push_back(addr(b)); });
  EXPECT_EQ(released, (std::vector<uintptr_t>{0x2000000, 0x100000}));  // large pool first, then small
  EXPECT_EQ(pool.free_blocks(true), 1u) << "the rest of the split segment stays";
  give(pool, part);
  released.clear();
  pool.release_segments([&](TestBlock* b) { released.push_back(addr(b)); });
  EXPECT_EQ(released, (std::vector<uintptr_t>{0x400000}));
}

TEST_F(BlockPoolTest, AFailedReleaseKeepsTheSegmentCached) {
  Pool pool;
  TestBlock* a = take_new(pool, 0x100000, 2 * MiB, 1 * MiB);
  give(pool, a);
  EXPECT_THROW(pool.release_segments([](TestBlock*) { throw std::runtime_error("cudaFree failed"); }),
               std::runtime_error);
  EXPECT_EQ(pool.free_blocks(true), 1u);
  TestBlock* again = take(pool, 1 * MiB);
  EXPECT_EQ(again, a);
  give(pool, again);
  pool.release_segments([](TestBlock*) {});
}

TEST_F(BlockPoolTest, PoolChoiceFollowsTheRoundedSize) {
  EXPECT_TRUE(Pool::is_small(kCudaSmallSize));
  EXPECT_FALSE(Pool::is_small(kCudaSmallSize + 512));
}

}  // namespace
