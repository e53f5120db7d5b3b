// SPDX-License-Identifier: Apache-2.0
#include "engine/durability/page_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <vector>

namespace mimicfs {

// Failures print "[start, +length)" rather than the bytes of a BlockRange.
static void PrintTo(const BlockRange& r, std::ostream* os) {
  *os << "[" << r.start << ", +" << r.length << ")";
}

namespace {

constexpr uint64_t kPage = FilePageCache::kPageBytes;

std::vector<BlockRange> ranges(std::initializer_list<BlockRange> list) { return list; }

TEST(FilePageCache, PageDirtyUnitRoundsAByteToItsPage) {
  FilePageCache cache(kPage);
  EXPECT_EQ(cache.write(1, 1), kPage);
  EXPECT_EQ(cache.dirty_bytes(), kPage);
  EXPECT_EQ(cache.write(100, 1), 0u);  // the same page: nothing new
  // A write across a page boundary dirties both pages.
  EXPECT_EQ(cache.write(kPage - 1, 2), kPage);
  EXPECT_EQ(cache.dirty_bytes(), 2 * kPage);
  EXPECT_EQ(cache.take_dirty(0, 100 * kPage), ranges({{0, 2 * kPage}}));
}

TEST(FilePageCache, ByteDirtyUnitKeepsExactDiscontiguousRanges) {
  FilePageCache cache(1);
  EXPECT_EQ(cache.write(10, 5), 5u);
  EXPECT_EQ(cache.write(100, 5), 5u);
  EXPECT_EQ(cache.write(12, 5), 2u);  // overlaps [10, 15): extends it to 17
  EXPECT_EQ(cache.dirty_bytes(), 12u);
  EXPECT_EQ(cache.take_dirty(0, 1000), ranges({{10, 7}, {100, 5}}));
  EXPECT_EQ(cache.dirty_bytes(), 0u);
}

TEST(FilePageCache, ByteDirtyUnitMergesAdjacentWrites) {
  FilePageCache cache(1);
  cache.write(0, 10);
  cache.write(10, 10);
  EXPECT_EQ(cache.take_dirty(0, 100), ranges({{0, 20}}));
}

TEST(FilePageCache, EmptyWriteDirtiesNothing) {
  FilePageCache cache(kPage);
  EXPECT_EQ(cache.write(5, 0), 0u);
  EXPECT_EQ(cache.dirty_bytes(), 0u);
  EXPECT_EQ(cache.read(0, kPage).size(), 1u);  // and caches nothing
}

TEST(FilePageCache, TakeDirtyReturnsAndRemovesOnlyTheWindow) {
  FilePageCache cache(1);
  cache.write(0, 100);
  cache.write(200, 100);
  EXPECT_EQ(cache.take_dirty(50, 200), ranges({{50, 50}, {200, 50}}));
  EXPECT_EQ(cache.dirty_bytes(), 100u);
  EXPECT_TRUE(cache.take_dirty(50, 200).empty());  // already taken
  EXPECT_EQ(cache.take_dirty(0, 1000), ranges({{0, 50}, {250, 50}}));
  EXPECT_EQ(cache.dirty_bytes(), 0u);
}

TEST(FilePageCache, TakeDirtyTakesWholePagesAWindowCuts) {
  // An O_DSYNC write of [0, 10000) writes back the three pages it dirtied.
  FilePageCache cache(kPage);
  cache.write(0, 10'000);
  cache.write(5 * kPage, 1);
  EXPECT_EQ(cache.take_dirty(0, 10'000), ranges({{0, 3 * kPage}}));
  EXPECT_EQ(cache.dirty_bytes(), kPage);
  EXPECT_EQ(cache.take_dirty(5 * kPage + 100, 1), ranges({{5 * kPage, kPage}}));
  EXPECT_TRUE(cache.take_dirty(0, 0).empty());
}

TEST(FilePageCache, ReadReturnsMissingPagesOnce) {
  FilePageCache cache(kPage);
  EXPECT_EQ(cache.read(100, 10), ranges({{0, kPage}}));
  EXPECT_TRUE(cache.read(100, 10).empty());
  EXPECT_TRUE(cache.read(0, kPage).empty());
  // Across into the next page: only that one is missing.
  EXPECT_EQ(cache.read(kPage - 1, 2), ranges({{kPage, kPage}}));
  // A read around a cached page misses on both sides, page aligned.
  cache.read(5 * kPage, 1);
  EXPECT_EQ(cache.read(3 * kPage + 7, 3 * kPage),
            ranges({{3 * kPage, 2 * kPage}, {6 * kPage, kPage}}));
  EXPECT_TRUE(cache.read(3 * kPage, 4 * kPage).empty());
  EXPECT_EQ(cache.read(0, 7 * kPage), ranges({{2 * kPage, kPage}}));  // never read
}

TEST(FilePageCache, WrittenPagesAreCached) {
  FilePageCache cache(1);
  cache.write(kPage + 1, 1);  // a byte caches its whole page
  EXPECT_EQ(cache.read(0, 3 * kPage), ranges({{0, kPage}, {2 * kPage, kPage}}));
}

TEST(FilePageCache, EmptyReadMissesNothing) {
  FilePageCache cache(kPage);
  EXPECT_TRUE(cache.read(0, 0).empty());
  EXPECT_EQ(cache.read(0, 1).size(), 1u);  // the empty read cached nothing
}

TEST(FilePageCache, WrittenThroughDropsDirtyBytesAndReturnsTheCount) {
  FilePageCache cache(kPage);
  cache.write(0, 2 * kPage);
  EXPECT_EQ(cache.written_through(0, kPage), kPage);
  EXPECT_EQ(cache.dirty_bytes(), kPage);
  EXPECT_EQ(cache.written_through(0, kPage), 0u);
  EXPECT_EQ(cache.written_through(10 * kPage, 0), 0u);
  EXPECT_EQ(cache.take_dirty(0, 10 * kPage), ranges({{kPage, kPage}}));
}

TEST(FilePageCache, WrittenThroughLeavesThePagesCached) {
  FilePageCache cache(kPage);
  cache.write(0, kPage);
  cache.written_through(0, kPage);
  EXPECT_TRUE(cache.read(0, kPage).empty());
}

TEST(FilePageCache, DropRemovesDirtyBytesAndReturnsTheCount) {
  FilePageCache cache(1);
  cache.write(0, 100);
  cache.write(200, 100);
  EXPECT_EQ(cache.drop(50, 200), 100u);
  EXPECT_EQ(cache.dirty_bytes(), 100u);
  EXPECT_EQ(cache.take_dirty(0, 1000), ranges({{0, 50}, {250, 50}}));
  EXPECT_EQ(cache.drop(0, 0), 0u);
}

TEST(FilePageCache, DropUncachesWholePagesOnly) {
  FilePageCache cache(kPage);
  cache.read(0, 4 * kPage);
  // A truncate at kPage + 10: page 1 keeps its head, pages 2 and 3 go.
  cache.drop(kPage + 10, 3 * kPage);
  EXPECT_EQ(cache.read(0, 4 * kPage), ranges({{2 * kPage, 2 * kPage}}));
}

TEST(FilePageCache, DropToTheEndOfTheFile) {
  FilePageCache cache(kPage);
  cache.write(0, 3 * kPage);
  const uint64_t huge = uint64_t{1} << 62;  // truncate: from the size to the end
  EXPECT_EQ(cache.drop(kPage, huge), 2 * kPage);
  EXPECT_EQ(cache.dirty_bytes(), kPage);
}

TEST(FilePageCache, ClearForgetsEverything) {
  FilePageCache cache(kPage);
  cache.write(0, 3 * kPage);
  cache.clear();
  EXPECT_EQ(cache.dirty_bytes(), 0u);
  EXPECT_TRUE(cache.take_dirty(0, 10 * kPage).empty());
  EXPECT_EQ(cache.read(0, 3 * kPage), ranges({{0, 3 * kPage}}));
}

}  // namespace
}  // namespace mimicfs
