#include "backends/durability.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mimicfs {
namespace {

constexpr uint64_t kPage = FileDurability::kPageBytes;

// A file's bytes as a PageReader sees them; records every read.
struct FakeFile {
  std::string bytes;
  bool holes = false;  // every page reads as a hole
  std::vector<std::pair<uint64_t, uint64_t>> reads;

  FileDurability::PageReader reader() {
    return [this](uint64_t offset, uint64_t length) -> std::optional<std::string> {
      reads.emplace_back(offset, length);
      if (holes) return std::nullopt;
      return bytes.substr(offset, length);
    };
  }
};

std::string filled(size_t length, char c) { return std::string(length, c); }

TEST(FileDurability, StartsDurableAndEmpty) {
  FileDurability d;
  EXPECT_FALSE(d.unsynced());
  EXPECT_EQ(d.unsynced_bytes(), 0u);
  EXPECT_EQ(d.synced_size(), 0u);
  EXPECT_TRUE(d.saved_pages().empty());
}

TEST(FileDurability, BeforeChangeSavesNothingAboveTheSyncedSize) {
  FileDurability d;
  FakeFile file{filled(3 * kPage, 'a')};
  d.before_change(0, 3 * kPage, file.reader());  // synced size 0: all new data
  EXPECT_TRUE(file.reads.empty());
  EXPECT_TRUE(d.saved_pages().empty());
  EXPECT_FALSE(d.unsynced());
}

TEST(FileDurability, BeforeChangeSavesPagesBelowTheSyncedSize) {
  FileDurability d;
  FakeFile file{filled(3 * kPage, 'a')};
  d.synced(2 * kPage + 100);
  // [kPage + 10, 3 * kPage): pages 1 and 2; page 2 clipped to the synced size.
  d.before_change(kPage + 10, 2 * kPage - 10, file.reader());
  using Read = std::pair<uint64_t, uint64_t>;
  EXPECT_EQ(file.reads, (std::vector<Read>{{kPage, kPage}, {2 * kPage, 100}}));
  ASSERT_EQ(d.saved_pages().size(), 2u);
  EXPECT_EQ(d.saved_pages().at(kPage), filled(kPage, 'a'));
  EXPECT_EQ(d.saved_pages().at(2 * kPage), filled(100, 'a'));
  EXPECT_TRUE(d.unsynced());
  EXPECT_EQ(d.unsynced_bytes(), 0u);  // saving is not writing
}

TEST(FileDurability, BeforeChangeSavesEachPageOncePerSync) {
  FileDurability d;
  FakeFile file{filled(2 * kPage, 'a')};
  d.synced(2 * kPage);
  d.before_change(10, 1, file.reader());
  file.bytes[10] = 'b';  // the first change: page 0 keeps its synced contents
  d.before_change(0, 2 * kPage, file.reader());
  EXPECT_EQ(file.reads.size(), 2u);  // page 0 once, page 1 once
  EXPECT_EQ(d.saved_pages().at(0), filled(kPage, 'a'));

  d.synced(2 * kPage);  // a new sync: the next change saves again
  EXPECT_TRUE(d.saved_pages().empty());
  d.before_change(10, 1, file.reader());
  EXPECT_EQ(file.reads.size(), 3u);
  EXPECT_EQ(d.saved_pages().at(0)->at(10), 'b');
}

TEST(FileDurability, BeforeChangeOfNothingSavesNothing) {
  FileDurability d;
  FakeFile file{filled(kPage, 'a')};
  d.synced(kPage);
  d.before_change(0, 0, file.reader());
  d.before_change(kPage, 100, file.reader());  // at the synced size
  EXPECT_TRUE(file.reads.empty());
  EXPECT_FALSE(d.unsynced());
}

TEST(FileDurability, HoleIsSavedAsNullopt) {
  FileDurability d;
  FakeFile file;
  file.holes = true;
  d.synced(kPage);
  d.before_change(0, 1, file.reader());
  ASSERT_EQ(d.saved_pages().size(), 1u);
  EXPECT_FALSE(d.saved_pages().at(0).has_value());
}

TEST(FileDurability, SyncedClearsEverything) {
  FileDurability d;
  FakeFile file{filled(kPage, 'a')};
  d.synced(kPage);
  d.before_change(0, 10, file.reader());
  d.written(0, 10);
  d.metadata_changed();
  ASSERT_TRUE(d.unsynced());
  d.synced(5000);
  EXPECT_FALSE(d.unsynced());
  EXPECT_EQ(d.unsynced_bytes(), 0u);
  EXPECT_TRUE(d.saved_pages().empty());
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
  d.before_change(0, 3 * kPage, file.reader());
  file.bytes = filled(3 * kPage, 'n');
  d.written(0, 3 * kPage);
  d.range_synced(kPage, kPage, 3 * kPage, file.reader());
  EXPECT_EQ(d.saved_pages().size(), 2u);
  EXPECT_FALSE(d.saved_pages().contains(kPage));
  EXPECT_EQ(d.saved_pages().at(0), filled(kPage, 'o'));
  EXPECT_EQ(d.saved_pages().at(2 * kPage), filled(kPage, 'o'));
  EXPECT_EQ(d.unsynced_bytes(), 2 * kPage);
  EXPECT_EQ(d.synced_size(), 3 * kPage);
}

TEST(FileDurability, RangeSyncedPatchesPartlyCoveredPagesWithCurrentBytes) {
  FileDurability d;
  FakeFile file{filled(2 * kPage, 'o')};
  d.synced(2 * kPage);
  d.before_change(0, 2 * kPage, file.reader());
  file.bytes = filled(2 * kPage, 'n');
  d.written(0, 2 * kPage);
  // [kPage - 10, kPage + 20): the tail of page 0 and the head of page 1.
  d.range_synced(kPage - 10, 30, 2 * kPage, file.reader());
  std::string page0 = filled(kPage, 'o');
  page0.replace(kPage - 10, 10, filled(10, 'n'));
  std::string page1 = filled(kPage, 'o');
  page1.replace(0, 20, filled(20, 'n'));
  EXPECT_EQ(d.saved_pages().at(0), page0);
  EXPECT_EQ(d.saved_pages().at(kPage), page1);
  EXPECT_EQ(d.unsynced_bytes(), 2 * kPage - 30);
}

TEST(FileDurability, RangeSyncedTurnsASavedHoleIntoZerosAndTheRange) {
  FileDurability d;
  FakeFile file;
  file.holes = true;
  d.synced(kPage);
  d.before_change(0, kPage, file.reader());
  FakeFile now{filled(kPage, 'n')};
  d.range_synced(100, 10, kPage, now.reader());
  // The whole page: restoring only [0, 110) would leave the unsynced bytes after it.
  std::string expected(kPage, '\0');
  expected.replace(100, 10, filled(10, 'n'));
  EXPECT_EQ(d.saved_pages().at(0), expected);
}

TEST(FileDurability, RangeSyncedPatchesAPageClippedAtTheSyncedSize) {
  FileDurability d;
  FakeFile file{filled(kPage + 100, 'o')};
  d.synced(kPage + 100);
  d.before_change(kPage, 100, file.reader());  // saves 100 bytes of page 1
  file.bytes = filled(kPage + 500, 'n');
  d.range_synced(kPage + 400, 100, kPage + 500, file.reader());
  std::string expected = filled(100, 'o') + std::string(300, '\0') + filled(100, 'n');
  EXPECT_EQ(d.saved_pages().at(kPage), expected);
  EXPECT_EQ(d.synced_size(), kPage + 500);
}

TEST(FileDurability, RangeSyncedExtendsTheSyncedSize) {
  FileDurability d;
  FakeFile file{filled(8000, 'n')};
  d.written(0, 5000);
  d.range_synced(0, 5000, 5000, file.reader());
  EXPECT_EQ(d.synced_size(), 5000u);
  EXPECT_EQ(d.unsynced_bytes(), 0u);
  EXPECT_FALSE(d.unsynced());
  EXPECT_TRUE(file.reads.empty());  // nothing saved: nothing to patch
  // The durable size is the range's end, not the file's.
  d.range_synced(6000, 100, 8000, file.reader());
  EXPECT_EQ(d.synced_size(), 6100u);
}

TEST(FileDurability, RangeSyncedNeverShrinksTheSyncedSize) {
  FileDurability d;
  FakeFile file{filled(3 * kPage, 'n')};
  d.synced(3 * kPage);
  d.range_synced(0, 10, 3 * kPage, file.reader());
  EXPECT_EQ(d.synced_size(), 3 * kPage);
}

TEST(FileDurability, RangeSyncedKeepsOtherUnsyncedBytes) {
  FileDurability d;
  FakeFile file{filled(3 * kPage, 'n')};
  d.written(0, 100);
  d.written(200, 100);
  d.range_synced(200, 100, 300, file.reader());
  EXPECT_EQ(d.unsynced_bytes(), 100u);
  EXPECT_TRUE(d.unsynced());
}

}  // namespace
}  // namespace mimicfs
