// SPDX-License-Identifier: Apache-2.0
// SegmentSlots: address space for memory filled in runs of whole pages:
// MemoryDataStore's segments (its files' contents) and PageRunMemory's runs
// (the synced pages FileDurability saves).
//
// 2 MiB slots carved from 1 GiB private anonymous regions, so that the process
// has one mapping per region rather than one per slot (vm.max_map_count caps
// mappings at 65530: as many small files), and each slot is 2 MiB-aligned (one
// page-table page). A slot given back is emptied (MADV_DONTNEED: its memory
// goes back at once) and reused, the lowest first; a region whose slots are
// all free is unmapped, page tables and all, unless it is the last. Which
// slots are taken is a bitmap per region, not a tree node per free slot: such
// nodes, freed and allocated again between a workload's other allocations,
// each kept a page of malloc's heap resident after every file was deleted
// (1.3 MiB of 2 MiB retained). Thread-safe: several inodes take slots at once.
//
// A page's first write gives it memory one of two ways (PageFill). A copy into
// a missing page faults it in, and the kernel zeroes the page before the copy
// fills it. With a userfaultfd, the slots are registered for missing pages and
// UFFDIO_COPY allocates the pages of a run and copies the data into them in one
// call, without zeroing (unless the kernel zeroes every page it allocates,
// init_on_alloc=1): a run written into new pages takes one pass over memory
// instead of two. In that mode a missing page must never be touched (a touch
// raises SIGBUS, or fails a system call with EFAULT). A child of fork() fills
// its pages by faulting them in: the userfaultfd it inherits works on the
// parent's memory. One set of slots per PageFill: with kCopy every region is
// registered with the process's userfaultfd.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace mimicfs {

// How a page gets its memory at its first write (see above).
enum class PageFill {
  kFault,  // the copy faults it in: the kernel zeroes it first
  kCopy,   // UFFDIO_COPY: allocated holding the data
};

// kCopy where the process can have a userfaultfd (Linux 5.11 or later for
// UFFD_USER_MODE_ONLY, which needs no privilege; a seccomp filter, as a
// container's default one, may refuse it), else kFault. Decided once.
PageFill best_page_fill();

class SegmentSlots {
 public:
  static constexpr uint64_t kPage = 4096;
  static constexpr uint64_t kSlot = uint64_t{2} << 20;
  static constexpr uint64_t kRegion = uint64_t{1} << 30;
  static constexpr uint64_t kSlotsPerRegion = kRegion / kSlot;

  static SegmentSlots& instance(PageFill fill);

  // A userfaultfd for this process's memory (it belongs to the process that
  // opens it: one opened before a fork would register the parent's), or -1
  // where the kernel or a seccomp filter refuses one, or it lacks UFFDIO_COPY.
  // Never read: a touch of a missing page raises SIGBUS rather than waiting for
  // a reader. UFFD_USER_MODE_ONLY needs no privilege (Linux 5.11).
  static int open_page_filler();

  // Whether pages are filled by UFFDIO_COPY: PageFill::kCopy, once its
  // userfaultfd is open (with the first region) and not forgotten in a child.
  bool copies() const { return uffd_.load(std::memory_order_relaxed) >= 0; }

  // Gives the missing pages at [target, target+length) memory holding
  // source's bytes. Only while copies(). Returns the bytes done: all, or fewer
  // when memory runs out.
  uint64_t copy_into(std::byte* target, const std::byte* source, uint64_t length);

  // A slot of zero pages; throws std::bad_alloc when no region can be mapped.
  std::byte* take();
  // Empties the slot and makes it free.
  void give_back(std::byte* slot);

 private:
  explicit SegmentSlots(PageFill fill);
  // Registers [start, start+length) for missing-page faults: the ioctls the
  // range then takes (a bit per _UFFDIO_*), 0 when refused.
  static uint64_t register_missing(int uffd, std::byte* start, uint64_t length);
  // In a child of fork() (see above).
  static void forget_page_filler();
  // The slots of a region that are taken, a bit each (slot i: bit i % 64 of
  // word i / 64), and how many.
  struct Region {
    std::array<uint64_t, kSlotsPerRegion / 64> taken{};
    uint64_t count = 0;
  };
  static_assert(kSlotsPerRegion % 64 == 0);
  // Maps a new region (std::bad_alloc when refused) and returns it.
  std::map<std::byte*, Region>::iterator add_region();

  static inline SegmentSlots* copying_ = nullptr;
  static constexpr int kNotOpened = -2;
  const PageFill fill_;
  // kCopy: opened with the first region, so in the process that serves (after
  // mount's fork); -1 if refused then, or in a child of fork(). Set under
  // mutex_, or by the only thread of a new child.
  std::atomic<int> uffd_{kNotOpened};
  std::mutex mutex_;
  std::map<std::byte*, Region> regions_;  // by start address; guarded by mutex_
};

}  // namespace mimicfs
