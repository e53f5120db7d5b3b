// SPDX-License-Identifier: Apache-2.0
#include "engine/space/file_space.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using namespace volume_fixture;

struct Space {
  explicit Space(const Profile& p) : profile(p), device(profile), file(device, 0) {}
  explicit Space(std::string_view name) : Space(builtin(name)) {}
  Profile profile;
  DeviceSpace device;
  FileSpace file;
  Work work;
  uint64_t unit() const { return device.unit(); }
  uint64_t used_blocks() const {
    const DeviceStats d = device.stats(profile.capacity_bytes);
    return (d.allocated_bytes - d.metadata_bytes) / d.allocation_unit;
  }
};

TEST(FileSpace, DelayedWriteReservesAndWritebackAllocatesItsRangeOnly) {
  Space s("ext4");
  ASSERT_TRUE(s.file.write(0, 4, 4 * s.unit(), s.work).has_value());
  EXPECT_EQ(s.file.extents().mapped_blocks(), 0u);
  EXPECT_EQ(s.file.blocks(), 4u);
  EXPECT_TRUE(s.file.has_data(3, 1));
  s.file.flush_delayed(1, 2, 4 * s.unit(), s.work);
  EXPECT_EQ(s.file.extents().mapped_blocks(), 2u);
  EXPECT_EQ(s.file.blocks(), 4u);
}

TEST(FileSpace, ImmediateAllocationIntoAGapIsAGapFill) {
  Space s("nfs");
  ASSERT_TRUE(s.file.write(0, 1, s.unit(), s.work).has_value());
  ASSERT_TRUE(s.file.write(8, 1, 9 * s.unit(), s.work).has_value());
  EXPECT_EQ(s.work.device_writes.gap_fills, 0u);
  ASSERT_TRUE(s.file.write(4, 1, 9 * s.unit(), s.work).has_value());
  EXPECT_EQ(s.work.device_writes.gap_fills, 1u);
}

TEST(FileSpace, AllocateIsAllOrNothingOnEnospc) {
  Space s(small("ext4", 64 * 4096));
  EXPECT_EQ(s.file.allocate(0, 65, 0, s.work).error(), Errno{ENOSPC});
  EXPECT_EQ(s.file.blocks(), 0u);
  EXPECT_EQ(s.used_blocks(), 0u);
  ASSERT_TRUE(s.file.allocate(0, 64, 0, s.work).has_value());
  EXPECT_EQ(s.file.extents().summarize().unwritten_extents, 1u);
}

TEST(FileSpace, PunchFreesWholeBlocksAndReleaseFreesEverything) {
  Space s("ideal");
  ASSERT_TRUE(s.file.write(0, 8, 8 * s.unit(), s.work).has_value());
  s.file.punch(2, 3);
  EXPECT_EQ(s.file.blocks(), 5u);
  EXPECT_EQ(s.file.next_hole(0), 2u);
  EXPECT_EQ(s.file.next_data(2), std::optional<uint64_t>(5));
  s.file.release();
  EXPECT_EQ(s.file.blocks(), 0u);
  EXPECT_EQ(s.used_blocks(), 0u);
}

TEST(FileSpace, XfsTrimsSpeculativePreallocationOnTheFirstCloseOnly) {
  Space s("xfs");
  const uint64_t size = 100 * s.unit();
  ASSERT_TRUE(s.file.write(0, 100, size, s.work).has_value());
  s.file.flush_delayed(0, FileSpace::kAllBlocks, size, s.work);
  ASSERT_GT(s.file.extents().mapped_blocks(), 100u) << "preallocated past EOF";
  s.file.close(size, s.work);
  EXPECT_EQ(s.file.extents().mapped_blocks(), 100u);
  ASSERT_TRUE(s.file.write(100, 100, 2 * size, s.work).has_value());
  s.file.close(2 * size, s.work);
  EXPECT_GT(s.file.extents().mapped_blocks(), 200u) << "kept after the first trim";
  s.file.truncate(200, false);
  EXPECT_EQ(s.file.extents().mapped_blocks(), 200u);
}

TEST(FileSpace, DescribeCountsHolesDelayedAndPreallocation) {
  Space s("ext4");
  ASSERT_TRUE(s.file.write(0, 1, 10 * s.unit(), s.work).has_value());
  ASSERT_TRUE(s.file.write(5, 1, 10 * s.unit(), s.work).has_value());
  FileStats f;
  s.file.describe(10, f);
  EXPECT_EQ(f.delayed_bytes, 2 * s.unit());
  EXPECT_EQ(f.holes, 2u);  // [1,5) and [6,10)
  EXPECT_EQ(f.extents, 0u);
}

