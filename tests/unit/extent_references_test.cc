// SPDX-License-Identifier: Apache-2.0
#include "engine/space/extent_references.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace mimicfs {
namespace {

using Ranges = std::vector<BlockRange>;

// An allocation longer than the longest data extent (btrfs: 128 MiB) becomes
// several, so a bookend never pins more than one maximum extent.
TEST(ExtentReferences, AddSplitsIntoMaxLengthDataExtents) {
  ExtentReferences references(4);
  references.add({100, 10});
  EXPECT_EQ(references.data_extent_count(), 3u);  // 4 + 4 + 2
  EXPECT_EQ(references.unreferenced_blocks(), 0u);
  // The pieces are where the split says: dropping the first four frees exactly them.
  EXPECT_EQ(references.drop({100, 4}), (Ranges{{100, 4}}));
  EXPECT_EQ(references.drop({108, 2}), (Ranges{{108, 2}}));
  EXPECT_EQ(references.data_extent_count(), 1u);
}

// With no limit an allocation is one data extent however long.
TEST(ExtentReferences, AddWithoutLimitIsOneDataExtent) {
  ExtentReferences references(0);
  references.add({0, 1'000'000});
  EXPECT_EQ(references.data_extent_count(), 1u);
}

// Two allocations are two data extents even when they are adjacent on the device.
TEST(ExtentReferences, AdjacentAllocationsStaySeparateDataExtents) {
  ExtentReferences references(0);
  references.add({0, 4});
  references.add({4, 4});
  EXPECT_EQ(references.data_extent_count(), 2u);
  EXPECT_EQ(references.drop({0, 4}), (Ranges{{0, 4}}));
  EXPECT_EQ(references.data_extent_count(), 1u);
}

// Overwriting or punching part of a data extent frees nothing: the bookend stays
// allocated, its dropped blocks counted as unreferenced (seed 004).
TEST(ExtentReferences, DropOfPartFreesNothingAndCountsUnreferenced) {
  ExtentReferences references(0);
  references.add({0, 10});
  EXPECT_EQ(references.drop({2, 3}), Ranges{});
  EXPECT_EQ(references.unreferenced_blocks(), 3u);
  EXPECT_EQ(references.drop({9, 1}), Ranges{});
  EXPECT_EQ(references.unreferenced_blocks(), 4u);
  EXPECT_EQ(references.data_extent_count(), 1u);
}

// The drop that unreferences a data extent's last block frees the whole extent,
// and its blocks stop counting as unreferenced.
TEST(ExtentReferences, DropOfLastReferencedBlocksFreesTheWholeDataExtent) {
  ExtentReferences references(0);
  references.add({0, 10});
  ASSERT_EQ(references.drop({0, 2}), Ranges{});
  ASSERT_EQ(references.drop({5, 5}), Ranges{});
  EXPECT_EQ(references.drop({2, 3}), (Ranges{{0, 10}}));
  EXPECT_EQ(references.unreferenced_blocks(), 0u);
  EXPECT_EQ(references.data_extent_count(), 0u);
}

// A dropped run may span two data extents: each is accounted on its own and
// freed when its own last block goes.
TEST(ExtentReferences, DropSpanningTwoDataExtents) {
  ExtentReferences references(4);
  references.add({0, 8});  // data extents [0,4) and [4,8)
  EXPECT_EQ(references.drop({2, 4}), Ranges{});
  EXPECT_EQ(references.unreferenced_blocks(), 4u);
  EXPECT_EQ(references.drop({0, 2}), (Ranges{{0, 4}}));
  EXPECT_EQ(references.unreferenced_blocks(), 2u);
  EXPECT_EQ(references.drop({6, 2}), (Ranges{{4, 4}}));
  EXPECT_EQ(references.unreferenced_blocks(), 0u);
  EXPECT_EQ(references.data_extent_count(), 0u);
}

// One drop covering two whole data extents frees both, in device order.
TEST(ExtentReferences, DropCoveringTwoWholeDataExtentsFreesBoth) {
  ExtentReferences references(4);
  references.add({20, 8});
  EXPECT_EQ(references.drop({20, 8}), (Ranges{{20, 4}, {24, 4}}));
  EXPECT_EQ(references.unreferenced_blocks(), 0u);
}

// Dropping a block no data extent holds means the caller's bookkeeping is wrong.
TEST(ExtentReferences, DropOfUnknownBlockThrowsLogicError) {
  ExtentReferences references(0);
  EXPECT_THROW((void)references.drop({0, 1}), std::logic_error);
  references.add({10, 5});
  EXPECT_THROW((void)references.drop({9, 1}), std::logic_error);   // just before
  EXPECT_THROW((void)references.drop({15, 1}), std::logic_error);  // just after
}

// More blocks dropped from a data extent than it still references is a double drop.
TEST(ExtentReferences, DroppingMoreThanIsReferencedThrowsLogicError) {
  ExtentReferences references(0);
  references.add({0, 4});
  ASSERT_EQ(references.drop({0, 3}), Ranges{});
  EXPECT_THROW((void)references.drop({0, 3}), std::logic_error);
}

// A crash maps a file's blocks from its last sync again: blocks of a data extent
// that is still allocated (a bookend) are referenced again; blocks of an extent
// that was freed are returned for the caller to claim from free space.
TEST(ExtentReferences, TakeBackReferencesBookendBlocksAndReturnsTheRest) {
  ExtentReferences references(0);
  references.add({100, 10});
  EXPECT_TRUE(references.drop({102, 3}).empty());  // a bookend: 7 of 10 referenced
  references.add({200, 4});
  EXPECT_EQ(references.drop({200, 4}), (Ranges{{200, 4}}));  // freed whole
  EXPECT_EQ(references.take_back({102, 3}), Ranges{});
  EXPECT_EQ(references.unreferenced_blocks(), 0u);
  EXPECT_EQ(references.take_back({200, 4}), (Ranges{{200, 4}}));
  // Blocks already referenced (by another file now) are not taken twice.
  EXPECT_EQ(references.take_back({108, 4}), (Ranges{{108, 4}}));
  EXPECT_EQ(references.drop({100, 10}), (Ranges{{100, 10}}));
}

}  // namespace
}  // namespace mimicfs
