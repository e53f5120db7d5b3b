// SPDX-License-Identifier: Apache-2.0
// MemoryDataStore: file contents in RAM, in 4 KiB pages of anonymous memory.
//
// A file is cut into 2 MiB segments; a segment holding any data is a 2 MiB slot
// of private anonymous memory (segment_slots.h), and the kernel gives it a
// page only where one is written. A page that is entirely zero is never kept:
// zeros written over a missing page are skipped, and a stored page that becomes all zero is handed
// back (MADV_DONTNEED), so a 100 GiB zero-filled file costs almost nothing. A
// segment with no page left is given back, and so is every segment of a file
// that goes: deleted files return their memory to the system at once, where
// pages taken from malloc would stay in its arenas (and growing those arenas a
// page at a time cost more than the copy itself). Each segment in use also
// takes a page-table page (4 KiB) and no mapping of its own.
//
// A page's first write gives it memory one of two ways (PageFill,
// segment_slots.h): UFFDIO_COPY allocates the pages of a run holding the data
// in one call, where the process can have a userfaultfd; else the copy faults
// them in. In the first mode a missing page must never be touched: every read
// of a page not stored is served without touching it, as it is in both modes.
#pragma once

#include <bitset>
#include <map>

#include "engine/data/data_store.h"
#include "engine/data/segment_slots.h"

namespace mimicfs {

class MemoryFileData final : public FileData {
 public:
  static constexpr uint64_t kPageSize = 4096;
  static constexpr uint64_t kPagesPerSegment = 512;
  static constexpr uint64_t kSegmentSize = kPageSize * kPagesPerSegment;
  static_assert(kSegmentSize == SegmentSlots::kSlot && kPageSize == SegmentSlots::kPage);

  // kCopy where best_page_fill() is kFault gives kFault.
  explicit MemoryFileData(PageFill fill = best_page_fill());
  MemoryFileData(const MemoryFileData&) = delete;
  MemoryFileData& operator=(const MemoryFileData&) = delete;

  void write(uint64_t offset, std::span<const std::byte> data) override;
  void read(uint64_t offset, std::span<std::byte> out) const override;
  // Within one segment, every page stored.
  const std::byte* stored_in_memory(uint64_t offset, uint64_t length) const override;
  // A whole segment with every page stored: its slot, given back with the last pointer.
  std::shared_ptr<std::byte[]> hand_over(uint64_t offset, uint64_t length) override;
  uint64_t hand_over_bytes() const override { return kSegmentSize; }
  void zero(uint64_t offset, uint64_t length) override;
  uint64_t stored_bytes() const override { return stored_pages_ * kPageSize; }
  PageFill page_fill() const { return fill_; }

 private:
  // One segment's slot, given back when destroyed. Pages not in `stored` are
  // zero and take no memory (never touched, or handed back).
  class Segment {
   public:
    explicit Segment(SegmentSlots& slots);  // throws std::bad_alloc when the mapping cannot be made
    ~Segment();
    Segment(Segment&& other) noexcept;
    Segment& operator=(Segment&&) = delete;
    Segment(const Segment&) = delete;

    std::byte* page(uint64_t index) const { return base_ + index * kPageSize; }
    // Gives pages [first, first+count) memory now, in one call.
    void populate(uint64_t first, uint64_t count);
    // kCopy: gives the missing pages [first, first+count) memory holding
    // `source`'s bytes and marks them stored. Returns how many it filled: all
    // of them, or fewer when memory runs out.
    uint64_t fill(uint64_t first, uint64_t count, const std::byte* source);
    // Hands pages [first, first+count) back to the kernel: they read as zero.
    void discard(uint64_t first, uint64_t count);

    std::bitset<kPagesPerSegment> stored;

   private:
    SegmentSlots* slots_;
    std::byte* base_;
  };

  // A large write into pages not stored yet populates them first.
  static constexpr uint64_t kPopulateMinPages = 16;
  void populate_for(Segment& segment, uint64_t offset, std::span<const std::byte> data);
  // Writes `data` at `offset` inside `segment` (offset + size <= kSegmentSize).
  void write_in(Segment& segment, uint64_t offset, std::span<const std::byte> data);
  // kCopy: stores `chunk` at `in_page` of the missing page `index`, and the
  // whole missing non-zero pages that follow it in `rest` in the same call.
  // Returns the bytes of `rest` it took. Throws std::bad_alloc when memory runs out.
  uint64_t fill_missing(Segment& segment, uint64_t index, uint64_t in_page,
                        std::span<const std::byte> chunk, std::span<const std::byte> rest);
  // Zeroes [offset, offset+length) inside `segment`.
  void zero_in(Segment& segment, uint64_t offset, uint64_t length);

  PageFill fill_;
  SegmentSlots& slots_;
  std::map<uint64_t, Segment> segments_;  // segment index -> pages; never one with none stored
  uint64_t stored_pages_ = 0;
};

class MemoryDataStore final : public DataStore {
 public:
  // kCopy where best_page_fill() is kFault gives kFault.
  explicit MemoryDataStore(PageFill fill = best_page_fill())
      : fill_(fill == PageFill::kCopy ? best_page_fill() : fill) {}
  std::unique_ptr<FileData> create_file() override { return std::make_unique<MemoryFileData>(fill_); }
  PageFill page_fill() const { return fill_; }

 private:
  PageFill fill_;
};

}  // namespace mimicfs
