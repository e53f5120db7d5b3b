// SPDX-License-Identifier: Apache-2.0
#include "engine/space/block_range_set.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <set>
#include <vector>

namespace mimicfs {
namespace {

using Ranges = std::vector<BlockRange>;
using RangeMap = BlockRangeSet::Ranges;

// --- add

// Ranges that touch end to end become one, so the set has one entry per run.
TEST(BlockRangeSet, AddTouchingRangesMerges) {
  BlockRangeSet set;
  EXPECT_EQ(set.add(0, 5), 5u);
  EXPECT_EQ(set.add(10, 5), 5u);
  EXPECT_EQ(set.ranges(), (RangeMap{{0, 5}, {10, 5}}));
  EXPECT_EQ(set.add(5, 5), 5u);  // fills the gap exactly: touches both
  EXPECT_EQ(set.ranges(), (RangeMap{{0, 15}}));
  EXPECT_EQ(set.blocks(), 15u);
}

// add() returns only the blocks that were new: it is what a write must reserve.
TEST(BlockRangeSet, AddOverlappingCountsOnlyNewBlocks) {
  BlockRangeSet set;
  ASSERT_EQ(set.add(10, 10), 10u);
  EXPECT_EQ(set.add(15, 10), 5u);  // overlaps the end
  EXPECT_EQ(set.add(5, 10), 5u);   // overlaps the start
  EXPECT_EQ(set.add(12, 3), 0u);   // already inside
  EXPECT_EQ(set.ranges(), (RangeMap{{5, 20}}));
  EXPECT_EQ(set.blocks(), 20u);
}

// One add across several ranges absorbs them all and counts only the gaps.
TEST(BlockRangeSet, AddSpanningSeveralRangesMergesThemAll) {
  BlockRangeSet set;
  set.add(0, 2);
  set.add(4, 2);
  set.add(8, 2);
  EXPECT_EQ(set.add(1, 8), 4u);  // blocks 2, 3, 6, 7
  EXPECT_EQ(set.ranges(), (RangeMap{{0, 10}}));
  EXPECT_EQ(set.blocks(), 10u);
}

// A zero-length add is a no-op, not an empty range in the map.
TEST(BlockRangeSet, AddZeroLengthDoesNothing) {
  BlockRangeSet set;
  EXPECT_EQ(set.add(7, 0), 0u);
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.blocks(), 0u);
}

// --- remove

// Removing the middle of a range (a punch) leaves its head and tail.
TEST(BlockRangeSet, RemoveInsideRangeSplitsIt) {
  BlockRangeSet set;
  set.add(0, 10);
  EXPECT_EQ(set.remove(3, 4), 4u);
  EXPECT_EQ(set.ranges(), (RangeMap{{0, 3}, {7, 3}}));
  EXPECT_EQ(set.blocks(), 6u);
}

// remove() returns only the blocks that were in the set: it is what goes back to
// the allocator's reservation.
TEST(BlockRangeSet, RemoveAcrossRangesCountsOnlyBlocksInTheSet) {
  BlockRangeSet set;
  set.add(0, 5);
  set.add(10, 5);
  EXPECT_EQ(set.remove(3, 10), 5u);  // 3, 4 and 10, 11, 12
  EXPECT_EQ(set.ranges(), (RangeMap{{0, 3}, {13, 2}}));
  EXPECT_EQ(set.blocks(), 5u);
}

// Removing a gap, or nothing, changes nothing.
TEST(BlockRangeSet, RemoveOfAGapOrZeroLengthRemovesNothing) {
  BlockRangeSet set;
  set.add(0, 5);
  set.add(10, 5);
  EXPECT_EQ(set.remove(5, 5), 0u);
  EXPECT_EQ(set.remove(2, 0), 0u);
  EXPECT_EQ(set.ranges(), (RangeMap{{0, 5}, {10, 5}}));
  EXPECT_EQ(set.blocks(), 10u);
}

// A truncate removes everything from a block on.
TEST(BlockRangeSet, RemoveToInfinityKeepsOnlyTheHead) {
  BlockRangeSet set;
  set.add(0, 5);
  set.add(10, 5);
  set.add(20, 5);
  EXPECT_EQ(set.remove(12, UINT64_MAX / 2), 8u);
  EXPECT_EQ(set.ranges(), (RangeMap{{0, 5}, {10, 2}}));
}

// Removing every block leaves no empty ranges behind.
TEST(BlockRangeSet, RemoveEverythingLeavesItEmpty) {
  BlockRangeSet set;
  set.add(3, 4);
  set.add(20, 1);
  EXPECT_EQ(set.remove(0, 100), 5u);
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.blocks(), 0u);
}

// --- queries

// overlapping() clips the ranges to the query, in order.
TEST(BlockRangeSet, OverlappingClipsToTheRange) {
  BlockRangeSet set;
  set.add(0, 5);
  set.add(10, 5);
  set.add(20, 5);
  EXPECT_EQ(set.overlapping(3, 10), (Ranges{{3, 2}, {10, 3}}));
  EXPECT_EQ(set.overlapping(5, 5), Ranges{});
  EXPECT_EQ(set.overlapping(0, 100), (Ranges{{0, 5}, {10, 5}, {20, 5}}));
}

