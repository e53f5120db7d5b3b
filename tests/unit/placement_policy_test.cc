// SPDX-License-Identifier: Apache-2.0
#include "engine/space/mkfs_geometry.h"
#include "engine/space/placement_policy.h"

#include <gtest/gtest.h>

namespace mimicfs {
namespace {

// --- GoalPlacement

// A file with no blocks starts where its group's last allocation ended.
TEST(GoalPlacement, EmptyFileStartsAtTheGroupCursor) {
  Allocator allocator(uniform_groups(1000, 100, 4));
  ExtentMap file;
  const GoalPlacement placement;
  EXPECT_EQ(placement.goal(file, 0, 2, allocator), 204u);  // group 2's first data block
  ASSERT_TRUE(allocator.allocate(204, 10).has_value());
  EXPECT_EQ(placement.goal(file, 0, 2, allocator), 214u);
}

// A block after the file's blocks goes right after the nearest one before it, not
// at the file-offset gap: sparse writes land back to back (seed 000).
TEST(GoalPlacement, BlockAfterTheFilesBlocksGoesRightAfterTheNearestOne) {
  Allocator allocator(DeviceGeometry{1000});
  ExtentMap file;
  file.map(0, 500, 4, false);
  file.map(10, 600, 2, false);
  const GoalPlacement placement;
  EXPECT_EQ(placement.goal(file, 4, 0, allocator), 504u);
  EXPECT_EQ(placement.goal(file, 8, 0, allocator), 504u);  // not 508
  EXPECT_EQ(placement.goal(file, 50, 0, allocator), 602u);
}

// Before the file's first block: just before it, so the file can stay contiguous.
TEST(GoalPlacement, BlockBeforeTheFilesFirstGoesJustBeforeIt) {
  Allocator allocator(DeviceGeometry{1000});
  ExtentMap file;
  file.map(10, 500, 4, false);
  const GoalPlacement placement;
  EXPECT_EQ(placement.goal(file, 6, 0, allocator), 496u);
  EXPECT_EQ(placement.goal(file, 0, 0, allocator), 490u);
}

// When "just before" would be before device block 0, the group cursor is used.
TEST(GoalPlacement, NoRoomBeforeTheFirstBlockFallsBackToTheCursor) {
  Allocator allocator(DeviceGeometry{1000});
  ASSERT_TRUE(allocator.allocate(300, 5).has_value());
  ExtentMap file;
  file.map(10, 3, 4, false);
  const GoalPlacement placement;
  EXPECT_EQ(placement.goal(file, 0, 0, allocator), 305u);
}

// --- SharedCursorPlacement

// The goal is the group's cursor whatever the file has: writers in one group
// interleave (seed 003).
TEST(SharedCursorPlacement, GoalIsTheGroupCursorRegardlessOfTheFile) {
  Allocator allocator(uniform_groups(1000, 100, 4));
  ExtentMap file;
  file.map(0, 500, 4, false);
  const SharedCursorPlacement placement;
  EXPECT_EQ(placement.goal(file, 4, 0, allocator), 4u);
  EXPECT_EQ(placement.goal(file, 4, 3, allocator), 304u);
  ASSERT_TRUE(allocator.allocate(4, 20).has_value());
  EXPECT_EQ(placement.goal(file, 4, 0, allocator), 24u);
  EXPECT_EQ(placement.goal(ExtentMap(), 0, 0, allocator), 24u);
  EXPECT_EQ(placement.goal(file, 4, 3, allocator), 304u);  // other groups untouched
}

// --- the factory

// A profile's allocation.placement names the policy; an unknown name gives none.
TEST(PlacementPolicy, FactoryKnowsGoalAndSharedCursor) {
  EXPECT_NE(dynamic_cast<GoalPlacement*>(make_placement_policy("goal").get()), nullptr);
  EXPECT_NE(dynamic_cast<SharedCursorPlacement*>(make_placement_policy("shared_cursor").get()),
            nullptr);
  EXPECT_EQ(make_placement_policy("best_fit"), nullptr);
  EXPECT_EQ(make_placement_policy(""), nullptr);
}

}  // namespace
}  // namespace mimicfs
