// SPDX-License-Identifier: Apache-2.0
#include "engine/data/memory_data_store.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <cstddef>
#include <random>
#include <string_view>
#include <vector>

namespace mimicfs {
namespace {

constexpr uint64_t kPage = MemoryFileData::kPageSize;

std::vector<std::byte> bytes(size_t count, std::byte value) {
  return std::vector<std::byte>(count, value);
}

std::vector<std::byte> read(const FileData& file, uint64_t offset, size_t length) {
  std::vector<std::byte> out(length, std::byte{0xEE});  // poison: every byte must be filled
  file.read(offset, out);
  return out;
}

// A deterministic pattern that is never zero, so any byte out of place shows.
std::vector<std::byte> pattern(size_t count, uint8_t seed) {
  std::vector<std::byte> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = std::byte(static_cast<uint8_t>(1 + (seed + i) % 251));
  return out;
}

bool all_zero(const std::vector<std::byte>& data) {
  for (std::byte b : data) {
    if (b != std::byte{0}) return false;
  }
  return true;
}

// Every behaviour holds whichever way a page gets its memory.
class MemoryStore : public ::testing::TestWithParam<PageFill> {
 protected:
  void SetUp() override {
    if (GetParam() == PageFill::kCopy && best_page_fill() != PageFill::kCopy) {
      GTEST_SKIP() << "no userfaultfd for this process";
    }
  }
};

INSTANTIATE_TEST_SUITE_P(PageFill, MemoryStore, ::testing::Values(PageFill::kFault, PageFill::kCopy),
                         [](const ::testing::TestParamInfo<PageFill>& info) {
                           return info.param == PageFill::kCopy ? "Copy" : "Fault";
                         });

TEST_P(MemoryStore, CreatesEmptyFiles) {
  MemoryDataStore store(GetParam());
  EXPECT_EQ(store.page_fill(), GetParam());
  auto file = store.create_file();
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->stored_bytes(), 0u);
}

TEST_P(MemoryStore, NeverWrittenBytesReadAsZero) {
  MemoryFileData file(GetParam());
  EXPECT_TRUE(all_zero(read(file, 0, 3 * kPage)));
  EXPECT_TRUE(all_zero(read(file, (uint64_t{1} << 40) + 17, 100)));
  EXPECT_EQ(file.stored_bytes(), 0u);
}

TEST_P(MemoryStore, WritingZerosStoresNothing) {
  MemoryFileData file(GetParam());
  const auto zeros = bytes(64 << 20, std::byte{0});  // 64 MiB
  file.write(0, zeros);
  EXPECT_EQ(file.stored_bytes(), 0u);
  file.write(12345, std::span(zeros).first(10000));  // unaligned too
  EXPECT_EQ(file.stored_bytes(), 0u);
  EXPECT_TRUE(all_zero(read(file, 0, 2 * kPage)));
}

TEST_P(MemoryStore, WriteStoresOnlyTouchedPages) {
  MemoryFileData file(GetParam());
  file.write(5 * kPage + 100, pattern(10, 1));
  EXPECT_EQ(file.stored_bytes(), kPage);
  file.write(100 * kPage, pattern(kPage, 2));
  EXPECT_EQ(file.stored_bytes(), 2 * kPage);
}

TEST_P(MemoryStore, BytesAreInMemoryInPlaceOnlyWhereEveryPageIsStoredInOneSegment) {
  MemoryFileData file(GetParam());
  constexpr uint64_t kSegment = MemoryFileData::kSegmentSize;
  EXPECT_EQ(file.stored_in_memory(0, kPage), nullptr) << "no segment";
  const auto data = pattern(4 * kPage, 7);
  file.write(kSegment - 2 * kPage, data);  // two pages each side of a segment's end
  const std::byte* in_place = file.stored_in_memory(kSegment - 2 * kPage, 2 * kPage);
  ASSERT_NE(in_place, nullptr);
  EXPECT_TRUE(std::equal(in_place, in_place + 2 * kPage, data.begin()));
  in_place = file.stored_in_memory(kSegment + 100, kPage);  // unaligned, in the next segment
  ASSERT_NE(in_place, nullptr);
  EXPECT_EQ(*in_place, data[2 * kPage + 100]);
  EXPECT_EQ(file.stored_in_memory(kSegment - kPage, 2 * kPage), nullptr) << "two segments";
  EXPECT_EQ(file.stored_in_memory(kSegment - 3 * kPage, 2 * kPage), nullptr) << "a page not stored";
  EXPECT_EQ(file.stored_in_memory(kSegment - kPage, 0), nullptr);
  file.write(kSegment - kPage, bytes(kPage, std::byte{0}));  // the page goes
  EXPECT_EQ(file.stored_in_memory(kSegment - 2 * kPage, 2 * kPage), nullptr);
  EXPECT_NE(file.stored_in_memory(kSegment - 2 * kPage, kPage), nullptr);
}

TEST_P(MemoryStore, OnlyAWholeSegmentWithEveryPageStoredIsHandedOver) {
  MemoryFileData file(GetParam());
  constexpr uint64_t kSegment = MemoryFileData::kSegmentSize;
  EXPECT_EQ(file.hand_over_bytes(), kSegment);
  EXPECT_EQ(file.hand_over(0, kSegment), nullptr) << "no segment";
  const auto data = pattern(2 * kSegment, 9);
  file.write(0, data);
  file.write(kSegment + kPage, bytes(kPage, std::byte{0}));  // one page of the second goes
  const uint64_t stored = file.stored_bytes();
  EXPECT_EQ(file.hand_over(kSegment, kSegment), nullptr) << "a page not stored";
  EXPECT_EQ(file.hand_over(kPage, kSegment), nullptr) << "not at a segment's start";
  EXPECT_EQ(file.hand_over(0, kSegment - kPage), nullptr) << "part of a segment";
  EXPECT_EQ(file.stored_bytes(), stored);
  std::shared_ptr<std::byte[]> pages = file.hand_over(0, kSegment);
  ASSERT_NE(pages, nullptr);
  EXPECT_TRUE(std::equal(pages.get(), pages.get() + kSegment, data.begin()));
  EXPECT_EQ(file.stored_bytes(), stored - kSegment);
  EXPECT_TRUE(all_zero(read(file, 0, kSegment))) << "the range reads as zero";
  EXPECT_EQ(file.stored_in_memory(0, kPage), nullptr);
  // Written again, the range takes a slot of its own; the handed-over one is untouched.
  file.write(kPage, pattern(kPage, 3));
  EXPECT_EQ(read(file, kPage, kPage), pattern(kPage, 3));
  EXPECT_TRUE(std::equal(pages.get(), pages.get() + kSegment, data.begin()));
  pages.reset();
  EXPECT_EQ(read(file, kSegment + 2 * kPage, kPage),
            std::vector<std::byte>(data.begin() + kSegment + 2 * kPage,
                                   data.begin() + kSegment + 3 * kPage));
}

TEST_P(MemoryStore, WritingZerosOverAStoredPageFreesIt) {
  MemoryFileData file(GetParam());
  file.write(kPage, pattern(kPage, 3));
  ASSERT_EQ(file.stored_bytes(), kPage);
  file.write(kPage, bytes(kPage, std::byte{0}));
  EXPECT_EQ(file.stored_bytes(), 0u);
  EXPECT_TRUE(all_zero(read(file, kPage, kPage)));
}

TEST_P(MemoryStore, WritingZerosOverTheOnlyNonZeroBytesFreesThePage) {
  MemoryFileData file(GetParam());
  file.write(kPage + 10, pattern(5, 4));
  ASSERT_EQ(file.stored_bytes(), kPage);
  file.write(kPage + 8, bytes(9, std::byte{0}));  // partial page, but the page is now all zero
  EXPECT_EQ(file.stored_bytes(), 0u);
}

TEST_P(MemoryStore, PartialZeroWriteKeepsRestOfPage) {
  MemoryFileData file(GetParam());
  const auto data = pattern(kPage, 5);
  file.write(0, data);
  file.write(100, bytes(50, std::byte{0}));
  EXPECT_EQ(file.stored_bytes(), kPage);
  auto expected = data;
  std::fill(expected.begin() + 100, expected.begin() + 150, std::byte{0});
  EXPECT_EQ(read(file, 0, kPage), expected);
}

TEST_P(MemoryStore, UnalignedWriteSpanningPagesReadsBack) {
  MemoryFileData file(GetParam());
  const auto data = pattern(3 * kPage + 123, 6);
  const uint64_t offset = 2 * kPage - 77;
  file.write(offset, data);
  EXPECT_EQ(read(file, offset, data.size()), data);
  // Pages 1 (partial), 2, 3, 4 and 5 (partial).
  EXPECT_EQ(file.stored_bytes(), 5 * kPage);
  // The bytes around it are still zero.
  EXPECT_TRUE(all_zero(read(file, kPage, kPage - 77)));
  EXPECT_TRUE(all_zero(read(file, offset + data.size(), 1000)));
}

TEST_P(MemoryStore, OverwriteSpanningStoredAndMissingPages) {
  MemoryFileData file(GetParam());
  file.write(2 * kPage, pattern(kPage, 7));  // only page 2 stored
  const auto data = pattern(2 * kPage, 8);
  file.write(kPage + kPage / 2, data);  // half of 1, all of 2, half of 3
  EXPECT_EQ(read(file, kPage + kPage / 2, data.size()), data);
  EXPECT_EQ(file.stored_bytes(), 3 * kPage);
}

// A run of whole missing pages is filled in one go (PageFill::kCopy): it
// stops at a page already stored and at a page of zeros, and goes on after them.
TEST_P(MemoryStore, AWriteOverMissingStoredAndZeroPagesKeepsEach) {
  MemoryFileData file(GetParam());
  file.write(3 * kPage, pattern(kPage, 40));
  auto data = pattern(9 * kPage, 41);
  // File page 6 all zeros.
  std::fill(data.begin() + 6 * kPage - kPage / 2, data.begin() + 7 * kPage - kPage / 2, std::byte{0});
  file.write(kPage / 2, data);  // pages 0-9, the first and last in part
  EXPECT_EQ(file.stored_bytes(), 9 * kPage) << "all but the page of zeros";
  EXPECT_EQ(read(file, kPage / 2, 9 * kPage), data);
  EXPECT_TRUE(all_zero(read(file, 0, kPage / 2)));
  EXPECT_TRUE(all_zero(read(file, 9 * kPage + kPage / 2, kPage / 2)));
}

TEST_P(MemoryStore, ReadAcrossStoredAndMissingPages) {
  MemoryFileData file(GetParam());
  const auto data = pattern(100, 9);
  file.write(3 * kPage - 50, data);
  auto out = read(file, 2 * kPage, 3 * kPage);
  std::vector<std::byte> expected(3 * kPage, std::byte{0});
  std::copy(data.begin(), data.end(), expected.begin() + kPage - 50);
  EXPECT_EQ(out, expected);
}

TEST_P(MemoryStore, ZeroInsideOnePageKeepsTheRest) {
  MemoryFileData file(GetParam());
  const auto data = pattern(kPage, 10);
  file.write(kPage, data);
  file.zero(kPage + 100, 200);
  auto expected = data;
  std::fill(expected.begin() + 100, expected.begin() + 300, std::byte{0});
  EXPECT_EQ(read(file, kPage, kPage), expected);
  EXPECT_EQ(file.stored_bytes(), kPage);
}

TEST_P(MemoryStore, ZeroInsideOnePageFreesItWhenNothingElseRemains) {
  MemoryFileData file(GetParam());
  file.write(kPage + 100, pattern(200, 11));
  file.zero(kPage + 50, 300);
  EXPECT_EQ(file.stored_bytes(), 0u);
}

TEST_P(MemoryStore, ZeroWholePagesFreesThem) {
  MemoryFileData file(GetParam());
  file.write(0, pattern(4 * kPage, 12));
  ASSERT_EQ(file.stored_bytes(), 4 * kPage);
  file.zero(kPage, 2 * kPage);
  EXPECT_EQ(file.stored_bytes(), 2 * kPage);
  EXPECT_TRUE(all_zero(read(file, kPage, 2 * kPage)));
  EXPECT_EQ(read(file, 0, kPage), pattern(kPage, 12));
  const auto all = pattern(4 * kPage, 12);
  EXPECT_EQ(read(file, 3 * kPage, kPage), std::vector(all.begin() + 3 * kPage, all.end()));
}

TEST_P(MemoryStore, ZeroPartialPagesAtBothEdges) {
  MemoryFileData file(GetParam());
  const auto data = pattern(4 * kPage, 13);
  file.write(0, data);
  // Tail of page 0, all of pages 1 and 2, head of page 3.
  const uint64_t offset = kPage - 10;
  const uint64_t length = 2 * kPage + 30;
  file.zero(offset, length);
  auto expected = data;
  std::fill(expected.begin() + offset, expected.begin() + offset + length, std::byte{0});
  EXPECT_EQ(read(file, 0, 4 * kPage), expected);
  EXPECT_EQ(file.stored_bytes(), 2 * kPage);
}

TEST_P(MemoryStore, ZeroStartingAtPageBoundaryEndingMidPage) {
  MemoryFileData file(GetParam());
  const auto data = pattern(2 * kPage, 14);
  file.write(0, data);
  file.zero(kPage, 10);
  auto expected = data;
  std::fill(expected.begin() + kPage, expected.begin() + kPage + 10, std::byte{0});
  EXPECT_EQ(read(file, 0, 2 * kPage), expected);
  EXPECT_EQ(file.stored_bytes(), 2 * kPage);
}

TEST_P(MemoryStore, ZeroStartingMidPageEndingAtPageBoundary) {
  MemoryFileData file(GetParam());
  const auto data = pattern(2 * kPage, 15);
  file.write(0, data);
  file.zero(kPage - 10, 10);
  auto expected = data;
  std::fill(expected.begin() + kPage - 10, expected.begin() + kPage, std::byte{0});
  EXPECT_EQ(read(file, 0, 2 * kPage), expected);
}

TEST_P(MemoryStore, ZeroOfUnstoredRangeIsHarmless) {
  MemoryFileData file(GetParam());
  file.write(10 * kPage, pattern(kPage, 16));
  file.zero(0, 5 * kPage + 7);
  file.zero(20 * kPage + 3, 9);
  file.zero(7, 0);
  EXPECT_EQ(file.stored_bytes(), kPage);
  EXPECT_EQ(read(file, 10 * kPage, kPage), pattern(kPage, 16));
}

// The same change to the store and to a flat model of the file: a zero(),
// or a write of zeros or of a pattern.
void apply(MemoryFileData& file, std::vector<std::byte>& model, uint64_t offset, uint64_t length,
           bool zero_range, bool zero_data, int step) {
  if (zero_range) {
    file.zero(offset, length);
    std::fill(model.begin() + offset, model.begin() + offset + length, std::byte{0});
    return;
  }
  const auto data = zero_data ? bytes(length, std::byte{0}) : pattern(length, step % 200);
  file.write(offset, data);
  std::copy(data.begin(), data.end(), model.begin() + offset);
}

// The model's pages that hold a non-zero byte: what the store must keep.
uint64_t nonzero_pages(const std::vector<std::byte>& model) {
  uint64_t pages = 0;
  for (uint64_t page = 0; page < model.size() / kPage; ++page) {
    const auto first = model.begin() + page * kPage;
    if (!all_zero(std::vector<std::byte>(first, first + kPage))) ++pages;
  }
  return pages;
}

TEST_P(MemoryStore, RandomWritesAndZeroesMatchAFlatModel) {
  constexpr uint64_t kSize = 6 * kPage;
  std::mt19937_64 random(7);  // fixed seed: the same operations every run
  auto below = [&](uint64_t n) { return random() % n; };
  MemoryFileData file(GetParam());
  std::vector<std::byte> model(kSize, std::byte{0});
  for (int step = 0; step < 3000; ++step) {
    const uint64_t offset = below(kSize);
    const uint64_t length = 1 + below(std::min<uint64_t>(2 * kPage, kSize - offset));
    const bool zero_range = below(3) == 0;
    const bool zero_data = !zero_range && below(2) == 0;  // zeros half the time: pages come and go
    apply(file, model, offset, length, zero_range, zero_data, step);
    ASSERT_EQ(read(file, 0, kSize), model) << "step " << step;
    ASSERT_EQ(file.stored_bytes(), nonzero_pages(model) * kPage) << "step " << step;
  }
}

TEST_P(MemoryStore, RandomWritesAndZeroesAcrossSegmentsMatchAFlatModel) {
  constexpr uint64_t kSegment = MemoryFileData::kSegmentSize;
  constexpr uint64_t kSize = 3 * kSegment;
  std::mt19937_64 random(11);
  auto below = [&](uint64_t n) { return random() % n; };
  MemoryFileData file(GetParam());
  std::vector<std::byte> model(kSize, std::byte{0});
  for (int step = 0; step < 400; ++step) {
    // Near a segment boundary half the time, so writes and zeroes straddle it.
    const uint64_t boundary = (1 + below(2)) * kSegment;
    const uint64_t offset =
        below(2) == 0 ? boundary - std::min(boundary, below(3 * kPage)) : below(kSize);
    const uint64_t length = 1 + below(std::min<uint64_t>(kSegment + kPage, kSize - offset));
    const bool zero_range = below(3) == 0;
    const bool zero_data = !zero_range && below(2) == 0;  // zeros half the time: pages come and go
    apply(file, model, offset, length, zero_range, zero_data, step);
    ASSERT_EQ(read(file, 0, kSize), model) << "step " << step;
    ASSERT_EQ(file.stored_bytes(), nonzero_pages(model) * kPage) << "step " << step;
  }
}

// The process's resident memory, from /proc/self/statm.
uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

TEST_P(MemoryStore, ADeletedFileReturnsItsMemoryToTheSystem) {
  constexpr uint64_t kMiB = 1 << 20;
  const auto chunk = pattern(kMiB, 17);
  const uint64_t before = resident_bytes();
  auto file = std::make_unique<MemoryFileData>(GetParam());
  for (uint64_t i = 0; i < 64; ++i) file->write(i * kMiB, chunk);
  EXPECT_GE(resident_bytes(), before + 60 * kMiB);
  file.reset();
  EXPECT_LE(resident_bytes(), before + 4 * kMiB);
}

TEST_P(MemoryStore, HandedOverSegmentsGoBackToTheSystemWithTheirLastPointer) {
  constexpr uint64_t kSegment = MemoryFileData::kSegmentSize;
  // One segment's bytes, written 32 times: a 64 MiB buffer freed would stay
  // resident under AddressSanitizer (its quarantine) and blur the count.
  const auto chunk = pattern(kSegment, 5);
  std::vector<std::shared_ptr<std::byte[]>> handed;
  handed.reserve(32);
  const uint64_t before = resident_bytes();
  auto file = std::make_unique<MemoryFileData>(GetParam());
  for (uint64_t i = 0; i < 32; ++i) file->write(i * kSegment, chunk);
  for (uint64_t i = 0; i < 32; ++i) handed.push_back(file->hand_over(i * kSegment, kSegment));
  EXPECT_EQ(file->stored_bytes(), 0u);
  file.reset();
  EXPECT_GE(resident_bytes(), before + 30 * kSegment) << "the file's going keeps them";
  handed.clear();
  EXPECT_LE(resident_bytes(), before + 4 * kSegment);
}

// Large writes give their pages memory in one call (populated, or filled by
// UFFDIO_COPY): never the pages of zeros.
TEST_P(MemoryStore, ZerosInALargeWriteTakeNoMemory) {
  constexpr uint64_t kMiB = 1 << 20;
  auto chunk = pattern(kMiB, 19);
  std::fill(chunk.begin() + 64 * kPage, chunk.begin() + 192 * kPage, std::byte{0});
  MemoryFileData file(GetParam());
  const uint64_t before = resident_bytes();
  for (uint64_t i = 0; i < 64; ++i) file.write(i * kMiB, chunk);
  EXPECT_EQ(file.stored_bytes(), 64 * 128 * kPage);
  EXPECT_LE(resident_bytes(), before + 34 * kMiB) << "half of each MiB is zeros";
  EXPECT_EQ(read(file, 5 * kMiB, kMiB), chunk);
}

// The process's mappings, from /proc/self/maps.
size_t mapping_count() {
  std::ifstream maps("/proc/self/maps");
  size_t lines = 0;
  for (std::string line; std::getline(maps, line);) ++lines;
  return lines;
}

// Many small files share a few regions of address space: a mapping each would
// meet vm.max_map_count (65530) long before memory ran out.
TEST_P(MemoryStore, ManySmallFilesTakeFewMappings) {
  const size_t before = mapping_count();
  std::vector<std::unique_ptr<MemoryFileData>> files;
  for (int i = 0; i < 3000; ++i) {
    files.push_back(std::make_unique<MemoryFileData>(GetParam()));
    files.back()->write(0, pattern(100, static_cast<uint8_t>(i)));
  }
  EXPECT_LE(mapping_count(), before + 10);
  EXPECT_EQ(read(*files[1234], 0, 100), pattern(100, static_cast<uint8_t>(1234)));
  files.clear();
  EXPECT_LE(mapping_count(), before + 2) << "emptied regions are unmapped but one";
}

TEST_P(MemoryStore, ZeroedPagesReturnTheirMemoryToTheSystem) {
  constexpr uint64_t kMiB = 1 << 20;
  const auto chunk = pattern(kMiB, 18);
  MemoryFileData file(GetParam());
  const uint64_t before = resident_bytes();
  for (uint64_t i = 0; i < 64; ++i) file.write(i * kMiB + kPage, chunk);  // not segment-aligned
  EXPECT_GE(resident_bytes(), before + 60 * kMiB);
  file.zero(kPage + 100, 64 * kMiB - 200);  // all but 100 bytes at each end
  EXPECT_EQ(file.stored_bytes(), 2 * kPage);
  EXPECT_LE(resident_bytes(), before + 4 * kMiB);
}

}  // namespace
}  // namespace mimicfs

