// SPDX-License-Identifier: Apache-2.0
#include "engine/space/allocator.h"
#include "engine/space/mkfs_geometry.h"

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

Errno error_of(const auto& result) {
  EXPECT_FALSE(result.has_value());
  return result ? Errno{0} : result.error();
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
  // Free: [0,10) [20,30) [40,100). No free extent holds 65: from goal 5, 5
  // blocks, then 10, then 50.
  EXPECT_EQ(take(allocator, 5, 65), (Ranges{{5, 5}, {20, 10}, {40, 50}}));
  EXPECT_EQ(allocator.free_blocks(), 100u - 85u);
  EXPECT_EQ(allocator.cursor(0), 90u);
}

// As xfs's by-size search and btrfs's find_free_extent: a free run at the goal
// too short for the request is passed over for the next one that holds it all;
// a request it holds takes it.
TEST(Allocator, AShortRunAtTheGoalIsPassedOverForOneThatHoldsTheRequest) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_EQ(take(allocator, 10, 10), (Ranges{{10, 10}}));
  ASSERT_EQ(take(allocator, 30, 10), (Ranges{{30, 10}}));
  // Free: [0,10) [20,30) [40,100).
  EXPECT_EQ(take(allocator, 5, 20), (Ranges{{40, 20}}));
  EXPECT_EQ(take(allocator, 5, 3), (Ranges{{5, 3}}));
  EXPECT_EQ(take(allocator, 8, 8), (Ranges{{20, 8}}));
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

// --- allocation groups

// Every group starts with metadata blocks that are never free, so the free
// space is one extent per group.
TEST(Allocator, GroupMetadataIsNeverFree) {
  Allocator allocator(uniform_groups(100, 25, 2));
  const FreeSpaceSummary s = allocator.summary();
  EXPECT_EQ(s.total_blocks, 100u);
  EXPECT_EQ(s.metadata_blocks, 8u);
  EXPECT_EQ(s.free_blocks, 92u);
  EXPECT_EQ(s.free_extents, 4u);
  EXPECT_EQ(s.largest_free_extent, 23u);
  EXPECT_EQ(allocator.group_count(), 4u);
  EXPECT_EQ(allocator.group_of(24), 0u);
  EXPECT_EQ(allocator.group_of(25), 1u);
}

// A last, shorter group still has its metadata, but never more blocks than it has.
TEST(Allocator, LastPartialGroupHasMetadataToo) {
  Allocator partial(uniform_groups(110, 25, 2));
  EXPECT_EQ(partial.group_count(), 5u);
  EXPECT_EQ(partial.summary().metadata_blocks, 10u);
  EXPECT_EQ(partial.summary().free_blocks, 100u);
  Allocator tiny(uniform_groups(101, 25, 2));  // the last group is a single block
  EXPECT_EQ(tiny.summary().metadata_blocks, 9u);
  EXPECT_EQ(tiny.summary().free_blocks, 92u);
}

// No group size, or one larger than the device, is one group.
TEST(Allocator, NoGroupSizeIsOneGroup) {
  EXPECT_EQ(Allocator(uniform_groups(100, 0, 0)).group_count(), 1u);
  EXPECT_EQ(Allocator(uniform_groups(100, 1000, 0)).group_count(), 1u);
  EXPECT_EQ(Allocator(uniform_groups(100, 0, 3)).summary().metadata_blocks, 3u);
}

// Groups without metadata are one free extent: a boundary splits nothing.
TEST(Allocator, GroupsWithoutMetadataAreOneFreeExtent) {
  Allocator allocator(uniform_groups(100, 25, 0));
  EXPECT_EQ(allocator.group_count(), 4u);
  EXPECT_EQ(allocator.summary().free_extents, 1u);
  EXPECT_EQ(take(allocator, 20, 10), (Ranges{{20, 10}}));
}

// An allocation crossing into the next group skips its metadata, so it comes back
// as two runs (ext4: a file crossing a block group is split there).
TEST(Allocator, AllocationCrossingAGroupSkipsItsMetadata) {
  Allocator allocator(uniform_groups(100, 25, 2));
  EXPECT_EQ(take(allocator, 20, 10), (Ranges{{20, 5}, {27, 5}}));
  EXPECT_EQ(allocator.free_blocks(), 82u);
  EXPECT_EQ(allocator.summary().metadata_blocks, 8u);
}

// A goal inside a group's metadata moves to the group's first data block.
TEST(Allocator, GoalInsideMetadataMovesToTheFirstDataBlock) {
  Allocator allocator(uniform_groups(100, 25, 2));
  EXPECT_EQ(take(allocator, 25, 3), (Ranges{{27, 3}}));
}

