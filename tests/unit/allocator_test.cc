#include "backends/allocator.h"

#include <gtest/gtest.h>

#include <ostream>
#include <stdexcept>
#include <vector>

namespace mimicfs {

// Failures print "ENOSPC" rather than the bytes of an Errno.
static void PrintTo(Errno e, std::ostream* os) { *os << errno_name(e.value); }

namespace {

using Ranges = std::vector<BlockRange>;

// Allocates or fails the test.
Ranges take(Allocator& allocator, uint64_t goal, uint64_t count) {
  auto runs = allocator.allocate(goal, count);
  EXPECT_TRUE(runs.has_value()) << "allocate(" << goal << ", " << count << ") failed";
  return runs.value_or(Ranges{});
}

TEST(Allocator, NewAllocatorIsOneFreeExtent) {
  Allocator allocator(DeviceGeometry{100});
  const FreeSpaceSummary s = allocator.summary();
  EXPECT_EQ(s.total_blocks, 100u);
  EXPECT_EQ(s.free_blocks, 100u);
  EXPECT_EQ(s.free_extents, 1u);
  EXPECT_EQ(s.largest_free_extent, 100u);
  EXPECT_EQ(allocator.cursor(0), 0u);
}

TEST(Allocator, AllocatesAtGoal) {
  Allocator allocator(DeviceGeometry{100});
  EXPECT_EQ(take(allocator, 40, 10), (Ranges{{40, 10}}));
  EXPECT_EQ(allocator.free_blocks(), 90u);
  const FreeSpaceSummary s = allocator.summary();
  EXPECT_EQ(s.free_extents, 2u);  // [0,40) and [50,100)
  EXPECT_EQ(s.largest_free_extent, 50u);
}

TEST(Allocator, ZeroBlocksAllocatesNothing) {
  Allocator allocator(DeviceGeometry{100});
  EXPECT_EQ(take(allocator, 40, 0), Ranges{});
  EXPECT_EQ(allocator.free_blocks(), 100u);
}

TEST(Allocator, GoalInsideUsedRegionMovesToNextFreeExtent) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_EQ(take(allocator, 10, 20), (Ranges{{10, 20}}));
  EXPECT_EQ(take(allocator, 15, 5), (Ranges{{30, 5}}));
}

TEST(Allocator, GoalPastLastFreeExtentWrapsToBlockZero) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_EQ(take(allocator, 90, 10), (Ranges{{90, 10}}));
  EXPECT_EQ(take(allocator, 95, 5), (Ranges{{0, 5}}));
}

TEST(Allocator, GoalBeyondDeviceWrapsModuloItsSize) {
  Allocator allocator(DeviceGeometry{100});
  EXPECT_EQ(take(allocator, 250, 5), (Ranges{{50, 5}}));
}

TEST(Allocator, AllocationRunningOffTheEndContinuesAtBlockZero) {
  Allocator allocator(DeviceGeometry{100});
  EXPECT_EQ(take(allocator, 95, 10), (Ranges{{95, 5}, {0, 5}}));
  EXPECT_EQ(allocator.free_blocks(), 90u);
}

TEST(Allocator, AllocationSplitAcrossFreeExtentsReturnsSeveralRuns) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_EQ(take(allocator, 10, 10), (Ranges{{10, 10}}));
  ASSERT_EQ(take(allocator, 30, 10), (Ranges{{30, 10}}));
  // Free: [0,10) [20,30) [40,100). From goal 5: 5 blocks, then 10, then 5.
  EXPECT_EQ(take(allocator, 5, 20), (Ranges{{5, 5}, {20, 10}, {40, 5}}));
  EXPECT_EQ(allocator.free_blocks(), 100u - 40u);
  EXPECT_EQ(allocator.cursor(0), 45u);
}

TEST(Allocator, AdjacentRunsAreMerged) {
  Allocator allocator(DeviceGeometry{100});
  // Goal 0 with [0,100) free is one run even though nothing split it.
  EXPECT_EQ(take(allocator, 0, 100), (Ranges{{0, 100}}));
}

TEST(Allocator, NotEnoughFreeIsEnospcWithNothingAllocated) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_EQ(take(allocator, 0, 60), (Ranges{{0, 60}}));
  const FreeSpaceSummary before = allocator.summary();
  const uint64_t cursor_before = allocator.cursor(0);
  auto result = allocator.allocate(70, 41);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error(), Errno{ENOSPC});
  const FreeSpaceSummary after = allocator.summary();
  EXPECT_EQ(after.free_blocks, before.free_blocks);
  EXPECT_EQ(after.free_extents, before.free_extents);
  EXPECT_EQ(after.largest_free_extent, before.largest_free_extent);
  EXPECT_EQ(allocator.cursor(0), cursor_before);
  // Exactly what is free still succeeds.
  EXPECT_EQ(take(allocator, 70, 40), (Ranges{{70, 30}, {60, 10}}));
}

