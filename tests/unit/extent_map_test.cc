// SPDX-License-Identifier: Apache-2.0
#include "engine/space/extent_map.h"

#include <gtest/gtest.h>

#include <bit>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

namespace mimicfs {
namespace {

using Extents = std::vector<Extent>;
using Ranges = std::vector<BlockRange>;

// --- map: merging neighbours

TEST(ExtentMap, MapContiguousInFileAndOnDeviceMerges) {
  ExtentMap map;
  map.map(0, 100, 4, false);
  map.map(4, 104, 4, false);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 8, false}}));
  EXPECT_EQ(map.extent_count(), 1u);
  EXPECT_EQ(map.mapped_blocks(), 8u);
}

TEST(ExtentMap, MapBetweenTwoExtentsMergesAllThree) {
  ExtentMap map;
  map.map(0, 100, 4, false);
  map.map(8, 108, 4, false);
  map.map(4, 104, 4, false);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 12, false}}));
}

TEST(ExtentMap, MapBeforeAnExtentMergesWithTheFollowingOne) {
  ExtentMap map;
  map.map(4, 104, 4, false);
  map.map(0, 100, 4, false);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 8, false}}));
}

TEST(ExtentMap, MapContiguousInFileOnlyDoesNotMerge) {
  ExtentMap map;
  map.map(0, 100, 4, false);
  map.map(4, 200, 4, false);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 4, false}, {4, 200, 4, false}}));
}

TEST(ExtentMap, MapContiguousOnDeviceOnlyDoesNotMerge) {
  ExtentMap map;
  map.map(0, 100, 4, false);
  map.map(5, 104, 4, false);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 4, false}, {5, 104, 4, false}}));
}

TEST(ExtentMap, MapWithDifferentUnwrittenFlagDoesNotMerge) {
  ExtentMap map;
  map.map(0, 100, 4, false);
  map.map(4, 104, 4, true);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 4, false}, {4, 104, 4, true}}));
  EXPECT_EQ(map.unwritten_extent_count(), 1u);
}

TEST(ExtentMap, MapTwoUnwrittenNeighboursMerges) {
  ExtentMap map;
  map.map(0, 100, 4, true);
  map.map(4, 104, 4, true);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 8, true}}));
  EXPECT_EQ(map.unwritten_extent_count(), 1u);
}

TEST(ExtentMap, MapZeroLengthDoesNothing) {
  ExtentMap map;
  map.map(0, 100, 0, false);
  EXPECT_TRUE(map.empty());
}

TEST(ExtentMap, MapOverMappedRangeThrowsLogicError) {
  ExtentMap map;
  map.map(10, 100, 10, false);
  EXPECT_THROW(map.map(10, 500, 1, false), std::logic_error);   // same start
  EXPECT_THROW(map.map(15, 500, 2, false), std::logic_error);   // inside
  EXPECT_THROW(map.map(5, 500, 6, false), std::logic_error);    // overlaps the start
  EXPECT_THROW(map.map(19, 500, 5, false), std::logic_error);   // overlaps the end
  EXPECT_THROW(map.map(0, 500, 100, false), std::logic_error);  // covers it
  // The failed calls changed nothing.
  EXPECT_EQ(map.all(), (Extents{{10, 100, 10, false}}));
  EXPECT_EQ(map.mapped_blocks(), 10u);
}

TEST(ExtentMap, MapRightNextToAnExtentIsNotAnOverlap) {
  ExtentMap map;
  map.map(10, 100, 10, false);
  EXPECT_NO_THROW(map.map(5, 500, 5, false));
  EXPECT_NO_THROW(map.map(20, 600, 5, false));
  EXPECT_EQ(map.extent_count(), 3u);
}

// --- unmap

TEST(ExtentMap, UnmapWholeRunReleasesIt) {
  ExtentMap map;
  map.map(0, 100, 4, false);
  map.map(10, 200, 4, false);
  EXPECT_EQ(map.unmap(10, 4), (Ranges{{200, 4}}));
  EXPECT_EQ(map.all(), (Extents{{0, 100, 4, false}}));
  EXPECT_EQ(map.mapped_blocks(), 4u);
}

TEST(ExtentMap, UnmapRangeCoveringARunAndMoreReleasesOnlyTheRun) {
  ExtentMap map;
  map.map(10, 200, 4, false);
  EXPECT_EQ(map.unmap(5, 20), (Ranges{{200, 4}}));
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(map.mapped_blocks(), 0u);
}

