// SPDX-License-Identifier: Apache-2.0
// PageRunMemory: memory for runs of up to 16 pages that are written whole,
// then read and patched in place, and freed whole: the synced pages
// FileDurability saves before a rewrite changes them.
//
// A run is a 64 KiB piece of a SegmentSlots slot (32 per slot). A freed run
// keeps its pages (kept_bytes()): the pages it was held for, and those it
// kept from before, always its first ones, so the next run taken from it is
// written with a plain copy as far as they go. trim() empties the kept runs
// (the daemon's trimmer does when it gives idle heap memory back,
// fusefs/heap_trimmer.h; FileDurability some, when it saves memory of the
// store's instead) and gives back the slots left without a run. Emptying a
// run at each free cost two madvise(MADV_DONTNEED) calls (the run's, then its
// slot's), each a TLB shootdown interrupting the other CPU: under pgbench,
// whose every commit frees a run of two pages, 14% of the daemon's samples.
// The missing pages of a run are filled in one call: with UFFDIO_COPY where
// the slots have a userfaultfd (the pages are allocated holding the bytes: no
// fault per page, and no zeroing unless the kernel zeroes every page,
// init_on_alloc=1), else by a copy that faults them in (the kernel zeroes each
// first). From the heap, a rewrite of synced data after the daemon had given
// its idle memory back spent 40% of the daemon's samples in the kernel zeroing
// fresh pages and 15% in page faults.
// Thread-safe.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>

#include "engine/base/thread_annotations.h"
#include "engine/data/segment_slots.h"

namespace mimicfs {

class PageRunMemory {
 public:
  static constexpr uint64_t kRunBytes = 64 << 10;

  static PageRunMemory& instance();

  // A run of `bytes` (whole pages, at most kRunBytes) whose contents `fill`
  // writes (it is given a span of `bytes` and must set all of them), given
  // back when the last pointer to it goes. Throws std::bad_alloc when memory
  // runs out, and what `fill` throws.
  template <typename Fill>
  std::shared_ptr<std::byte[]> hold(uint64_t bytes, Fill&& fill) EXCLUDES(mutex_) {
    return hold_run(bytes, [&](const Run& run) {
      if (run.pages * SegmentSlots::kPage >= bytes || !slots_.copies()) {
        fill(std::span(run.memory, bytes));
      } else {
        alignas(64) std::array<std::byte, kRunBytes> contents;
        fill(std::span(contents.data(), bytes));
        copy_in(run, contents.data(), bytes);
      }
    });
  }
  // A run holding `contents` (as above), copied from there in one pass: the
  // run's missing pages are filled by UFFDIO_COPY from `contents` itself, so
  // they must be readable without a fault the slots' userfaultfd would have to
  // serve (not a missing page of a SegmentSlots slot).
  std::shared_ptr<std::byte[]> hold(std::span<const std::byte> contents) EXCLUDES(mutex_);

  // Empties the kept runs (without holding the lock meanwhile), or those of
  // whole slots until at least `at_least` bytes, and gives back the slots
  // left without a run.
  void trim(uint64_t at_least = UINT64_MAX) EXCLUDES(mutex_);
  // Bytes of the runs held now: the pages they were held for, and those more
  // a kept run taken for fewer brought with it.
  uint64_t held_bytes() const EXCLUDES(mutex_);
  // Bytes of the pages kept in the runs given back.
  uint64_t kept_bytes() const EXCLUDES(mutex_);

 private:
  static constexpr uint64_t kRunsPerSlot = SegmentSlots::kSlot / kRunBytes;
  static_assert(kRunsPerSlot <= 32);
  static constexpr uint64_t kRunPages = kRunBytes / SegmentSlots::kPage;
  struct Run {
    std::byte* memory;
    // Its first `pages` pages are there (a plain copy fills them); the rest
    // are missing (under a userfaultfd only UFFDIO_COPY may fill them: a
    // plain copy would raise SIGBUS).
    uint64_t pages;
    // Bytes counted held for it: those it is taken for, or its pages there if
    // more (all of them pages there once it is filled).
    uint64_t counted;
  };
  struct Slot {
    uint32_t taken = 0;  // a bit per run held
    uint32_t kept = 0;   // a bit per run given back with pages there
    std::array<uint8_t, kRunsPerSlot> pages{};  // a kept run's pages there, as Run::pages
  };

  explicit PageRunMemory(SegmentSlots& slots) : slots_(slots) {}
  // A run of `bytes` that `write` (given the Run) fills, given back if it throws.
  template <typename Write>
  std::shared_ptr<std::byte[]> hold_run(uint64_t bytes, Write&& write) EXCLUDES(mutex_) {
    const Run run = take(bytes);
    try {
      write(run);
    } catch (...) {
      // Kept with the pages it had before (those a copy_in made before it
      // failed are there but counted missing: UFFDIO_COPY finds them there
      // and copies plainly).
      give_back(run.memory, run.counted, run.pages);
      throw;
    }
    return own(run.memory, run.counted);
  }
  // A free run for `bytes`, counted held with its pages there if more: a kept
  // one if any (of the lowest slot with one, the first with pages enough,
  // else the one with most), else an empty one.
  Run take(uint64_t bytes) EXCLUDES(mutex_);
  // Copies `contents` into the run: plainly over the pages there, by
  // UFFDIO_COPY into the missing ones; throws std::bad_alloc when memory runs
  // out.
  void copy_in(const Run& run, const std::byte* contents, uint64_t bytes) EXCLUDES(mutex_);
  // The pointer that gives the filled run back, counted held for `counted`
  // bytes, all of them pages there.
  std::shared_ptr<std::byte[]> own(std::byte* run, uint64_t counted) EXCLUDES(mutex_);
  // The run, counted held for `counted` bytes, is free again, with its first
  // `pages` pages there: kept with them, or emptied if none.
  void give_back(std::byte* run, uint64_t counted, uint64_t pages) EXCLUDES(mutex_);
  std::byte* slot_of(std::byte* run) const;
  // The pages there in the slot's kept runs.
  static uint64_t kept_pages_of(const Slot& slot);
  // A run of `slot` (at `base`) was emptied: the slot goes back to the slots
  // if none of its runs is taken or kept, else into with_empty_. Never throws.
  void run_emptied(std::byte* base, const Slot& slot) REQUIRES(mutex_);

  SegmentSlots& slots_;
  mutable std::mutex mutex_;
  std::map<std::byte*, Slot> slots_in_use_ GUARDED_BY(mutex_);
  std::set<std::byte*> with_kept_ GUARDED_BY(mutex_);   // slots with a run kept
  std::set<std::byte*> with_empty_ GUARDED_BY(mutex_);  // slots with an empty run
  uint64_t held_ GUARDED_BY(mutex_) = 0;
  uint64_t kept_pages_ GUARDED_BY(mutex_) = 0;
};

}  // namespace mimicfs