TEST(Allocator, ExhaustingSpaceExactlyThenOneMoreBlockIsEnospc) {
  Allocator allocator(DeviceGeometry{64});
  ASSERT_EQ(take(allocator, 0, 32), (Ranges{{0, 32}}));
  ASSERT_EQ(take(allocator, 0, 32), (Ranges{{32, 32}}));
  EXPECT_EQ(allocator.free_blocks(), 0u);
  EXPECT_EQ(allocator.summary().free_extents, 0u);
  EXPECT_EQ(allocator.summary().largest_free_extent, 0u);
  auto result = allocator.allocate(0, 1);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error(), Errno{ENOSPC});
  EXPECT_EQ(allocator.free_blocks(), 0u);
}

TEST(Allocator, ReleaseMergesWithBothNeighbours) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_EQ(take(allocator, 0, 100), (Ranges{{0, 100}}));
  allocator.release({10, 10});
  allocator.release({30, 10});
  EXPECT_EQ(allocator.summary().free_extents, 2u);
  EXPECT_EQ(allocator.summary().largest_free_extent, 10u);
  allocator.release({20, 10});  // fills the gap: [10,40)
  EXPECT_EQ(allocator.summary().free_extents, 1u);
  EXPECT_EQ(allocator.summary().largest_free_extent, 30u);
  EXPECT_EQ(allocator.free_blocks(), 30u);
}

TEST(Allocator, ReleaseMergesWithLeftOrRightNeighbourOnly) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_EQ(take(allocator, 0, 100), (Ranges{{0, 100}}));
  allocator.release({10, 10});
  allocator.release({20, 5});  // touches the left free extent
  EXPECT_EQ(allocator.summary().free_extents, 1u);
  EXPECT_EQ(allocator.summary().largest_free_extent, 15u);
  allocator.release({5, 5});  // touches it from the left
  EXPECT_EQ(allocator.summary().free_extents, 1u);
  EXPECT_EQ(allocator.summary().largest_free_extent, 20u);
  allocator.release({50, 5});  // touches nothing
  EXPECT_EQ(allocator.summary().free_extents, 2u);
  EXPECT_EQ(allocator.free_blocks(), 25u);
}

TEST(Allocator, ReleaseEverythingRestoresOneExtent) {
  Allocator allocator(DeviceGeometry{100});
  const Ranges a = take(allocator, 0, 30);
  const Ranges b = take(allocator, 0, 30);
  const Ranges c = take(allocator, 0, 40);
  for (const Ranges* runs : {&b, &a, &c}) {
    for (const BlockRange& run : *runs) allocator.release(run);
  }
  const FreeSpaceSummary s = allocator.summary();
  EXPECT_EQ(s.free_blocks, 100u);
  EXPECT_EQ(s.free_extents, 1u);
  EXPECT_EQ(s.largest_free_extent, 100u);
}

TEST(Allocator, DoubleReleaseThrowsLogicError) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_EQ(take(allocator, 0, 50), (Ranges{{0, 50}}));
  allocator.release({10, 10});
  EXPECT_THROW(allocator.release({10, 10}), std::logic_error);  // the same range
  EXPECT_THROW(allocator.release({15, 2}), std::logic_error);   // inside a free extent
  EXPECT_THROW(allocator.release({5, 10}), std::logic_error);   // overlaps its start
  EXPECT_THROW(allocator.release({19, 5}), std::logic_error);   // overlaps its end
  EXPECT_THROW(allocator.release({45, 10}), std::logic_error);  // runs into [50,100)
  EXPECT_EQ(allocator.free_blocks(), 60u);
  EXPECT_EQ(allocator.summary().free_extents, 2u);
}

TEST(Allocator, ReleaseZeroLengthDoesNothing) {
  Allocator allocator(DeviceGeometry{100});
  allocator.release({10, 0});  // even inside free space
  EXPECT_EQ(allocator.free_blocks(), 100u);
}

TEST(Allocator, CursorIsWhereTheLastAllocationEnded) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_EQ(take(allocator, 20, 5), (Ranges{{20, 5}}));
  EXPECT_EQ(allocator.cursor(0), 25u);
  ASSERT_EQ(take(allocator, allocator.cursor(0), 5), (Ranges{{25, 5}}));
  EXPECT_EQ(allocator.cursor(0), 30u);
  ASSERT_EQ(take(allocator, 95, 10), (Ranges{{95, 5}, {0, 5}}));
  EXPECT_EQ(allocator.cursor(0), 5u);
}

TEST(Allocator, FailedAllocationLeavesCursorAlone) {
  Allocator allocator(DeviceGeometry{10});
  ASSERT_EQ(take(allocator, 3, 2), (Ranges{{3, 2}}));
  ASSERT_FALSE(allocator.allocate(0, 9).has_value());
  EXPECT_EQ(allocator.cursor(0), 5u);
}

}  // namespace
}  // namespace mimicfs