// Filling the device never hands out a metadata block.
TEST(Allocator, FillingTheDeviceNeverAllocatesMetadata) {
  Allocator allocator(uniform_groups(100, 25, 2));
  const Ranges runs = take(allocator, 0, 92);
  for (const BlockRange& run : runs) {
    for (uint64_t b = run.start; b < run.start + run.length; ++b) {
      EXPECT_GE(b % 25, 2u) << "metadata block " << b << " allocated";
    }
  }
  EXPECT_EQ(allocator.free_blocks(), 0u);
  EXPECT_EQ(error_of(allocator.allocate(0, 1)), Errno{ENOSPC});
}

// Each group has its own cursor; an unused group's is its first data block.
TEST(Allocator, CursorIsPerGroup) {
  Allocator allocator(uniform_groups(100, 25, 2));
  EXPECT_EQ(allocator.cursor(0), 2u);
  EXPECT_EQ(allocator.cursor(1), 27u);
  EXPECT_EQ(allocator.cursor(3), 77u);
  ASSERT_EQ(take(allocator, allocator.cursor(1), 5), (Ranges{{27, 5}}));
  EXPECT_EQ(allocator.cursor(1), 32u);
  EXPECT_EQ(allocator.cursor(0), 2u);
  EXPECT_EQ(allocator.cursor(2), 52u);
  // An allocation that starts in group 0 and ends in group 1 moves group 0's cursor only.
  ASSERT_EQ(take(allocator, 24, 3), (Ranges{{24, 1}, {32, 2}}));
  EXPECT_EQ(allocator.cursor(0), 34u);
  EXPECT_EQ(allocator.cursor(1), 32u);
}

// --- reservations

// A reservation keeps free blocks for its owner: they stay free (statfs counts
// them as used) and nobody else can allocate them.
TEST(Allocator, ReservedBlocksStayFreeButCannotBeTaken) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_TRUE(allocator.reserve(60).has_value());
  EXPECT_EQ(allocator.summary().reserved_blocks, 60u);
  EXPECT_EQ(allocator.free_blocks(), 100u);
  EXPECT_EQ(error_of(allocator.allocate(0, 41)), Errno{ENOSPC});
  EXPECT_EQ(take(allocator, 0, 40), (Ranges{{0, 40}}));
  EXPECT_EQ(error_of(allocator.allocate(0, 1)), Errno{ENOSPC});
  EXPECT_EQ(allocator.free_blocks(), 60u);
  EXPECT_EQ(allocator.summary().reserved_blocks, 60u);
}

// A reservation bigger than the unreserved free space fails with nothing reserved.
TEST(Allocator, ReserveBeyondUnreservedFreeIsEnospcWithNothingChanged) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_TRUE(allocator.reserve(60).has_value());
  EXPECT_EQ(error_of(allocator.reserve(41)), Errno{ENOSPC});
  EXPECT_EQ(allocator.summary().reserved_blocks, 60u);
  EXPECT_EQ(allocator.free_blocks(), 100u);
  EXPECT_TRUE(allocator.reserve(40).has_value());  // exactly what is left
  EXPECT_EQ(allocator.summary().reserved_blocks, 100u);
  EXPECT_TRUE(allocator.reserve(0).has_value());
}

// allocate(goal, count, reserved) spends the caller's reservation, even when no
// unreserved block is free.
TEST(Allocator, AllocateFromTheCallersReservation) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_TRUE(allocator.reserve(100).has_value());
  auto runs = allocator.allocate(10, 30, 30);
  ASSERT_TRUE(runs.has_value());
  EXPECT_EQ(*runs, (Ranges{{10, 30}}));
  EXPECT_EQ(allocator.summary().reserved_blocks, 70u);
  EXPECT_EQ(allocator.free_blocks(), 70u);
}

// Blocks beyond the reservation (a preallocation's extra) need unreserved space:
// ENOSPC with the reservation intact when there is none.
TEST(Allocator, AllocatingBeyondTheReservationNeedsUnreservedSpace) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_TRUE(allocator.reserve(90).has_value());
  auto runs = allocator.allocate(0, 20, 10);  // 10 reserved + 10 unreserved: all there is
  ASSERT_TRUE(runs.has_value());
  EXPECT_EQ(*runs, (Ranges{{0, 20}}));
  EXPECT_EQ(allocator.summary().reserved_blocks, 80u);
  const uint64_t cursor = allocator.cursor(0);
  EXPECT_EQ(error_of(allocator.allocate(0, 81, 80)), Errno{ENOSPC});
  EXPECT_EQ(allocator.summary().reserved_blocks, 80u);
  EXPECT_EQ(allocator.free_blocks(), 80u);
  EXPECT_EQ(allocator.cursor(0), cursor);
  EXPECT_TRUE(allocator.allocate(0, 80, 80).has_value());
  EXPECT_EQ(allocator.summary().reserved_blocks, 0u);
  EXPECT_EQ(allocator.free_blocks(), 0u);
}