TEST(ExtentMap, UnmapOfAHoleReleasesNothing) {
  ExtentMap map;
  map.map(10, 200, 4, false);
  EXPECT_TRUE(map.unmap(0, 10).empty());
  EXPECT_TRUE(map.unmap(14, 10).empty());
  EXPECT_EQ(map.extent_count(), 1u);
}

TEST(ExtentMap, PunchInsideRunSplitsIt) {
  ExtentMap map;
  map.map(0, 100, 10, false);
  EXPECT_EQ(map.unmap(3, 4), (Ranges{{103, 4}}));
  EXPECT_EQ(map.all(), (Extents{{0, 100, 3, false}, {7, 107, 3, false}}));
  EXPECT_EQ(map.mapped_blocks(), 6u);
}

TEST(ExtentMap, PunchInsideUnwrittenRunKeepsBothHalvesUnwritten) {
  ExtentMap map;
  map.map(0, 100, 10, true);
  EXPECT_EQ(map.unmap(3, 4), (Ranges{{103, 4}}));
  EXPECT_EQ(map.all(), (Extents{{0, 100, 3, true}, {7, 107, 3, true}}));
  EXPECT_EQ(map.unwritten_extent_count(), 2u);
}

TEST(ExtentMap, UnmapAcrossSeveralRunsReleasesEachPartInFileOrder) {
  ExtentMap map;
  map.map(0, 100, 10, false);
  map.map(10, 300, 10, false);
  map.map(25, 500, 10, true);
  // Cuts the tail of the first, all of the second, the head of the third.
  EXPECT_EQ(map.unmap(6, 22), (Ranges{{106, 4}, {300, 10}, {500, 3}}));
  EXPECT_EQ(map.all(), (Extents{{0, 100, 6, false}, {28, 503, 7, true}}));
  EXPECT_EQ(map.mapped_blocks(), 13u);
  EXPECT_EQ(map.unwritten_extent_count(), 1u);
}

TEST(ExtentMap, UnmapFromMiddleOfRunToInfinityTruncates) {
  ExtentMap map;
  map.map(0, 100, 10, false);
  map.map(20, 300, 5, false);
  map.map(1000, 900, 5, true);
  const uint64_t keep = 4;
  const Ranges released = map.unmap(keep, UINT64_MAX / 2 - keep);
  EXPECT_EQ(released, (Ranges{{104, 6}, {300, 5}, {900, 5}}));
  EXPECT_EQ(map.all(), (Extents{{0, 100, 4, false}}));
  EXPECT_EQ(map.mapped_blocks(), 4u);
  EXPECT_EQ(map.unwritten_extent_count(), 0u);
}

TEST(ExtentMap, UnmapZeroLengthDoesNothing) {
  ExtentMap map;
  map.map(0, 100, 10, false);
  EXPECT_TRUE(map.unmap(5, 0).empty());
  EXPECT_EQ(map.extent_count(), 1u);
}

TEST(ExtentMap, RemapAfterPunchMergesBackIntoOneRun) {
  ExtentMap map;
  map.map(0, 100, 10, false);
  ASSERT_EQ(map.unmap(3, 4), (Ranges{{103, 4}}));
  map.map(3, 103, 4, false);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 10, false}}));
}

// --- mark_written

TEST(ExtentMap, MarkWrittenInsideUnwrittenExtentSplitsItInThree) {
  ExtentMap map;
  map.map(0, 100, 10, true);
  map.mark_written(4, 2);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 4, true}, {4, 104, 2, false}, {6, 106, 4, true}}));
  EXPECT_EQ(map.unwritten_extent_count(), 2u);
  EXPECT_EQ(map.mapped_blocks(), 10u);
}

TEST(ExtentMap, MarkWrittenMergesWithContiguousWrittenNeighbour) {
  ExtentMap map;
  map.map(0, 100, 4, false);
  map.map(4, 104, 6, true);
  map.mark_written(4, 2);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 6, false}, {6, 106, 4, true}}));
  map.mark_written(6, 4);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 10, false}}));
  EXPECT_EQ(map.unwritten_extent_count(), 0u);
}

TEST(ExtentMap, MarkWrittenDoesNotMergeWithWrittenNeighbourElsewhereOnDevice) {
  ExtentMap map;
  map.map(0, 500, 4, false);
  map.map(4, 104, 6, true);
  map.mark_written(4, 2);
  EXPECT_EQ(map.all(), (Extents{{0, 500, 4, false}, {4, 104, 2, false}, {6, 106, 4, true}}));
}