// gaps() is the complement of overlapping() inside the query, including the
// parts before the first range and after the last.
TEST(BlockRangeSet, GapsIncludeBothEdges) {
  BlockRangeSet set;
  set.add(5, 5);
  set.add(15, 5);
  EXPECT_EQ(set.gaps(0, 30), (Ranges{{0, 5}, {10, 5}, {20, 10}}));
  EXPECT_EQ(set.gaps(5, 5), Ranges{});            // exactly one range: no gap
  EXPECT_EQ(set.gaps(7, 10), (Ranges{{10, 5}}));  // starts and ends inside ranges
  EXPECT_EQ(set.gaps(12, 2), (Ranges{{12, 2}}));  // entirely inside a gap
  EXPECT_EQ(set.gaps(3, 0), Ranges{});
  EXPECT_EQ(BlockRangeSet().gaps(4, 6), (Ranges{{4, 6}}));
}

// at_or_after() finds the range holding a block, else the next one: what
// SEEK_DATA needs of delayed blocks.
TEST(BlockRangeSet, AtOrAfterFindsTheContainingOrNextRange) {
  BlockRangeSet set;
  set.add(5, 5);
  set.add(15, 5);
  EXPECT_EQ(set.at_or_after(0), (BlockRange{5, 5}));
  EXPECT_EQ(set.at_or_after(7), (BlockRange{5, 5}));
  EXPECT_EQ(set.at_or_after(10), (BlockRange{15, 5}));
  EXPECT_EQ(set.at_or_after(19), (BlockRange{15, 5}));
  EXPECT_EQ(set.at_or_after(20), std::nullopt);
  EXPECT_EQ(BlockRangeSet().at_or_after(0), std::nullopt);
}

// clear() drops the ranges and the count together.
TEST(BlockRangeSet, ClearEmptiesIt) {
  BlockRangeSet set;
  set.add(1, 3);
  set.clear();
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.blocks(), 0u);
  EXPECT_EQ(set.at_or_after(0), std::nullopt);
}

// --- against a model

// Random adds and removes against a std::set of blocks: counts, contents, the
// merged-and-never-adjacent invariant and every query agree at each step.
TEST(BlockRangeSet, RandomOperationsMatchASetOfBlocks) {
  constexpr uint64_t kBlocks = 96;
  std::mt19937_64 random(7);  // fixed seed: the same operations every run
  auto below = [&](uint64_t n) { return random() % n; };
  BlockRangeSet set;
  std::set<uint64_t> model;
  for (int step = 0; step < 20000; ++step) {
    const uint64_t start = below(kBlocks);
    const uint64_t length = below(std::min<uint64_t>(12, kBlocks - start) + 1);
    if (below(2) == 0) {
      uint64_t added = 0;
      for (uint64_t b = start; b < start + length; ++b) added += model.insert(b).second;
      ASSERT_EQ(set.add(start, length), added) << "step " << step;
    } else {
      uint64_t removed = 0;
      for (uint64_t b = start; b < start + length; ++b) removed += model.erase(b);
      ASSERT_EQ(set.remove(start, length), removed) << "step " << step;
    }

    // The ranges are the model's runs exactly: disjoint, sorted, never adjacent.
    RangeMap runs;
    for (uint64_t b : model) {
      if (!runs.empty() && runs.rbegin()->first + runs.rbegin()->second == b) {
        ++runs.rbegin()->second;
      } else {
        runs.emplace(b, 1);
      }
    }
    ASSERT_EQ(set.ranges(), runs) << "step " << step;
    ASSERT_EQ(set.blocks(), model.size()) << "step " << step;
    ASSERT_EQ(set.empty(), model.empty()) << "step " << step;

    const uint64_t q_start = below(kBlocks);
    const uint64_t q_length = below(kBlocks - q_start + 1);
    uint64_t in = 0;
    uint64_t out = 0;
    for (const BlockRange& r : set.overlapping(q_start, q_length)) {
      for (uint64_t b = r.start; b < r.start + r.length; ++b) {
        ASSERT_TRUE(model.contains(b)) << "step " << step;
        ++in;
      }
    }
    for (const BlockRange& r : set.gaps(q_start, q_length)) {
      for (uint64_t b = r.start; b < r.start + r.length; ++b) {
        ASSERT_FALSE(model.contains(b)) << "step " << step;
        ++out;
      }
    }
    ASSERT_EQ(in + out, q_length) << "step " << step;

    const std::optional<BlockRange> next = set.at_or_after(q_start);
    auto first = model.lower_bound(q_start);
    if (first == model.end()) {
      ASSERT_EQ(next, std::nullopt) << "step " << step;
    } else {
      ASSERT_TRUE(next.has_value()) << "step " << step;
      ASSERT_LE(next->start, *first) << "step " << step;
      ASSERT_GT(next->start + next->length, *first) << "step " << step;
    }
  }
}

// overlaps() answers as overlapping() does, for every range about two of them.
TEST(BlockRangeSet, OverlapsAgreesWithOverlappingEverywhere) {
  BlockRangeSet set;
  set.add(10, 5);  // [10, 15)
  set.add(20, 1);  // [20, 21)
  for (uint64_t start = 0; start < 25; ++start) {
    for (uint64_t length = 0; length < 25; ++length) {
      EXPECT_EQ(set.overlaps(start, length), !set.overlapping(start, length).empty())
          << start << "+" << length;
    }
  }
  EXPECT_FALSE(BlockRangeSet().overlaps(0, UINT64_MAX));
}

}  // namespace
}  // namespace mimicfs