// unreserve gives a reservation back.
TEST(Allocator, UnreserveGivesTheReservationBack) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_TRUE(allocator.reserve(100).has_value());
  allocator.unreserve(30);
  EXPECT_EQ(allocator.summary().reserved_blocks, 70u);
  EXPECT_EQ(take(allocator, 0, 30), (Ranges{{0, 30}}));
}

// Spending or returning more than is reserved is a caller bug.
TEST(Allocator, OverdrawingTheReservationThrowsLogicError) {
  Allocator allocator(DeviceGeometry{100});
  ASSERT_TRUE(allocator.reserve(10).has_value());
  EXPECT_THROW(allocator.unreserve(11), std::logic_error);
  EXPECT_THROW((void)allocator.allocate(0, 11, 11), std::logic_error);  // more than reserved
  EXPECT_THROW((void)allocator.allocate(0, 5, 6), std::logic_error);    // more than count
  EXPECT_EQ(allocator.summary().reserved_blocks, 10u);
  EXPECT_EQ(allocator.free_blocks(), 100u);
}

// A crash gives a file back the blocks it had at its last sync: exactly those
// blocks, only when every one is free, and never the blocks promised to others.
TEST(Allocator, ClaimTakesExactlyFreeBlocks) {
  Allocator allocator(uniform_groups(100, 0, 0));
  ASSERT_TRUE(allocator.claim({10, 5}).has_value());
  EXPECT_EQ(allocator.free_blocks(), 95u);
  EXPECT_EQ(error_of(allocator.claim({12, 1})), Errno{EBUSY});
  EXPECT_EQ(error_of(allocator.claim({5, 10})), Errno{EBUSY});  // partly taken
  EXPECT_EQ(allocator.free_blocks(), 95u);
  EXPECT_EQ(take(allocator, 0, 10), (Ranges{{0, 10}}));  // the free extent was split
  EXPECT_EQ(take(allocator, 10, 1), (Ranges{{15, 1}}));
  ASSERT_TRUE(allocator.reserve(84).has_value());
  EXPECT_EQ(error_of(allocator.claim({50, 1})), Errno{ENOSPC});
  allocator.unreserve(1);
  EXPECT_TRUE(allocator.claim({50, 1}).has_value());
}

// Groups need not be equal (btrfs: everything up to the kernel's first data
// chunk, then the chunks): a group ends where the next starts, and its cursor
// starts past the metadata at its start.
TEST(Allocator, GroupsCanStartAnywhere) {
  Allocator allocator(DeviceGeometry{100, 30, {0, 10, 40, 70}, {{0, 4}, {6, 4}}});
  EXPECT_EQ(allocator.group_count(), 4u);
  EXPECT_EQ(allocator.group_of(9), 0u);
  EXPECT_EQ(allocator.group_of(10), 1u);
  EXPECT_EQ(allocator.group_of(99), 3u);
  EXPECT_EQ(allocator.group_end(0), 10u);
  EXPECT_EQ(allocator.group_end(3), 100u);
  EXPECT_EQ(allocator.cursor(0), 4u);
  EXPECT_EQ(allocator.cursor(2), 40u);
  EXPECT_THROW(Allocator(DeviceGeometry{100, 30, {5, 40}, {}}), std::invalid_argument);
  EXPECT_THROW(Allocator(DeviceGeometry{100, 30, {0, 40, 40}, {}}), std::invalid_argument);
  EXPECT_THROW(Allocator(DeviceGeometry{100, 30, {0, 100}, {}}), std::invalid_argument);
}

// btrfs: an extent lives in one block group. A request the goal group's free
// space cannot hold whole goes whole to the next group that can (a new chunk),
// leaving the short tail for smaller requests; one no group holds is split at
// the group ends, never merged across them.
TEST(Allocator, ExtentsThatMayNotCrossGroupsGoWholeToTheNextGroup) {
  Allocator allocator(DeviceGeometry{100, 30, {0, 10, 40, 70}, {{0, 4}, {6, 4}}},
                      ExtentRules{.cross_groups = false});
  EXPECT_EQ(take(allocator, allocator.cursor(0), 20), (Ranges{{10, 20}}));  // 4..6 is too short
  EXPECT_EQ(take(allocator, 30, 20), (Ranges{{40, 20}}));  // 30..40 is too short
  EXPECT_EQ(take(allocator, 30, 10), (Ranges{{30, 10}}));  // the tail fits this one
  EXPECT_EQ(take(allocator, 60, 25), (Ranges{{70, 25}}));
  // 4..6, 60..70 and 95..100 are left: 17 blocks, split at the group ends.
  EXPECT_EQ(take(allocator, 60, 17), (Ranges{{60, 10}, {95, 5}, {4, 2}}));
  EXPECT_EQ(allocator.free_blocks(), 0u);

  Allocator crossing(DeviceGeometry{100, 30, {0, 10, 40, 70}, {}});
  EXPECT_EQ(take(crossing, 30, 20), (Ranges{{30, 20}}));
}