TEST(ExtentMap, MarkWrittenLeavesHolesAndWrittenExtentsAlone) {
  ExtentMap map;
  map.map(0, 100, 2, false);
  map.map(5, 200, 2, true);
  map.mark_written(0, 20);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 2, false}, {5, 200, 2, false}}));
  EXPECT_EQ(map.mapped_blocks(), 4u);
  EXPECT_EQ(map.unwritten_extent_count(), 0u);
}

// --- find, holes, neighbours

TEST(ExtentMap, FindClipsExtentsToTheRange) {
  ExtentMap map;
  map.map(0, 100, 10, false);
  map.map(20, 300, 10, true);
  EXPECT_EQ(map.find(5, 20), (Extents{{5, 105, 5, false}, {20, 300, 5, true}}));
  EXPECT_TRUE(map.find(10, 10).empty());
}

TEST(ExtentMap, HolesListsUnmappedRunsInsideTheRange) {
  ExtentMap map;
  map.map(2, 100, 3, false);
  map.map(8, 200, 2, true);  // unwritten is mapped: not a hole here
  EXPECT_EQ(map.holes(0, 12), (Ranges{{0, 2}, {5, 3}, {10, 2}}));
  EXPECT_EQ(map.holes(3, 6), (Ranges{{5, 3}}));
  EXPECT_TRUE(map.holes(2, 3).empty());
}

TEST(ExtentMap, HolesOfAnEmptyMapIsTheWholeRange) {
  ExtentMap map;
  EXPECT_EQ(map.holes(7, 5), (Ranges{{7, 5}}));
}

TEST(ExtentMap, NearestBeforeSkipsTheExtentContainingTheBlock) {
  ExtentMap map;
  map.map(0, 100, 4, false);
  map.map(10, 300, 4, false);
  EXPECT_EQ(map.nearest_before(8), (Extent{0, 100, 4, false}));
  EXPECT_EQ(map.nearest_before(14), (Extent{10, 300, 4, false}));
  EXPECT_EQ(map.nearest_before(12), (Extent{0, 100, 4, false}));
  EXPECT_FALSE(map.nearest_before(2).has_value());
}

TEST(ExtentMap, FirstAtOrAfterFindsTheNextExtentStart) {
  ExtentMap map;
  map.map(10, 300, 4, false);
  EXPECT_EQ(map.first_at_or_after(10), (Extent{10, 300, 4, false}));
  EXPECT_EQ(map.first_at_or_after(3), (Extent{10, 300, 4, false}));
  EXPECT_FALSE(map.first_at_or_after(11).has_value());
}

// --- next_data / next_hole

TEST(ExtentMap, NextDataSkipsHolesAndUnwrittenExtents) {
  ExtentMap map;
  map.map(2, 100, 2, true);
  map.map(6, 200, 3, false);
  EXPECT_EQ(map.next_data(0), 6u);
  EXPECT_EQ(map.next_data(2), 6u);
  EXPECT_EQ(map.next_data(7), 7u);
  EXPECT_FALSE(map.next_data(9).has_value());
}

TEST(ExtentMap, NextDataOfOnlyUnwrittenIsNone) {
  ExtentMap map;
  map.map(0, 100, 8, true);
  EXPECT_FALSE(map.next_data(0).has_value());
}

TEST(ExtentMap, NextHoleTreatsUnwrittenAsHole) {
  ExtentMap map;
  map.map(0, 100, 4, false);
  map.map(4, 300, 4, false);  // not merged (device gap), still data
  map.map(8, 304, 2, true);
  map.map(12, 400, 2, false);
  EXPECT_EQ(map.next_hole(0), 8u);
  EXPECT_EQ(map.next_hole(5), 8u);
  EXPECT_EQ(map.next_hole(9), 9u);
  EXPECT_EQ(map.next_hole(10), 10u);
  EXPECT_EQ(map.next_hole(12), 14u);
  EXPECT_EQ(map.next_hole(100), 100u);
}

// --- summarize / count_holes

TEST(ExtentMap, SummarizeCountsExtentsUnwrittenAndBlocks) {
  ExtentMap map;
  map.map(0, 100, 4, false);
  map.map(4, 104, 4, true);
  map.map(20, 500, 2, true);
  const ExtentSummary s = map.summarize();
  EXPECT_EQ(s.extents, 3u);
  EXPECT_EQ(s.unwritten_extents, 2u);
  EXPECT_EQ(s.mapped_blocks, 10u);
}