// Holes are counted from the mapping and the delayed runs' neighbours, never by
// a walk; they agree with a walk of every block after random writes (delayed),
// partial writebacks, fallocates and punches.
TEST(FileSpace, HolesAgreeWithABlockWalkWithDelayedData) {
  Space s("ext4");
  std::mt19937_64 random(9);
  auto below = [&](uint64_t n) { return random() % n; };
  constexpr uint64_t kBlocks = 300;
  uint64_t size_blocks = 0;
  for (int step = 0; step < 1500; ++step) {
    const uint64_t first = below(kBlocks);
    const uint64_t count = 1 + below(20);
    switch (below(4)) {
      case 0:
        size_blocks = std::max(size_blocks, first + count);
        ASSERT_TRUE(s.file.write(first, count, size_blocks * s.unit(), s.work).has_value());
        break;
      case 1:
        s.file.flush_delayed(first, count, size_blocks * s.unit(), s.work);
        break;
      case 2:
        ASSERT_TRUE(s.file.allocate(first, count, size_blocks * s.unit(), s.work).has_value());
        break;
      default:
        s.file.punch(first, count);
        break;
    }
    for (const uint64_t end : {size_blocks, below(kBlocks + 30), uint64_t{0}}) {
      uint64_t walked = 0;
      bool in_hole = false;
      for (uint64_t block = 0; block < end; ++block) {
        const bool filled = !s.file.extents().find(block, 1).empty() || s.file.has_data(block, 1);
        if (!filled && !in_hole) ++walked;
        in_hole = !filled;
      }
      ASSERT_EQ(s.file.holes(end), walked) << "step " << step << " end " << end;
    }
  }
}

// The allocation at the last sync is what a crash restores: punched blocks come
// back to the same device blocks, blocks allocated since are freed, delayed
// blocks are dropped, and the ranges without data are reported.
TEST(FileSpace, RestoreSyncedPutsTheMappingBack) {
  Space s("ext4");
  ASSERT_TRUE(s.file.write(0, 8, 8 * s.unit(), s.work).has_value());
  s.file.flush_delayed(0, FileSpace::kAllBlocks, 8 * s.unit(), s.work);
  s.file.close(8 * s.unit(), s.work);
  s.file.synced();
  const std::vector<Extent> synced = s.file.extents().all();
  const uint64_t synced_used = s.used_blocks();
  EXPECT_FALSE(s.file.changed_since_sync());

  s.file.punch(2, 3);
  ASSERT_TRUE(s.file.allocate(20, 4, 8 * s.unit(), s.work).has_value());
  ASSERT_TRUE(s.file.write(30, 2, 32 * s.unit(), s.work).has_value());  // delayed
  EXPECT_TRUE(s.file.changed_since_sync());
  const std::vector<BlockRange> no_data = s.file.restore_synced();
  EXPECT_EQ(s.file.extents().all(), synced);
  EXPECT_EQ(s.file.blocks(), 8u);
  EXPECT_EQ(s.used_blocks(), synced_used);
  EXPECT_EQ(no_data, (std::vector<BlockRange>{{20, 4}, {30, 2}}));
  EXPECT_FALSE(s.file.changed_since_sync());
}

// Copy-on-write: an overwrite since the sync moved the blocks; the crash maps
// the old ones again (still allocated as a bookend) and frees the new.
TEST(FileSpace, RestoreSyncedUndoesACopyOnWriteOverwrite) {
  Space s("btrfs");
  ASSERT_TRUE(s.file.write(0, 8, 8 * s.unit(), s.work).has_value());
  s.file.flush_delayed(0, FileSpace::kAllBlocks, 8 * s.unit(), s.work);
  s.file.synced();
  const std::vector<Extent> synced = s.file.extents().all();
  const uint64_t synced_used = s.used_blocks();
  ASSERT_TRUE(s.file.write(2, 2, 8 * s.unit(), s.work).has_value());
  s.file.flush_delayed(0, FileSpace::kAllBlocks, 8 * s.unit(), s.work);
  EXPECT_NE(s.file.extents().all(), synced);
  EXPECT_TRUE(s.file.restore_synced().empty());
  EXPECT_EQ(s.file.extents().all(), synced);
  EXPECT_EQ(s.used_blocks(), synced_used);
  EXPECT_EQ(s.device.stats(s.profile.capacity_bytes).unreferenced_bytes, 0u);
}

// An O_DSYNC write makes only its own blocks' allocation durable.
TEST(FileSpace, RangeSyncedKeepsOnlyThatRangeAtACrash) {
  Space s("nfs");
  ASSERT_TRUE(s.file.write(0, 1, s.unit(), s.work).has_value());
  s.file.range_synced(0, 1);
  ASSERT_TRUE(s.file.write(1, 1, 2 * s.unit(), s.work).has_value());
  EXPECT_EQ(s.file.restore_synced(), (std::vector<BlockRange>{{1, 1}}));
  EXPECT_EQ(s.file.blocks(), 1u);
}

}  // namespace
}  // namespace mimicfs