namespace mimicfs {
namespace {

// A userfaultfd belongs to the process that opened it: after a fork the child
// must not fill its pages through the parent's (they would land in the
// parent's memory, and the child would read zeros).
TEST(MemoryStoreFork, AChildOfForkStoresItsOwnPages) {
  if (best_page_fill() != PageFill::kCopy) GTEST_SKIP() << "no userfaultfd for this process";
  MemoryFileData before(PageFill::kCopy);
  before.write(0, pattern(3 * kPage, 50));  // the parent has a region and the userfaultfd
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    MemoryFileData file(PageFill::kCopy);
    file.write(kPage / 2, pattern(5 * kPage, 51));
    before.write(8 * kPage, pattern(kPage, 52));
    // More segments than one region has slots: the child maps regions of its own.
    std::vector<std::unique_ptr<MemoryFileData>> many;
    for (int i = 0; i < 1100; ++i) {
      many.push_back(std::make_unique<MemoryFileData>(PageFill::kCopy));
      many.back()->write(0, pattern(100, static_cast<uint8_t>(i)));
    }
    const bool ok = read(file, kPage / 2, 5 * kPage) == pattern(5 * kPage, 51) &&
                    read(before, 0, 3 * kPage) == pattern(3 * kPage, 50) &&
                    read(before, 8 * kPage, kPage) == pattern(kPage, 52) &&
                    read(*many[1099], 0, 100) == pattern(100, static_cast<uint8_t>(1099));
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child read back other bytes";
  EXPECT_EQ(read(before, 0, 3 * kPage), pattern(3 * kPage, 50));
  MemoryFileData after(PageFill::kCopy);
  after.write(0, pattern(2 * kPage, 53));
  EXPECT_EQ(read(after, 0, 2 * kPage), pattern(2 * kPage, 53));
}

// PageFill::kCopy registers the regions with the userfaultfd for missing
// pages: /proc/self/smaps shows the mapping's VmFlags "um". (A store that fell
// back to faulting pages in would pass every other test.)
TEST(MemoryStoreFork, CopyFillRegistersItsRegions) {
  if (best_page_fill() != PageFill::kCopy) GTEST_SKIP() << "no userfaultfd for this process";
  MemoryFileData file(PageFill::kCopy);
  file.write(0, pattern(kPage, 54));
  std::ifstream smaps("/proc/self/smaps");
  int registered = 0;
  for (std::string line; std::getline(smaps, line);) {
    if (line.starts_with("VmFlags:") && (line + " ").find(" um ") != std::string::npos) ++registered;
  }
  EXPECT_GE(registered, 1);
}

}  // namespace
}  // namespace mimicfs