TEST(ExtentMap, SummarizeOfEmptyMapIsZero) {
  const ExtentSummary s = ExtentMap().summarize();
  EXPECT_EQ(s.extents, 0u);
  EXPECT_EQ(s.fragments, 0u);
  EXPECT_EQ(s.unwritten_extents, 0u);
  EXPECT_EQ(s.mapped_blocks, 0u);
}

TEST(ExtentMap, HoleKeepingFileToDeviceOffsetDoesNotStartAFragment) {
  ExtentMap map;
  map.map(0, 100, 4, false);
  map.map(8, 108, 4, false);  // a hole, but logical - physical is unchanged
  const ExtentSummary s = map.summarize();
  EXPECT_EQ(s.extents, 2u);
  EXPECT_EQ(s.fragments, 1u);
}

TEST(ExtentMap, HoleChangingFileToDeviceOffsetStartsAFragment) {
  ExtentMap map;
  map.map(0, 100, 4, false);
  map.map(8, 104, 4, false);  // packed on the device after a hole in the file
  const ExtentSummary s = map.summarize();
  EXPECT_EQ(s.extents, 2u);
  EXPECT_EQ(s.fragments, 2u);
}

TEST(ExtentMap, UnwrittenBoundaryOnSameOffsetIsNotANewFragment) {
  ExtentMap map;
  map.map(0, 100, 4, false);
  map.map(4, 104, 4, true);
  const ExtentSummary s = map.summarize();
  EXPECT_EQ(s.extents, 2u);
  EXPECT_EQ(s.fragments, 1u);
}

TEST(ExtentMap, CountHolesCountsGapsBeforeBetweenAndAfterExtents) {
  ExtentMap map;
  EXPECT_EQ(map.count_holes(0), 0u);
  EXPECT_EQ(map.count_holes(10), 1u);
  map.map(2, 100, 2, false);
  map.map(6, 200, 2, true);
  EXPECT_EQ(map.count_holes(10), 3u);  // [0,2) [4,6) [8,10)
  EXPECT_EQ(map.count_holes(8), 2u);   // the end is at an extent's end
  EXPECT_EQ(map.count_holes(7), 2u);   // the end is inside an extent
  EXPECT_EQ(map.count_holes(3), 1u);
  EXPECT_EQ(map.count_holes(2), 1u);
}

TEST(ExtentMap, CountHolesIgnoresExtentsPastTheEnd) {
  ExtentMap map;
  map.map(0, 100, 2, false);
  map.map(50, 200, 2, false);  // e.g. preallocated beyond EOF
  EXPECT_EQ(map.count_holes(4), 1u);
  EXPECT_EQ(map.count_holes(2), 0u);
}

// The counts kept at each change agree with a walk of every extent, whatever
// the sequence of maps, unmaps and conversions (limits on, so records split).
TEST(ExtentMap, KeptCountsAgreeWithAWalkAfterRandomChanges) {
  std::mt19937_64 random(5);
  auto below = [&](uint64_t n) { return random() % n; };
  ExtentMap map(/*max_extent_blocks=*/16, /*max_unwritten_blocks=*/8);
  uint64_t next_physical = 1000;
  for (int step = 0; step < 4000; ++step) {
    const uint64_t logical = below(400);
    const uint64_t length = 1 + below(40);
    switch (below(3)) {
      case 0:
        // Into the holes of the range, on the device either right after the
        // file's previous block (offsets kept) or somewhere new.
        for (const BlockRange& hole : map.holes(logical, length)) {
          const uint64_t physical = below(2) == 0 ? hole.start + 5000 : (next_physical += 50);
          map.map(hole.start, physical, hole.length, below(4) == 0);
        }
        break;
      case 1:
        map.unmap(logical, length);
        break;
      default:
        map.mark_written(logical, length);
        break;
    }
    const Extents all = map.all();
    ExtentSummary walked;
    int64_t previous_offset = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      const Extent& e = all[i];
      const int64_t offset = static_cast<int64_t>(e.physical) - static_cast<int64_t>(e.logical);
      if (i == 0 || offset != previous_offset) ++walked.fragments;
      ++walked.length_histogram[std::bit_ceil(e.length)];
      walked.mapped_blocks += e.length;
      walked.unwritten_extents += e.unwritten;
      previous_offset = offset;
    }
    const ExtentSummary kept = map.summarize();
    ASSERT_EQ(kept.extents, all.size()) << "step " << step;
    ASSERT_EQ(kept.fragments, walked.fragments) << "step " << step;
    ASSERT_EQ(kept.mapped_blocks, walked.mapped_blocks) << "step " << step;
    ASSERT_EQ(kept.unwritten_extents, walked.unwritten_extents) << "step " << step;
    ASSERT_EQ(kept.length_histogram, walked.length_histogram) << "step " << step;
    for (const uint64_t end : {uint64_t{0}, uint64_t{1}, below(450), uint64_t{450}}) {
      uint64_t holes = 0;
      uint64_t cursor = 0;
      for (const Extent& e : all) {
        if (e.logical >= end) break;
        if (e.logical > cursor) ++holes;
        cursor = e.logical_end();
      }
      if (cursor < end) ++holes;
      ASSERT_EQ(map.count_holes(end), holes) << "step " << step << " end " << end;
    }
  }
}

