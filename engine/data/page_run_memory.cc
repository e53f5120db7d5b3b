// SPDX-License-Identifier: Apache-2.0
#include "engine/data/page_run_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>
#include <new>
#include <utility>
#include <vector>

namespace mimicfs {

namespace {

constexpr uint32_t kAllRuns = 0xffffffffu;

constexpr uint32_t bit(uint64_t run) { return uint32_t{1} << run; }

}  // namespace

PageRunMemory& PageRunMemory::instance() {
  // Never destroyed (nor are the slots): a saved page may outlive static
  // destruction's order.
  static PageRunMemory* const memory = new PageRunMemory(SegmentSlots::instance(best_page_fill()));
  return *memory;
}

std::shared_ptr<std::byte[]> PageRunMemory::hold(std::span<const std::byte> contents) {
  // Missing pages are filled straight from `contents`, without the stack copy
  // hold(bytes, fill) needs.
  return hold_run(contents.size(), [&](const Run& run) {
    if (run.pages * SegmentSlots::kPage >= contents.size() || !slots_.copies()) {
      std::memcpy(run.memory, contents.data(), contents.size());
    } else {
      copy_in(run, contents.data(), contents.size());
    }
  });
}

PageRunMemory::Run PageRunMemory::take(uint64_t bytes) {
  if (bytes == 0 || bytes > kRunBytes || bytes % SegmentSlots::kPage != 0) throw std::bad_alloc();
  constexpr uint32_t kSlotFull = kRunsPerSlot == 32 ? kAllRuns : bit(kRunsPerSlot) - 1;
  std::lock_guard lock(mutex_);
  // A kept run first (its pages there take a plain copy, and no system call
  // empties it when it goes), from the lowest slot with one, so that runs
  // pack and emptied slots go: the slot's first run with pages enough, else
  // its run with most (another slot's may have more: not looked for).
  if (!with_kept_.empty()) {
    std::byte* const base = *with_kept_.begin();
    Slot& slot = slots_in_use_.at(base);
    int run = std::countr_zero(slot.kept);
    for (uint32_t left = slot.kept; left != 0; left &= left - 1) {
      const int candidate = std::countr_zero(left);
      if (slot.pages[candidate] * SegmentSlots::kPage >= bytes) {
        run = candidate;
        break;
      }
      if (slot.pages[candidate] > slot.pages[run]) run = candidate;
    }
    const uint64_t pages = slot.pages[run];
    slot.pages[run] = 0;
    slot.kept &= ~bit(run);
    slot.taken |= bit(run);
    kept_pages_ -= pages;
    if (slot.kept == 0) with_kept_.erase(with_kept_.begin());
    const uint64_t counted = std::max(bytes, pages * SegmentSlots::kPage);
    held_ += counted;
    return {base + run * kRunBytes, pages, counted};
  }
  if (with_empty_.empty()) {
    std::byte* const base = slots_.take();
    try {
      slots_in_use_.emplace(base, Slot{});
      with_empty_.insert(base);
    } catch (...) {
      slots_in_use_.erase(base);
      slots_.give_back(base);
      throw;
    }
  }
  std::byte* const base = *with_empty_.begin();
  Slot& slot = slots_in_use_.at(base);
  const int run = std::countr_one(slot.taken | slot.kept);
  slot.taken |= bit(run);
  if ((slot.taken | slot.kept) == kSlotFull) with_empty_.erase(with_empty_.begin());
  held_ += bytes;
  return {base + run * kRunBytes, 0, bytes};
}

void PageRunMemory::copy_in(const Run& run, const std::byte* contents, uint64_t bytes) {
  // The slots have their userfaultfd (if any) once one was taken.
  const uint64_t there = std::min(run.pages * SegmentSlots::kPage, bytes);
  std::memcpy(run.memory, contents, there);
  if (slots_.copy_into(run.memory + there, contents + there, bytes - there) != bytes - there) {
    throw std::bad_alloc();
  }
}

std::shared_ptr<std::byte[]> PageRunMemory::own(std::byte* run, uint64_t counted) {
  // If the control block cannot be made, the deleter runs.
  return std::shared_ptr<std::byte[]>(run, [this, counted](std::byte* held) {
    give_back(held, counted, counted / SegmentSlots::kPage);
  });
}

std::byte* PageRunMemory::slot_of(std::byte* run) const {
  return run - (reinterpret_cast<uintptr_t>(run) % SegmentSlots::kSlot);
}

void PageRunMemory::give_back(std::byte* run, uint64_t counted, uint64_t pages) {
  // A run without a page counted there is emptied at once, all of it (a
  // failed fill may have made some): missing again, as a run must be where
  // it is counted so.
  if (pages == 0) madvise(run, kRunBytes, MADV_DONTNEED);
  std::byte* const base = slot_of(run);
  const int index = static_cast<int>((run - base) / kRunBytes);
  std::lock_guard lock(mutex_);
  held_ -= counted;
  Slot& slot = slots_in_use_.at(base);
  slot.taken &= ~bit(index);
  // Called from a deleter: nothing may throw. A slot a set cannot take (no
  // memory for its node) is left out of it: consistent, its runs unused.
  if (pages > 0) {
    try {
      with_kept_.insert(base);
      slot.kept |= bit(index);
      slot.pages[index] = static_cast<uint8_t>(pages);
      kept_pages_ += pages;
      return;
    } catch (const std::bad_alloc&) {
      madvise(run, kRunBytes, MADV_DONTNEED);
    }
  }
  run_emptied(base, slot);
}

void PageRunMemory::run_emptied(std::byte* base, const Slot& slot) {
  if (slot.taken == 0 && slot.kept == 0) {
    with_empty_.erase(base);
    slots_in_use_.erase(base);
    slots_.give_back(base);
    return;
  }
  try {
    with_empty_.insert(base);
  } catch (const std::bad_alloc&) {  // consistent: its runs unused
  }
}

void PageRunMemory::trim(uint64_t at_least) {
  // The kept runs are taken out under the lock, emptied without it (saves and
  // frees go on meanwhile: a few thousand runs take tens of milliseconds), and
  // given back as empty runs after.
  std::vector<std::pair<std::byte*, uint32_t>> emptying;
  {
    std::lock_guard lock(mutex_);
    // The kept runs of whole slots, in address order, until at_least bytes.
    size_t slots = 0;
    uint64_t bytes = 0;
    for (auto it = with_kept_.begin(); it != with_kept_.end() && bytes < at_least; ++it, ++slots) {
      bytes += kept_pages_of(slots_in_use_.at(*it)) * SegmentSlots::kPage;
    }
    emptying.reserve(slots);  // may throw: nothing changed yet
    for (size_t i = 0; i < slots; ++i) {
      std::byte* const base = *with_kept_.begin();
      Slot& slot = slots_in_use_.at(base);
      emptying.emplace_back(base, slot.kept);
      kept_pages_ -= kept_pages_of(slot);
      slot.pages.fill(0);
      slot.taken |= slot.kept;  // nobody takes them, and the slot stays
      slot.kept = 0;
      with_kept_.erase(with_kept_.begin());
    }
  }
  for (const auto& [base, runs] : emptying) {
    // Each stretch of runs in one call.
    for (uint32_t left = runs; left != 0;) {
      const int first = std::countr_zero(left);
      const int count = std::countr_one(left >> first);
      madvise(base + first * kRunBytes, count * kRunBytes, MADV_DONTNEED);
      left &= first + count >= 32 ? 0 : ~((bit(count) - 1) << first);
    }
  }
  std::lock_guard lock(mutex_);
  for (const auto& [base, runs] : emptying) {
    Slot& slot = slots_in_use_.at(base);
    slot.taken &= ~runs;
    run_emptied(base, slot);
  }
}

uint64_t PageRunMemory::kept_pages_of(const Slot& slot) {
  uint64_t pages = 0;
  for (uint32_t left = slot.kept; left != 0; left &= left - 1) pages += slot.pages[std::countr_zero(left)];
  return pages;
}

uint64_t PageRunMemory::held_bytes() const {
  std::lock_guard lock(mutex_);
  return held_;
}

uint64_t PageRunMemory::kept_bytes() const {
  std::lock_guard lock(mutex_);
  return kept_pages_ * SegmentSlots::kPage;
}

}  // namespace mimicfs