// Each extent of a request is placed on its own: three 8-block extents fill a
// 30-block group but for its 6-block tail, and the fourth goes to the next
// group; the pieces laid end to end in one group are one run.
TEST(Allocator, EachExtentOfARequestIsPlacedWholeOnItsOwn) {
  Allocator allocator(DeviceGeometry{100, 30, {0, 30, 60}, {}},
                      ExtentRules{.cross_groups = false, .max_blocks = 8});
  EXPECT_EQ(take(allocator, 0, 32), (Ranges{{0, 24}, {30, 8}}));
  EXPECT_EQ(take(allocator, 38, 5), (Ranges{{38, 5}}));
  // 59..60 is too short for the third 8: it and the last 6 go on at 60.
  EXPECT_EQ(take(allocator, 43, 30), (Ranges{{43, 16}, {60, 14}}));
  EXPECT_EQ(take(allocator, 0, 6), (Ranges{{24, 6}}));  // a short request takes a tail
}

// A saved device whose free space covers what this geometry keeps for the
// filesystem (an image from before a geometry change) is refused at load.
TEST(Allocator, LoadRefusesFreeSpaceOverTheMetadata) {
  const Allocator plain(DeviceGeometry{100});
  Allocator with_metadata(DeviceGeometry{100, 0, {}, {{40, 4}}});
  EXPECT_THROW(with_metadata.load(plain.save()), ImageError);
  const Allocator saved(DeviceGeometry{100, 0, {}, {{40, 4}}});
  Allocator same(DeviceGeometry{100, 0, {}, {{40, 4}}});
  EXPECT_NO_THROW(same.load(saved.save()));
  EXPECT_EQ(same.free_blocks(), 96u);
}

// The search for a group that holds the extent whole wraps past the device's
// end, and when every run near the goal is too short it still finds a group
// further away that holds it, rather than scattering the extent.
TEST(Allocator, AWholeExtentIsSoughtPastTheEndAndBeyondShortRuns) {
  Allocator wrapping(DeviceGeometry{100, 30, {0, 10, 40, 70}, {}},
                     ExtentRules{.cross_groups = false});
  for (BlockRange taken : {BlockRange{0, 4}, BlockRange{6, 34}, BlockRange{70, 30}}) {
    ASSERT_TRUE(wrapping.claim(taken).has_value());
  }
  EXPECT_EQ(take(wrapping, 95, 20), (Ranges{{40, 20}}));

  Allocator scattered(DeviceGeometry{3000, 1000, {}, {}}, ExtentRules{.cross_groups = false});
  ASSERT_TRUE(scattered.claim({0, 1000}).has_value());
  for (uint64_t block = 0; block < 200; block += 2) scattered.release({block, 1});
  EXPECT_EQ(take(scattered, 0, 8), (Ranges{{1000, 8}}));
  EXPECT_EQ(take(scattered, 0, 1), (Ranges{{0, 1}}));  // a short one still takes a short run
}

// More than a few short runs after the goal (the holes of deleted files that
// interleaved): the request still goes whole to the nearest run in the group
// that holds it, as xfs's near search would, rather than over the holes.
TEST(Allocator, AWholeRunPastManyHolesInTheGroupIsFound) {
  Allocator allocator(DeviceGeometry{1000, 500, {}, {}});
  ASSERT_TRUE(allocator.claim({0, 1000}).has_value());
  for (uint64_t block = 0; block < 40; block += 2) allocator.release({block, 1});  // 20 holes
  allocator.release({100, 300});
  allocator.release({600, 300});  // the next group's
  EXPECT_EQ(take(allocator, 0, 50), (Ranges{{100, 50}}));
  EXPECT_EQ(take(allocator, 0, 1), (Ranges{{0, 1}}));  // a short request still takes a hole
  // Nothing in the goal's group holds it: split from the goal, as before.
  EXPECT_EQ(take(allocator, 0, 400), (Ranges{{2, 1}, {4, 1}, {6, 1}, {8, 1}, {10, 1}, {12, 1},
                                             {14, 1}, {16, 1}, {18, 1}, {20, 1}, {22, 1},
                                             {24, 1}, {26, 1}, {28, 1}, {30, 1}, {32, 1},
                                             {34, 1}, {36, 1}, {38, 1}, {150, 250}, {600, 131}}));
}

}  // namespace
}  // namespace mimicfs