// --- maximum extent length

// Neighbours whose combined length would exceed the longest record stay two
// records, as ext4 refuses to merge past its 15-bit length.
TEST(ExtentMap, MergingStopsAtTheMaxLength) {
  ExtentMap map(8);
  map.map(0, 100, 5, false);
  map.map(5, 105, 5, false);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 5, false}, {5, 105, 5, false}}));
  EXPECT_EQ(map.mapped_blocks(), 10u);
}

// Merging up to exactly the maximum is allowed.
TEST(ExtentMap, MergingUpToExactlyTheMaxLengthIsOneRecord) {
  ExtentMap map(8);
  map.map(0, 100, 4, false);
  map.map(8, 108, 4, false);
  map.map(4, 104, 4, false);  // joins the first; the third would exceed the max
  EXPECT_EQ(map.all(), (Extents{{0, 100, 8, false}, {8, 108, 4, false}}));
}

// A run longer than the maximum is mapped as several full-length records.
TEST(ExtentMap, MapOfALongerRunIsSplitIntoMaxLengthRecords) {
  ExtentMap map(8);
  map.map(0, 100, 20, true);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 8, true}, {8, 108, 8, true}, {16, 116, 4, true}}));
  EXPECT_EQ(map.extent_count(), 3u);
  EXPECT_EQ(map.unwritten_extent_count(), 3u);
  EXPECT_EQ(map.mapped_blocks(), 20u);
  // Converting it to written keeps the records within the maximum.
  map.mark_written(0, 20);
  for (const Extent& e : map.all()) {
    EXPECT_LE(e.length, 8u);
    EXPECT_FALSE(e.unwritten);
  }
  EXPECT_EQ(map.mapped_blocks(), 20u);
}

// A punched hole refilled in place merges back as far as the maximum allows.
TEST(ExtentMap, RemapAfterPunchMergesBackUpToTheMax) {
  ExtentMap map(8);
  map.map(0, 100, 8, false);
  ASSERT_EQ(map.unmap(2, 2), (Ranges{{102, 2}}));
  map.map(2, 102, 2, false);
  EXPECT_EQ(map.all(), (Extents{{0, 100, 8, false}}));
}

// Random map, unmap and mark_written with a maximum: every record is within it,
// and the blocks are the model's.
TEST(ExtentMap, RandomOperationsKeepRecordsWithinTheMaxLength) {
  constexpr uint64_t kBlocks = 64;
  constexpr uint64_t kMax = 5;
  std::mt19937_64 random(99);  // fixed seed: the same operations every run
  auto below = [&](uint64_t n) { return random() % n; };
  ExtentMap map(kMax);
  std::vector<std::optional<std::pair<uint64_t, bool>>> model(kBlocks);  // physical, unwritten
  for (int step = 0; step < 5000; ++step) {
    const uint64_t start = below(kBlocks);
    const uint64_t length = 1 + below(std::min<uint64_t>(16, kBlocks - start));
    switch (below(3)) {
      case 0: {
        const bool unwritten = below(2) == 0;
        for (const BlockRange& hole : map.holes(start, length)) {
          map.map(hole.start, hole.start + 1000, hole.length, unwritten);
          for (uint64_t b = hole.start; b < hole.start + hole.length; ++b) {
            model[b] = std::pair{b + 1000, unwritten};
          }
        }
        break;
      }
      case 1:
        (void)map.unmap(start, length);
        for (uint64_t b = start; b < start + length; ++b) model[b].reset();
        break;
      case 2:
        map.mark_written(start, length);
        for (uint64_t b = start; b < start + length; ++b) {
          if (model[b]) model[b]->second = false;
        }
        break;
    }
    std::vector<std::optional<std::pair<uint64_t, bool>>> seen(kBlocks);
    uint64_t mapped = 0;
    for (const Extent& e : map.all()) {
      ASSERT_GT(e.length, 0u) << "step " << step;
      ASSERT_LE(e.length, kMax) << "step " << step;
      for (uint64_t b = 0; b < e.length; ++b) {
        seen[e.logical + b] = std::pair{e.physical + b, e.unwritten};
      }
      mapped += e.length;
    }
    ASSERT_EQ(seen, model) << "step " << step;
    ASSERT_EQ(map.mapped_blocks(), mapped) << "step " << step;
  }
}

