// SPDX-License-Identifier: Apache-2.0
#include "engine/durability/durability.h"

#include "engine/data/memory_data_store.h"
#include "engine/data/page_run_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace mimicfs {
namespace {

constexpr uint64_t kPage = FileDurability::kPageBytes;

// A file's bytes as FileDurability sees them; records every read.
struct FakeFile final : FileDurability::FileView {
  explicit FakeFile(std::string initial = "") : bytes(std::move(initial)) {}
  std::string bytes;
  bool holes = false;  // every page reads as a hole
  std::set<uint64_t> hole_pages;  // these pages read as holes
  bool in_place = false;  // its bytes are in memory, to be read in place
  mutable std::vector<std::pair<uint64_t, uint64_t>> reads;
  mutable std::vector<std::pair<uint64_t, uint64_t>> reads_in_place;

  bool has_data(uint64_t offset, uint64_t) const override {
    return !holes && !hole_pages.contains(offset / kPage);
  }
  void read(uint64_t offset, std::span<std::byte> out) const override {
    reads.emplace_back(offset, out.size());
    std::memcpy(out.data(), bytes.data() + offset, out.size());
  }
  const std::byte* in_memory(uint64_t offset, uint64_t length) const override {
    if (!in_place) return nullptr;
    reads_in_place.emplace_back(offset, length);
    return reinterpret_cast<const std::byte*>(bytes.data()) + offset;
  }
};

std::string filled(size_t length, char c) { return std::string(length, c); }

TEST(FileDurability, StartsDurableAndEmpty) {
  FileDurability d;
  EXPECT_FALSE(d.unsynced());
  EXPECT_EQ(d.unsynced_bytes(), 0u);
  EXPECT_EQ(d.synced_size(), 0u);
  EXPECT_TRUE((d.saved_page_count() == 0));
}

TEST(FileDurability, BeforeChangeSavesNothingAboveTheSyncedSize) {
  FileDurability d;
  FakeFile file{filled(3 * kPage, 'a')};
  d.before_change(0, 3 * kPage, file);  // synced size 0: all new data
  EXPECT_TRUE(file.reads.empty());
  EXPECT_TRUE((d.saved_page_count() == 0));
  EXPECT_FALSE(d.unsynced());
}

TEST(FileDurability, BeforeChangeSavesPagesBelowTheSyncedSize) {
  FileDurability d;
  FakeFile file{filled(3 * kPage, 'a')};
  d.synced(2 * kPage + 100);
  // [kPage + 10, 3 * kPage): pages 1 and 2; page 2 clipped to the synced size.
  d.before_change(kPage + 10, 2 * kPage - 10, file);
  using Read = std::pair<uint64_t, uint64_t>;
  // One read for the run, up to the synced size.
  EXPECT_EQ(file.reads, (std::vector<Read>{{kPage, kPage + 100}}));
  ASSERT_EQ(d.saved_page_count(), 2u);
  EXPECT_EQ(d.saved_page(kPage), filled(kPage, 'a'));
  EXPECT_EQ(d.saved_page(2 * kPage), filled(100, 'a'));
  EXPECT_TRUE(d.unsynced());
  EXPECT_EQ(d.unsynced_bytes(), 0u);  // saving is not writing
}

TEST(FileDurability, SyncedPagesInMemoryAreSavedInPlaceAndTheOthersRead) {
  FileDurability d;
  FakeFile file{filled(4 * kPage, 'a')};
  file.in_place = true;
  d.synced(kPage);
  file.bytes.replace(kPage + 10, 10, filled(10, 'w'));  // written past the synced size,
  d.written(kPage + 10, 10);
  d.size_synced(3 * kPage + 100);  // which a size commit then moved past them
  using Read = std::pair<uint64_t, uint64_t>;
  // A run synced and unchanged since: taken in place.
  d.before_change(2 * kPage, kPage, file);
  EXPECT_EQ(file.reads_in_place, (std::vector<Read>{{2 * kPage, kPage}}));
  EXPECT_TRUE(file.reads.empty());
  // Page 1 holds unsynced bytes, and page 3 reaches past the synced size: read.
  d.before_change(kPage, kPage, file);
  d.before_change(3 * kPage, kPage, file);
  EXPECT_EQ(file.reads_in_place.size(), 1u);
  EXPECT_EQ(file.reads, (std::vector<Read>{{kPage, kPage}, {3 * kPage, 100}}));
  std::string page1 = filled(kPage, 'a');
  page1.replace(10, 10, std::string(10, '\0'));
  EXPECT_EQ(d.saved_page(kPage), page1);
  EXPECT_EQ(d.saved_page(2 * kPage), filled(kPage, 'a'));
  EXPECT_EQ(d.saved_page(3 * kPage), filled(100, 'a'));
  // What was in place is copied, not referred to.
  file.bytes.assign(4 * kPage, 'b');
  EXPECT_EQ(d.saved_page(2 * kPage), filled(kPage, 'a'));
}

// A file whose contents are in a memory store; the pages in `holes` read as holes.
struct StoreFile final : FileDurability::FileView {
  explicit StoreFile(const MemoryFileData& data) : data(data) {}
  const MemoryFileData& data;
  std::set<uint64_t> holes;
  bool has_data(uint64_t offset, uint64_t) const override { return !holes.contains(offset / kPage); }
  void read(uint64_t offset, std::span<std::byte> out) const override { data.read(offset, out); }
};

TEST(FileDurability, ACutTailTakesTheStoresWholeSyncedSegmentsAsTheyAre) {
  constexpr uint64_t kSegment = MemoryFileData::kSegmentSize;
  const uint64_t saved_at_start = FileDurability::saved_memory_bytes();
  std::string synced(5 * kSegment + 3 * kPage, '\0');
  for (uint64_t i = 0; i < synced.size(); ++i) synced[i] = static_cast<char>(1 + i / kPage % 251);
  MemoryFileData contents;
  contents.write(0, std::as_bytes(std::span(synced)));
  StoreFile file(contents);
  FileDurability d;
  d.synced(synced.size());
  d.written(kSegment + 7, 1);                       // segment 1: written since the sync
  d.before_change(2 * kSegment + 5 * kPage, kPage, file);  // segment 2: a page saved
  file.holes.insert(4 * kSegment / kPage + 9);      // segment 4: a page reads as a hole
  const uint64_t stored = contents.stored_bytes();
  const uint64_t saved = FileDurability::saved_memory_bytes();
  // The cut [kPage, end): segment 0 is not whole in it, the last not below the synced size.
  d.save_handed_over(kPage, synced.size() - kPage, file, contents);
  EXPECT_EQ(contents.stored_bytes(), stored - kSegment) << "segment 3 alone";
  EXPECT_EQ(FileDurability::saved_memory_bytes(), saved + kSegment);
  EXPECT_EQ(d.saved_page(3 * kSegment), synced.substr(3 * kSegment, kPage));
  // The rest is copied, segment 3 not again (the store reads zeros there now).
  d.before_change(kPage, synced.size() - kPage, file);
  for (uint64_t page = kPage; page < synced.size(); page += kPage) {
    std::optional<std::string> expected = synced.substr(page, kPage);
    if (page == kSegment) expected->at(7) = '\0';  // unsynced bytes are saved as zeros
    if (file.holes.contains(page / kPage)) expected.reset();
    ASSERT_EQ(d.saved_page(page), expected) << page;
  }
  EXPECT_FALSE(d.saved_page(0).has_value());
  d.synced(kPage);
  EXPECT_EQ(FileDurability::saved_memory_bytes(), saved_at_start);
}

TEST(FileDurability, NothingIsHandedOverBelowASegmentOrPastTheSyncedSize) {
  constexpr uint64_t kSegment = MemoryFileData::kSegmentSize;
  const std::string data = filled(2 * kSegment, 'a');
  MemoryFileData contents;
  contents.write(0, std::as_bytes(std::span(data)));
  StoreFile file(contents);
  FileDurability d;
  d.synced(2 * kSegment - 1);  // the second segment's last byte is not synced
  d.save_handed_over(kPage, 2 * kSegment - kPage, file, contents);
  d.save_handed_over(kSegment, kSegment - 1, file, contents);
  EXPECT_EQ(contents.stored_bytes(), 2 * kSegment);
  EXPECT_EQ(d.saved_page_count(), 0u);
  d.synced(2 * kSegment);
  d.save_handed_over(0, 2 * kSegment, file, contents);
  EXPECT_EQ(contents.stored_bytes(), 0u);
  EXPECT_EQ(d.saved_page_count(), 2 * kSegment / kPage);
  EXPECT_EQ(d.saved_page(kSegment + kPage), filled(kPage, 'a'));
}

TEST(FileDurability, BeforeChangeSavesEachPageOncePerSync) {
  FileDurability d;
  FakeFile file{filled(2 * kPage, 'a')};
  d.synced(2 * kPage);
  d.before_change(10, 1, file);
  file.bytes[10] = 'b';  // the first change: page 0 keeps its synced contents
  d.before_change(0, 2 * kPage, file);
  EXPECT_EQ(file.reads.size(), 2u);  // page 0 once, page 1 once
  EXPECT_EQ(d.saved_page(0), filled(kPage, 'a'));

  d.synced(2 * kPage);  // a new sync: the next change saves again
  EXPECT_TRUE((d.saved_page_count() == 0));
  d.before_change(10, 1, file);
  EXPECT_EQ(file.reads.size(), 3u);
  EXPECT_EQ(d.saved_page(0)->at(10), 'b');
}

TEST(FileDurability, BeforeChangeOfNothingSavesNothing) {
  FileDurability d;
  FakeFile file{filled(kPage, 'a')};
  d.synced(kPage);
  d.before_change(0, 0, file);
  d.before_change(kPage, 100, file);  // at the synced size
  EXPECT_TRUE(file.reads.empty());
  EXPECT_FALSE(d.unsynced());
}

TEST(FileDurability, HoleIsSavedAsNullopt) {
  FileDurability d;
  FakeFile file;
  file.holes = true;
  d.synced(kPage);
  d.before_change(0, 1, file);
  ASSERT_EQ(d.saved_page_count(), 1u);
  EXPECT_FALSE(d.saved_page(0).has_value());
}

TEST(FileDurability, SyncedClearsEverything) {
  FileDurability d;
  FakeFile file{filled(kPage, 'a')};
  d.synced(kPage);
  d.before_change(0, 10, file);
  d.written(0, 10);
  d.metadata_changed();
  ASSERT_TRUE(d.unsynced());
  d.synced(5000);
  EXPECT_FALSE(d.unsynced());
  EXPECT_EQ(d.unsynced_bytes(), 0u);
  EXPECT_TRUE((d.saved_page_count() == 0));
  EXPECT_EQ(d.synced_size(), 5000u);
}

TEST(FileDurability, UnsyncedBytesCountsTheUnionOfWrites) {
  FileDurability d;
  d.written(0, 100);
  d.written(50, 100);
  d.written(1000, 1);
  d.written(5, 0);
  EXPECT_EQ(d.unsynced_bytes(), 151u);
  EXPECT_TRUE(d.unsynced());
}

TEST(FileDurability, MetadataChangeIsUnsyncedWithoutBytes) {
  FileDurability d;
  d.metadata_changed();
  EXPECT_TRUE(d.unsynced());
  EXPECT_EQ(d.unsynced_bytes(), 0u);
  d.synced(0);
  EXPECT_FALSE(d.unsynced());
}

TEST(FileDurability, RangeSyncedDropsFullyCoveredSavedPages) {
  FileDurability d;
  FakeFile file{filled(3 * kPage, 'o')};
  d.synced(3 * kPage);
  d.before_change(0, 3 * kPage, file);
  file.bytes = filled(3 * kPage, 'n');
  d.written(0, 3 * kPage);
  d.range_synced(kPage, kPage, 3 * kPage, file);
  EXPECT_EQ(d.saved_page_count(), 2u);
  EXPECT_FALSE(d.saved(kPage));
  EXPECT_EQ(d.saved_page(0), filled(kPage, 'o'));
  EXPECT_EQ(d.saved_page(2 * kPage), filled(kPage, 'o'));
  EXPECT_EQ(d.unsynced_bytes(), 2 * kPage);
  EXPECT_EQ(d.synced_size(), 3 * kPage);
}

TEST(FileDurability, RangeSyncedPatchesPartlyCoveredPagesWithCurrentBytes) {
  FileDurability d;
  FakeFile file{filled(2 * kPage, 'o')};
  d.synced(2 * kPage);
  d.before_change(0, 2 * kPage, file);
  file.bytes = filled(2 * kPage, 'n');
  d.written(0, 2 * kPage);
  // [kPage - 10, kPage + 20): the tail of page 0 and the head of page 1.
  d.range_synced(kPage - 10, 30, 2 * kPage, file);
  std::string page0 = filled(kPage, 'o');
  page0.replace(kPage - 10, 10, filled(10, 'n'));
  std::string page1 = filled(kPage, 'o');
  page1.replace(0, 20, filled(20, 'n'));
  EXPECT_EQ(d.saved_page(0), page0);
  EXPECT_EQ(d.saved_page(kPage), page1);
  EXPECT_EQ(d.unsynced_bytes(), 2 * kPage - 30);
}

TEST(FileDurability, RangeSyncedTurnsASavedHoleIntoZerosAndTheRange) {
  FileDurability d;
  FakeFile file;
  file.holes = true;
  d.synced(kPage);
  d.before_change(0, kPage, file);
  FakeFile now{filled(kPage, 'n')};
  d.range_synced(100, 10, kPage, now);
  // The whole page: restoring only [0, 110) would leave the unsynced bytes after it.
  std::string expected(kPage, '\0');
  expected.replace(100, 10, filled(10, 'n'));
  EXPECT_EQ(d.saved_page(0), expected);
}

TEST(FileDurability, RangeSyncedPatchesAPageClippedAtTheSyncedSize) {
  FileDurability d;
  FakeFile file{filled(kPage + 100, 'o')};
  d.synced(kPage + 100);
  d.before_change(kPage, 100, file);  // saves 100 bytes of page 1
  file.bytes = filled(kPage + 500, 'n');
  d.range_synced(kPage + 400, 100, kPage + 500, file);
  std::string expected = filled(100, 'o') + std::string(300, '\0') + filled(100, 'n');
  EXPECT_EQ(d.saved_page(kPage), expected);
  EXPECT_EQ(d.synced_size(), kPage + 500);
}

TEST(FileDurability, RangeSyncedExtendsTheSyncedSize) {
  FileDurability d;
  FakeFile file{filled(8000, 'n')};
  d.written(0, 5000);
  d.range_synced(0, 5000, 5000, file);
  EXPECT_EQ(d.synced_size(), 5000u);
  EXPECT_EQ(d.unsynced_bytes(), 0u);
  EXPECT_FALSE(d.unsynced());
  EXPECT_TRUE(file.reads.empty());  // nothing saved: nothing to patch
  // The durable size is the range's end, not the file's.
  d.range_synced(6000, 100, 8000, file);
  EXPECT_EQ(d.synced_size(), 6100u);
}

TEST(FileDurability, RangeSyncedNeverShrinksTheSyncedSize) {
  FileDurability d;
  FakeFile file{filled(3 * kPage, 'n')};
  d.synced(3 * kPage);
  d.range_synced(0, 10, 3 * kPage, file);
  EXPECT_EQ(d.synced_size(), 3 * kPage);
}

TEST(FileDurability, RangeSyncedKeepsOtherUnsyncedBytes) {
  FileDurability d;
  FakeFile file{filled(3 * kPage, 'n')};
  d.written(0, 100);
  d.written(200, 100);
  d.range_synced(200, 100, 300, file);
  EXPECT_EQ(d.unsynced_bytes(), 100u);
  EXPECT_TRUE(d.unsynced());
}

TEST(FileDurability, BeforeChangeSavesRunsAroundHoles) {
  FileDurability d;
  std::string bytes;
  for (int page = 0; page < 40; ++page) bytes += filled(kPage, static_cast<char>('A' + page % 26));
  FakeFile file{bytes};
  file.hole_pages = {20};
  d.synced(40 * kPage);
  d.before_change(0, 40 * kPage, file);
  // Data runs are read 16 pages at most at a time, and end at a hole.
  using Read = std::pair<uint64_t, uint64_t>;
  EXPECT_EQ(file.reads, (std::vector<Read>{{0, 16 * kPage},
                                           {16 * kPage, 4 * kPage},
                                           {21 * kPage, 16 * kPage},
                                           {37 * kPage, 3 * kPage}}));
  EXPECT_EQ(d.saved_page_count(), 40u);
  for (uint64_t page = 0; page < 40; ++page) {
    if (page == 20) {
      EXPECT_TRUE(d.saved(page * kPage));
      EXPECT_FALSE(d.saved_page(page * kPage).has_value());
    } else {
      EXPECT_EQ(d.saved_page(page * kPage), bytes.substr(page * kPage, kPage)) << page;
    }
  }
}

TEST(FileDurability, BeforeChangeSavesBytesWrittenSinceTheSyncAsZeros) {
  FileDurability d;
  FakeFile file{filled(kPage, 'a')};
  d.synced(100);
  d.written(200, 100);  // past the synced size: the durable file reads zeros there
  d.range_synced(1000, 10, 1010, file);  // an O_DSYNC write moves the synced size past it
  d.before_change(0, 10, file);
  EXPECT_EQ(d.saved_page(0), filled(200, 'a') + std::string(100, '\0') + filled(710, 'a'));
}

TEST(FileDurability, SizeSyncedForgetsSavedBytesPastTheSize) {
  FileDurability d;
  FakeFile file{filled(3 * kPage, 'o')};
  d.synced(3 * kPage);
  d.before_change(0, 3 * kPage, file);
  d.size_synced(kPage + 100);
  EXPECT_EQ(d.saved_page_count(), 2u);
  EXPECT_FALSE(d.saved(2 * kPage));
  EXPECT_EQ(d.saved_page(kPage), filled(100, 'o'));
  // A later sync that extends the file finds zeros past the old size.
  d.size_synced(2 * kPage);
  EXPECT_EQ(d.saved_page(kPage), filled(100, 'o') + std::string(kPage - 100, '\0'));
}

TEST(FileDurability, CommitZeroesZeroesTheSavedContents) {
  FileDurability d;
  FakeFile file{filled(2 * kPage, 'o')};
  d.synced(2 * kPage);
  d.before_change(0, 2 * kPage, file);
  d.zeroed(100, kPage);
  EXPECT_EQ(d.saved_page(0), filled(kPage, 'o'));  // not durable until a commit
  d.commit_zeroes();
  EXPECT_EQ(d.saved_page(0), filled(100, 'o') + std::string(kPage - 100, '\0'));
  EXPECT_EQ(d.saved_page(kPage), std::string(100, '\0') + filled(kPage - 100, 'o'));
}

TEST(FileDurability, PagesARangeSyncDropsGiveTheirMemoryBack) {
  // O_DSYNC overwrites of one synced page: each saves it, and its range sync
  // drops it again; nothing may pile up until the next full sync.
  FileDurability d;
  FakeFile file{filled(4 * kPage, 'o')};
  d.synced(4 * kPage);
  // No kept run (an earlier test's): one taken for fewer pages than it has
  // counts them all.
  PageRunMemory::instance().trim();
  const uint64_t before = FileDurability::saved_memory_bytes();
  for (int i = 0; i < 1000; ++i) {
    d.before_change(kPage, kPage, file);
    d.written(kPage, kPage);
    d.range_synced(kPage, kPage, 4 * kPage, file);
  }
  EXPECT_EQ(FileDurability::saved_memory_bytes(), before);
  EXPECT_FALSE(d.unsynced());
  // A run of which one page stays saved keeps only that run's block.
  d.before_change(0, 3 * kPage, file);
  EXPECT_EQ(FileDurability::saved_memory_bytes(), before + 3 * kPage);
  d.range_synced(0, 2 * kPage, 4 * kPage, file);
  EXPECT_EQ(FileDurability::saved_memory_bytes(), before + 3 * kPage);
  d.size_synced(2 * kPage);
  EXPECT_EQ(FileDurability::saved_memory_bytes(), before);
  d.before_change(0, kPage, file);
  d.synced(4 * kPage);
  EXPECT_EQ(FileDurability::saved_memory_bytes(), before);
}

TEST(FileDurability, RangeSyncedTurnsAHoleIntoAPageOfItsOwn) {
  FileDurability d;
  FakeFile file;
  file.holes = true;
  d.synced(kPage);
  // No kept run (an earlier test's): one taken for fewer pages than it has
  // counts them all.
  PageRunMemory::instance().trim();
  const uint64_t before = FileDurability::saved_memory_bytes();
  d.before_change(0, kPage, file);
  EXPECT_EQ(FileDurability::saved_memory_bytes(), before);  // a hole takes no memory
  FakeFile now{filled(kPage, 'n')};
  d.range_synced(0, 10, kPage, now);
  EXPECT_EQ(FileDurability::saved_memory_bytes(), before + kPage);
  d.synced(kPage);
  EXPECT_EQ(FileDurability::saved_memory_bytes(), before);
}

}  // namespace
}  // namespace mimicfs
