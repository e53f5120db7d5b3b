// SPDX-License-Identifier: Apache-2.0
#include "engine/data/segment_slots.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

namespace mimicfs {
namespace {

constexpr uint64_t kSlot = SegmentSlots::kSlot;

// The slots are shared by the whole process (other tests' data stores hold
// some): each test gives back what it took.
SegmentSlots& slots() { return SegmentSlots::instance(PageFill::kFault); }

bool mapped(const std::byte* address) {
  unsigned char resident = 0;
  return mincore(const_cast<std::byte*>(address), SegmentSlots::kPage, &resident) == 0 ||
         errno != ENOMEM;
}

bool all_zero(const std::byte* slot) {
  return std::all_of(slot, slot + kSlot, [](std::byte b) { return b == std::byte{0}; });
}

TEST(SegmentSlots, ASlotGivenBackIsTheNextTakenAndEmpty) {
  std::byte* first = slots().take();
  std::byte* second = slots().take();
  ASSERT_NE(first, second);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % kSlot, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(second) % kSlot, 0u);
  std::memset(first, 0xab, kSlot);
  slots().give_back(first);
  // The lowest free slot: `first` was, when it was taken.
  std::byte* again = slots().take();
  EXPECT_EQ(again, first);
  EXPECT_TRUE(all_zero(again));
  slots().give_back(again);
  slots().give_back(second);
}

TEST(SegmentSlots, ARegionWithNoSlotTakenIsUnmappedUnlessItIsTheLast) {
  // One slot more than a region holds: the slots span two regions at least.
  std::vector<std::byte*> taken;
  for (uint64_t i = 0; i <= SegmentSlots::kSlotsPerRegion; ++i) taken.push_back(slots().take());
  EXPECT_EQ(std::set<std::byte*>(taken.begin(), taken.end()).size(), taken.size());
  for (std::byte* slot : taken) slots().give_back(slot);
  // A region all of whose slots came back went, except the last left:
  // whatever else holds slots, one of the regions these slots spanned is gone.
  const auto gone = std::count_if(taken.begin(), taken.end(),
                                  [](const std::byte* slot) { return !mapped(slot); });
  EXPECT_GE(gone, 1);
  // Taken again, a slot is mapped and holds zeros.
  std::byte* slot = slots().take();
  EXPECT_TRUE(mapped(slot));
  EXPECT_TRUE(all_zero(slot));
  slots().give_back(slot);
}

}  // namespace
}  // namespace mimicfs
