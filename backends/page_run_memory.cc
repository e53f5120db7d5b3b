#include "backends/page_run_memory.h"

#include <sys/mman.h>

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
  // An empty run is filled straight from `contents`, without the stack copy
  // hold(bytes, fill) needs.
  return hold_run(contents.size(), [&](const Run& run) {
    if (run.kept || !slots_.copies()) {
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
  // A whole run takes a kept one (no system call to fill it); a part of one
  // takes an empty one, as it would empty a kept one when it goes. The lowest
  // slot first, so that runs pack and emptied slots go.
  if (!with_kept_.empty() && (bytes == kRunBytes || with_empty_.empty())) {
    std::byte* const base = *with_kept_.begin();
    Slot& slot = slots_in_use_.at(base);
    const int run = std::countr_zero(slot.kept);
    slot.kept &= ~bit(run);
    slot.taken |= bit(run);
    --kept_runs_;
    if (slot.kept == 0) with_kept_.erase(with_kept_.begin());
    held_ += bytes;
    return {base + run * kRunBytes, true};
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
  return {base + run * kRunBytes, false};
}

void PageRunMemory::copy_in(const Run& run, const std::byte* contents, uint64_t bytes) {
  // The slots have their userfaultfd (if any) once one was taken. A part
  // copied is emptied with the run (hold's catch).
  if (slots_.copy_into(run.memory, contents, bytes) != bytes) throw std::bad_alloc();
}

std::shared_ptr<std::byte[]> PageRunMemory::own(std::byte* run, uint64_t bytes) {
  // If the control block cannot be made, the deleter runs.
  return std::shared_ptr<std::byte[]>(run, [this, bytes](std::byte* held) {
    // A run written in part would not do for the next (a plain copy fills a
    // run only where every page is there).
    give_back(held, bytes, bytes == kRunBytes);
  });
}

std::byte* PageRunMemory::slot_of(std::byte* run) const {
  return run - (reinterpret_cast<uintptr_t>(run) % SegmentSlots::kSlot);
}

void PageRunMemory::give_back(std::byte* run, uint64_t bytes, bool keep) {
  // Emptied at once, all of it (it may have been a kept one): missing again,
  // as a kCopy run must be for UFFDIO_COPY. Cannot fail on whole pages of a
  // mapping of ours.
  if (!keep) madvise(run, kRunBytes, MADV_DONTNEED);
  std::byte* const base = slot_of(run);
  const uint32_t mask = bit((run - base) / kRunBytes);
  std::lock_guard lock(mutex_);
  held_ -= bytes;
  Slot& slot = slots_in_use_.at(base);
  slot.taken &= ~mask;
  // Called from a deleter: nothing may throw. A slot a set cannot take (no
  // memory for its node) is left out of it: consistent, its runs unused.
  if (keep) {
    try {
      with_kept_.insert(base);
      slot.kept |= mask;
      ++kept_runs_;
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
      bytes += std::popcount(slots_in_use_.at(*it).kept) * kRunBytes;
    }
    emptying.reserve(slots);  // may throw: nothing changed yet
    for (size_t i = 0; i < slots; ++i) {
      std::byte* const base = *with_kept_.begin();
      Slot& slot = slots_in_use_.at(base);
      emptying.emplace_back(base, slot.kept);
      kept_runs_ -= std::popcount(slot.kept);
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

uint64_t PageRunMemory::held_bytes() const {
  std::lock_guard lock(mutex_);
  return held_;
}

uint64_t PageRunMemory::kept_bytes() const {
  std::lock_guard lock(mutex_);
  return kept_runs_ * kRunBytes;
}

}  // namespace mimicfs
