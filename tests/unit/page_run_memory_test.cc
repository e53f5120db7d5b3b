// SPDX-License-Identifier: Apache-2.0
#include "engine/data/page_run_memory.h"

#include "engine/data/memory_data_store.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

namespace mimicfs {
namespace {

constexpr uint64_t kPage = SegmentSlots::kPage;
constexpr uint64_t kRun = PageRunMemory::kRunBytes;

std::vector<std::byte> filled(uint64_t bytes, char c) {
  return std::vector<std::byte>(bytes, static_cast<std::byte>(c));
}

// How many of [start, start+bytes)'s pages are in memory.
uint64_t resident_pages(const std::byte* start, uint64_t bytes) {
  std::vector<unsigned char> in(bytes / kPage);
  if (mincore(const_cast<std::byte*>(start), bytes, in.data()) != 0) {
    throw std::runtime_error("mincore failed");
  }
  uint64_t resident = 0;
  for (unsigned char page : in) resident += page & 1;
  return resident;
}

// The memory is shared by the whole process: every test starts from no kept run.
class PageRunMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override { memory.trim(); }
  PageRunMemory& memory = PageRunMemory::instance();
};

TEST_F(PageRunMemoryTest, ARunHoldsItsContentsAndIsCountedUntilItsLastPointerGoes) {
  const uint64_t before = memory.held_bytes();
  const auto contents = filled(3 * kPage, 'a');
  std::shared_ptr<std::byte[]> run = memory.hold(contents);
  EXPECT_EQ(std::memcmp(run.get(), contents.data(), contents.size()), 0);
  EXPECT_EQ(memory.held_bytes(), before + 3 * kPage);
  std::shared_ptr<std::byte> page(run, run.get() + kPage);  // as FileDurability keeps a page
  run.reset();
  EXPECT_EQ(memory.held_bytes(), before + 3 * kPage);
  page.reset();
  EXPECT_EQ(memory.held_bytes(), before);
  EXPECT_EQ(memory.kept_bytes(), 3 * kPage) << "kept with the pages it was held for";
}

// As FileDurability saves a run of a file in memory: from the file's own pages,
// which under UFFDIO_COPY are pages of a slot registered with the userfaultfd.
TEST_F(PageRunMemoryTest, ARunIsFilledStraightFromAFilesStoredPages) {
  for (PageFill fill : {PageFill::kFault, best_page_fill()}) {
    MemoryFileData file(fill);
    std::vector<std::byte> contents(kRun);
    for (uint64_t i = 0; i < kRun; ++i) contents[i] = std::byte(static_cast<uint8_t>(1 + i % 251));
    file.write(kRun, contents);
    const std::byte* in_place = file.stored_in_memory(kRun, kRun);
    ASSERT_NE(in_place, nullptr);
    memory.trim();  // an empty run: the pages are made holding the bytes
    auto run = memory.hold(std::span(in_place, kRun));
    EXPECT_EQ(std::memcmp(run.get(), contents.data(), kRun), 0);
    run.reset();
    ASSERT_EQ(memory.kept_bytes(), kRun);
    run = memory.hold(std::span(in_place + kPage, 2 * kPage));  // the kept run: a plain copy
    EXPECT_EQ(std::memcmp(run.get(), contents.data() + kPage, 2 * kPage), 0);
    auto whole = memory.hold(std::span(in_place, kRun));  // an empty run
    EXPECT_EQ(std::memcmp(whole.get(), contents.data(), kRun), 0);
    run.reset();
    memory.trim();  // a run kept with two pages, filled again whole from the file
    run = memory.hold(std::span(in_place, 2 * kPage));
    run.reset();
    ASSERT_EQ(memory.kept_bytes(), 2 * kPage);
    run = memory.hold(std::span(in_place + kPage, kRun - kPage));
    EXPECT_EQ(std::memcmp(run.get(), contents.data() + kPage, kRun - kPage), 0);
  }
}

TEST_F(PageRunMemoryTest, AWholeRunIsKeptForTheNextAndTrimGivesItsPagesBack) {
  std::byte* address = nullptr;
  {
    auto run = memory.hold(filled(kRun, 'k'));
    address = run.get();
    EXPECT_EQ(resident_pages(address, kRun), kRun / kPage);
  }
  EXPECT_EQ(memory.kept_bytes(), kRun);
  EXPECT_EQ(resident_pages(address, kRun), kRun / kPage) << "kept with its pages";
  std::byte* part_address = nullptr;
  {
    // The next run takes the kept one, the one after an empty one.
    auto whole = memory.hold(filled(kRun, 'w'));
    EXPECT_EQ(whole.get(), address);
    EXPECT_EQ(memory.kept_bytes(), 0u);
    EXPECT_EQ(static_cast<char>(whole[kRun - 1]), 'w');
    auto part = memory.hold(filled(kPage, 'p'));
    part_address = part.get();
    EXPECT_NE(part_address, address);
    EXPECT_EQ(static_cast<char>(part[0]), 'p');
  }
  // Both kept: the whole run with all its pages, the part with its one.
  EXPECT_EQ(memory.kept_bytes(), kRun + kPage);
  EXPECT_EQ(resident_pages(address, kRun), kRun / kPage);
  EXPECT_EQ(resident_pages(part_address, kRun), 1u);
  memory.trim();
  EXPECT_EQ(memory.kept_bytes(), 0u);
  EXPECT_EQ(resident_pages(address, kRun), 0u);
  EXPECT_EQ(resident_pages(part_address, kRun), 0u);
}

// Every commit of a database frees the run its last rewrite saved: the run
// is kept with its pages, and the next save takes it (no system call).
TEST_F(PageRunMemoryTest, ARunKeptWithSomePagesServesPartsAndIsFilledOnWhenLarger) {
  std::byte* address = nullptr;
  {
    auto run = memory.hold(filled(2 * kPage, 'a'));
    address = run.get();
  }
  ASSERT_EQ(memory.kept_bytes(), 2 * kPage);
  const uint64_t held_before = memory.held_bytes();
  {
    // A smaller part, then as large: the same run, its pages kept as they were
    // (counted held meanwhile, all of them).
    auto smaller = memory.hold(filled(kPage, 'b'));
    EXPECT_EQ(smaller.get(), address);
    EXPECT_EQ(static_cast<char>(smaller[kPage - 1]), 'b');
    EXPECT_EQ(memory.held_bytes(), held_before + 2 * kPage);
    EXPECT_EQ(memory.kept_bytes(), 0u);
  }
  EXPECT_EQ(memory.held_bytes(), held_before);
  EXPECT_EQ(memory.kept_bytes(), 2 * kPage) << "the pages there, not those last held";
  {
    auto same = memory.hold(filled(2 * kPage, 'c'));
    EXPECT_EQ(same.get(), address);
  }
  EXPECT_EQ(resident_pages(address, kRun), 2u);
  // Larger: the pages there are copied over, the missing ones filled.
  for (const uint64_t bytes : {5 * kPage, kRun}) {
    {
      auto larger = memory.hold(bytes, [](std::span<std::byte> run) {
        for (uint64_t i = 0; i < run.size(); ++i) run[i] = std::byte(static_cast<uint8_t>(i / kPage));
      });
      EXPECT_EQ(larger.get(), address);
      for (uint64_t page = 0; page < bytes / kPage; ++page) {
        EXPECT_EQ(static_cast<uint8_t>(larger[page * kPage]), page);
        EXPECT_EQ(static_cast<uint8_t>(larger[page * kPage + kPage - 1]), page);
      }
    }
    EXPECT_EQ(memory.kept_bytes(), bytes);
    EXPECT_EQ(resident_pages(address, kRun), bytes / kPage);
  }
  // When no kept run has pages enough, the one with most is taken.
  auto whole = memory.hold(filled(kRun, 'w'));
  EXPECT_EQ(whole.get(), address);
  auto two = memory.hold(filled(2 * kPage, 't'));
  auto four = memory.hold(filled(4 * kPage, 'f'));
  std::byte* const four_address = four.get();
  two.reset();
  four.reset();
  auto five = memory.hold(filled(5 * kPage, '5'));
  EXPECT_EQ(five.get(), four_address);
  EXPECT_EQ(static_cast<char>(five[5 * kPage - 1]), '5');
}

TEST_F(PageRunMemoryTest, TrimEmptiesKeptRunsBesideHeldOnes) {
  // Two slots' worth: the first slot keeps a held run, so it stays mapped.
  std::vector<std::shared_ptr<std::byte[]>> runs;
  for (int i = 0; i < 64; ++i) {
    runs.push_back(memory.hold(filled(kRun, static_cast<char>('a' + i % 26))));
  }
  std::byte* const kept = runs[1].get();
  std::shared_ptr<std::byte[]> stays = runs[0];
  runs.clear();
  EXPECT_EQ(memory.kept_bytes(), 63 * kRun);
  memory.trim();
  EXPECT_EQ(memory.kept_bytes(), 0u);
  EXPECT_EQ(resident_pages(kept, kRun), 0u) << "an emptied run beside a held one";
  EXPECT_EQ(static_cast<char>(stays[kRun - 1]), 'a');
  // An emptied run is filled again.
  auto again = memory.hold(filled(kRun, 'z'));
  EXPECT_EQ(static_cast<char>(again[0]), 'z');
  EXPECT_EQ(static_cast<char>(again[kRun - 1]), 'z');
}

TEST_F(PageRunMemoryTest, TrimOfSomeBytesEmptiesWholeSlotsKeptRunsUntilThatMuch) {
  constexpr uint64_t kSlotRuns = SegmentSlots::kSlot / kRun;
  std::vector<std::shared_ptr<std::byte[]>> runs;
  for (uint64_t i = 0; i < 4 * kSlotRuns; ++i) runs.push_back(memory.hold(filled(kRun, 'k')));
  runs.clear();
  uint64_t kept = memory.kept_bytes();
  ASSERT_EQ(kept, 4 * kSlotRuns * kRun);
  for (const uint64_t asked : {kRun, (kSlotRuns + 1) * kRun}) {
    memory.trim(asked);
    EXPECT_GE(kept - memory.kept_bytes(), asked);
    EXPECT_LT(kept - memory.kept_bytes(), asked + kSlotRuns * kRun) << "one slot more at most";
    kept = memory.kept_bytes();
  }
  EXPECT_GT(kept, 0u);
  memory.trim(0);
  EXPECT_EQ(memory.kept_bytes(), kept);
  memory.trim();
  EXPECT_EQ(memory.kept_bytes(), 0u);
}

TEST_F(PageRunMemoryTest, AFillThatThrowsGivesTheRunBack) {
  const uint64_t before = memory.held_bytes();
  auto failing = [](std::span<std::byte>) { throw std::runtime_error("read"); };
  EXPECT_THROW(memory.hold(kRun, failing), std::runtime_error);
  EXPECT_EQ(memory.held_bytes(), before);
  // An empty run the fill never reached is not kept: its pages are missing,
  // and a plain copy into them would raise SIGBUS where a userfaultfd fills.
  EXPECT_EQ(memory.kept_bytes(), 0u);
  EXPECT_EQ(static_cast<char>(memory.hold(filled(kRun, 'f'))[kRun - 1]), 'f');
  // A kept run keeps its pages whatever the fill did to them.
  EXPECT_EQ(memory.kept_bytes(), kRun);
  EXPECT_THROW(memory.hold(kRun, failing), std::runtime_error);
  EXPECT_EQ(memory.kept_bytes(), kRun);
  // A run kept with some pages, whose larger fill fails, keeps those only.
  memory.trim();
  memory.hold(filled(kPage, 'o')).reset();
  EXPECT_THROW(memory.hold(4 * kPage, failing), std::runtime_error);
  EXPECT_EQ(memory.kept_bytes(), kPage);
  EXPECT_EQ(static_cast<char>(memory.hold(filled(4 * kPage, 'g'))[4 * kPage - 1]), 'g');
  EXPECT_THROW(memory.hold(filled(kRun + kPage, 'x')), std::bad_alloc) << "more than a run";
  EXPECT_THROW(memory.hold(filled(kPage / 2, 'x')), std::bad_alloc) << "not whole pages";
  EXPECT_EQ(memory.held_bytes(), before);
}

// Saves and frees go on while trim() empties the kept runs without its lock:
// no run is handed out twice or emptied while held.
TEST_F(PageRunMemoryTest, TrimBesideSavesAndFreesLosesNothing) {
  const uint64_t before = memory.held_bytes();
  std::atomic<bool> done{false};
  std::thread trimmer([&] {
    while (!done.load()) memory.trim();
  });
  auto saver = [&](char first) {
    std::vector<std::shared_ptr<std::byte[]>> held;
    for (int i = 0; i < 3000; ++i) {
      const char c = static_cast<char>(first + i % 8);
      held.push_back(memory.hold(i % 3 == 0 ? kPage : kRun, [c](std::span<std::byte> run) {
        std::memset(run.data(), c, run.size());
      }));
      if (held.size() > 8) held.erase(held.begin());
      for (const auto& run : held) {
        const char expected = static_cast<char>(run[0]);
        ASSERT_GE(expected, first);
        ASSERT_LT(expected, first + 8);
        ASSERT_EQ(static_cast<char>(run[kPage - 1]), expected);
      }
    }
  };
  std::thread a(saver, 'a');
  std::thread b(saver, 'A');
  a.join();
  b.join();
  done = true;
  trimmer.join();
  EXPECT_EQ(memory.held_bytes(), before);
}

}  // namespace
}  // namespace mimicfs