// --- length histogram

// Each extent counts in the bucket of its length rounded up to a power of two.
TEST(ExtentMap, LengthHistogramBucketsByPowerOfTwo) {
  ExtentMap map;
  map.map(0, 100, 1, false);
  map.map(10, 200, 3, false);
  map.map(20, 300, 4, true);
  map.map(30, 400, 5, false);
  const ExtentSummary s = map.summarize();
  EXPECT_EQ(s.length_histogram, (std::map<uint64_t, uint64_t>{{1, 1}, {4, 2}, {8, 1}}));
}

// A run split at the maximum shows as full-length records plus the remainder.
TEST(ExtentMap, LengthHistogramOfASplitRun) {
  ExtentMap map(8);
  map.map(0, 100, 20, false);
  EXPECT_EQ(map.summarize().length_histogram, (std::map<uint64_t, uint64_t>{{4, 1}, {8, 2}}));
  EXPECT_TRUE(ExtentMap().summarize().length_histogram.empty());
}

// --- scale

TEST(ExtentMap, MillionExtentsFromEveryOtherBlock) {
  constexpr uint64_t kExtents = 1'000'000;
  ExtentMap map;
  // Device blocks back to back, file blocks every other one: nothing merges, and
  // every extent changes the file-to-device offset (glibc's fallback on NFS).
  for (uint64_t i = 0; i < kExtents; ++i) map.map(2 * i, i, 1, false);
  EXPECT_EQ(map.extent_count(), kExtents);
  EXPECT_EQ(map.mapped_blocks(), kExtents);
  const ExtentSummary s = map.summarize();
  EXPECT_EQ(s.extents, kExtents);
  EXPECT_EQ(s.fragments, kExtents);
  EXPECT_EQ(map.count_holes(2 * kExtents), kExtents);
  EXPECT_EQ(map.next_hole(2 * 777'777), 2 * 777'777 + 1);
  EXPECT_EQ(map.next_data(2 * 777'777 + 1), 2 * 777'778);
  EXPECT_EQ(map.holes(1000, 10).size(), 5u);

  // Unmapping everything gives every block back, one run per extent.
  const Ranges released = map.unmap(0, 2 * kExtents);
  EXPECT_EQ(released.size(), kExtents);
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(map.mapped_blocks(), 0u);
}

// --- against a model

// One file block as the model sees it.
struct ModelBlock {
  bool mapped = false;
  uint64_t physical = 0;
  bool unwritten = false;
};

// Checks `map` against the per-block model, and the merge invariant.
void expect_matches(const ExtentMap& map, const std::vector<ModelBlock>& model, int step) {
  std::vector<ModelBlock> seen(model.size());
  uint64_t mapped = 0;
  uint64_t unwritten = 0;
  const Extents extents = map.all();
  for (size_t i = 0; i < extents.size(); ++i) {
    const Extent& e = extents[i];
    ASSERT_GT(e.length, 0u) << "step " << step;
    ASSERT_LE(e.logical_end(), model.size()) << "step " << step;
    for (uint64_t b = 0; b < e.length; ++b) {
      seen[e.logical + b] = {true, e.physical + b, e.unwritten};
    }
    mapped += e.length;
    if (e.unwritten) ++unwritten;
    if (i > 0) {
      const Extent& p = extents[i - 1];
      ASSERT_LE(p.logical_end(), e.logical) << "step " << step;
      const bool mergeable = p.logical_end() == e.logical && p.physical_end() == e.physical &&
                             p.unwritten == e.unwritten;
      EXPECT_FALSE(mergeable) << "step " << step << ": unmerged neighbours at " << e.logical;
    }
  }
  for (size_t b = 0; b < model.size(); ++b) {
    ASSERT_EQ(seen[b].mapped, model[b].mapped) << "step " << step << " block " << b;
    if (!model[b].mapped) continue;
    ASSERT_EQ(seen[b].physical, model[b].physical) << "step " << step << " block " << b;
    ASSERT_EQ(seen[b].unwritten, model[b].unwritten) << "step " << step << " block " << b;
  }
  EXPECT_EQ(map.mapped_blocks(), mapped) << "step " << step;
  EXPECT_EQ(map.extent_count(), extents.size()) << "step " << step;
  EXPECT_EQ(map.unwritten_extent_count(), unwritten) << "step " << step;
}

TEST(ExtentMap, RandomOperationsMatchABlockModel) {
  constexpr uint64_t kBlocks = 64;
  std::mt19937_64 random(20240601);  // fixed seed: the same operations every run
  auto below = [&](uint64_t n) { return random() % n; };
  ExtentMap map;
  std::vector<ModelBlock> model(kBlocks);
  for (int step = 0; step < 20000; ++step) {
    const uint64_t start = below(kBlocks);
    const uint64_t length = 1 + below(std::min<uint64_t>(8, kBlocks - start));
    switch (below(4)) {
      case 0: {  // map the holes of the range, at one of two file-to-device offsets
        const uint64_t offset = below(2) == 0 ? 1000 : 5000;
        const bool unwritten = below(2) == 0;
        for (const BlockRange& hole : map.holes(start, length)) {
          map.map(hole.start, hole.start + offset, hole.length, unwritten);
          for (uint64_t b = hole.start; b < hole.start + hole.length; ++b) {
            model[b] = {true, b + offset, unwritten};
          }
        }
        break;
      }
      case 1: {  // unmap; the released device blocks are exactly the mapped ones
        std::vector<uint64_t> expected;
        for (uint64_t b = start; b < start + length; ++b) {
          if (model[b].mapped) expected.push_back(model[b].physical);
          model[b] = {};
        }
        std::vector<uint64_t> released;
        for (const BlockRange& run : map.unmap(start, length)) {
          for (uint64_t p = run.start; p < run.start + run.length; ++p) released.push_back(p);
        }
        ASSERT_EQ(released, expected) << "step " << step;
        break;
      }
      case 2:
        map.mark_written(start, length);
        for (uint64_t b = start; b < start + length; ++b) model[b].unwritten = false;
        break;
      case 3: {  // queries
        std::optional<uint64_t> data;
        for (uint64_t b = start; b < kBlocks && !data; ++b) {
          if (model[b].mapped && !model[b].unwritten) data = b;
        }
        const std::optional<uint64_t> found = map.next_data(start);
        if (data) {
          EXPECT_EQ(found, data) << "step " << step;
        } else {
          // Only blocks past the model's end could hold data, and none are mapped there.
          EXPECT_FALSE(found.has_value()) << "step " << step;
        }
        uint64_t hole = start;
        while (hole < kBlocks && model[hole].mapped && !model[hole].unwritten) ++hole;
        EXPECT_EQ(map.next_hole(start), hole) << "step " << step;
        uint64_t holes = 0;
        for (uint64_t b = 0; b < start + length; ++b) {
          if (!model[b].mapped && (b == 0 || model[b - 1].mapped)) ++holes;
        }
        EXPECT_EQ(map.count_holes(start + length), holes) << "step " << step;
        break;
      }
    }
    expect_matches(map, model, step);
    if (HasFatalFailure()) return;
  }
}

// has_written() answers as a look through find() for a written extent does.
TEST(ExtentMap, HasWrittenAgreesWithFindEverywhere) {
  ExtentMap map;
  map.map(10, 100, 5, false);  // [10, 15) written
  map.map(15, 300, 3, true);   // [15, 18) unwritten
  map.map(22, 200, 2, false);  // [22, 24) written
  for (uint64_t start = 0; start < 26; ++start) {
    for (uint64_t length = 0; length < 26; ++length) {
      bool written = false;
      for (const Extent& e : map.find(start, length)) written = written || !e.unwritten;
      EXPECT_EQ(map.has_written(start, length), written) << start << "+" << length;
    }
  }
}

}  // namespace
}  // namespace mimicfs
