// MemoryDataStore: file contents in RAM, in 4 KiB pages of anonymous memory.
//
// A file is cut into 2 MiB segments; a segment holding any data is a 2 MiB slot
// of private anonymous memory (SegmentSlots, in the .cc), and the kernel gives
// it a page only where one is written. A page that is entirely zero is never kept: zeros written over a
// missing page are skipped, and a stored page that becomes all zero is handed
// back (MADV_DONTNEED), so a 100 GiB zero-filled file costs almost nothing. A
// segment with no page left is given back, and so is every segment of a file
// that goes: deleted files return their memory to the system at once, where
// pages taken from malloc would stay in its arenas (and growing those arenas a
// page at a time cost more than the copy itself). Each segment in use also
// takes a page-table page (4 KiB) and no mapping of its own.
#pragma once

#include <bitset>
#include <map>

#include "backends/data_store.h"

namespace mimicfs {

class MemoryFileData final : public FileData {
 public:
  static constexpr uint64_t kPageSize = 4096;
  static constexpr uint64_t kPagesPerSegment = 512;
  static constexpr uint64_t kSegmentSize = kPageSize * kPagesPerSegment;

  MemoryFileData() = default;
  MemoryFileData(const MemoryFileData&) = delete;
  MemoryFileData& operator=(const MemoryFileData&) = delete;

  void write(uint64_t offset, std::span<const std::byte> data) override;
  void read(uint64_t offset, std::span<std::byte> out) const override;
  void zero(uint64_t offset, uint64_t length) override;
  uint64_t stored_bytes() const override { return stored_pages_ * kPageSize; }

 private:
  // One segment's slot, given back when destroyed. Pages not in `stored` are
  // zero and take no memory (never touched, or handed back).
  class Segment {
   public:
    Segment();  // throws std::bad_alloc when the mapping cannot be made
    ~Segment();
    Segment(Segment&& other) noexcept;
    Segment& operator=(Segment&&) = delete;
    Segment(const Segment&) = delete;

    std::byte* page(uint64_t index) const { return base_ + index * kPageSize; }
    // Gives pages [first, first+count) memory now, in one call.
    void populate(uint64_t first, uint64_t count);
    // Hands pages [first, first+count) back to the kernel: they read as zero.
    void discard(uint64_t first, uint64_t count);

    std::bitset<kPagesPerSegment> stored;

   private:
    std::byte* base_;
  };

  // A large write into pages not stored yet populates them first.
  static constexpr uint64_t kPopulateMinPages = 16;
  void populate_for(Segment& segment, uint64_t offset, std::span<const std::byte> data);
  // Writes `data` at `offset` inside `segment` (offset + size <= kSegmentSize).
  void write_in(Segment& segment, uint64_t offset, std::span<const std::byte> data);
  // Zeroes [offset, offset+length) inside `segment`.
  void zero_in(Segment& segment, uint64_t offset, uint64_t length);

  std::map<uint64_t, Segment> segments_;  // segment index -> pages; never one with none stored
  uint64_t stored_pages_ = 0;
};

class MemoryDataStore final : public DataStore {
 public:
  std::unique_ptr<FileData> create_file() override { return std::make_unique<MemoryFileData>(); }
};

}  // namespace mimicfs
