// SPDX-License-Identifier: Apache-2.0
#include "engine/data/memory_data_store.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <new>

#include "engine/data/zero_bytes.h"

// Linux 5.14; Debian 12's headers may lack it.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace mimicfs {

MemoryFileData::MemoryFileData(PageFill fill)
    : fill_(fill == PageFill::kCopy ? best_page_fill() : fill),
      slots_(SegmentSlots::instance(fill_)) {}

MemoryFileData::Segment::Segment(SegmentSlots& slots) : slots_(&slots), base_(slots.take()) {}

MemoryFileData::Segment::~Segment() {
  if (base_ != nullptr) slots_->give_back(base_);
}

MemoryFileData::Segment::Segment(Segment&& other) noexcept
    : stored(other.stored), slots_(other.slots_), base_(other.base_) {
  other.base_ = nullptr;
}

uint64_t MemoryFileData::Segment::fill(uint64_t first, uint64_t count, const std::byte* source) {
  const uint64_t filled = slots_->copy_into(page(first), source, count * kPageSize) / kPageSize;
  for (uint64_t i = first; i < first + filled; ++i) stored.set(i);
  return filled;
}

void MemoryFileData::Segment::populate(uint64_t first, uint64_t count) {
  // One call where the copy would take a page fault per page (the kernel still
  // zeroes each page). Refused before Linux 5.14: the faults do it then.
  madvise(page(first), count * kPageSize, MADV_POPULATE_WRITE);
}

void MemoryFileData::populate_for(Segment& segment, uint64_t offset,
                                  std::span<const std::byte> data) {
  const uint64_t first = (offset + kPageSize - 1) / kPageSize;
  const uint64_t end = (offset + data.size()) / kPageSize;
  if (slots_.copies() || end < first + kPopulateMinPages) return;
  // Runs of whole pages not stored yet that the write fills with data: a page
  // of zeros is never kept (write_in), so it is not populated either.
  auto wanted = [&](uint64_t page) {
    return !segment.stored.test(page) &&
           !all_zero(data.data() + (page * kPageSize - offset), kPageSize);
  };
  for (uint64_t page = first; page < end;) {
    if (!wanted(page)) {
      ++page;
      continue;
    }
    uint64_t run_end = page + 1;
    while (run_end < end && wanted(run_end)) ++run_end;
    if (run_end - page >= kPopulateMinPages) segment.populate(page, run_end - page);
    page = run_end;
  }
}

void MemoryFileData::Segment::discard(uint64_t first, uint64_t count) {
  if (count == 0) return;
  // Cannot fail on a private anonymous mapping of ours with whole pages.
  madvise(page(first), count * kPageSize, MADV_DONTNEED);
  for (uint64_t i = first; i < first + count; ++i) stored.reset(i);
}

void MemoryFileData::write_in(Segment& segment, uint64_t offset, std::span<const std::byte> data) {
  populate_for(segment, offset, data);
  uint64_t done = 0;
  uint64_t discard_first = 0;  // a run of pages that became all zero, handed back at once
  uint64_t discard_count = 0;
  auto flush_discards = [&] {
    segment.discard(discard_first, discard_count);
    discard_count = 0;
  };
  while (done < data.size()) {
    const uint64_t position = offset + done;
    const uint64_t index = position / kPageSize;
    const uint64_t in_page = position % kPageSize;
    const uint64_t chunk = std::min<uint64_t>(kPageSize - in_page, data.size() - done);
    const std::byte* source = data.data() + done;
    done += chunk;
    // Non-zero data is told at its first word; only zeros cost a scan.
    const bool zeros = all_zero(source, chunk);
    if (!segment.stored.test(index)) {
      if (zeros) continue;  // zeros over a page that reads as zero: nothing to keep
      if (slots_.copies()) {
        try {
          done += fill_missing(segment, index, in_page, {source, chunk}, data.subspan(done));
        } catch (const std::bad_alloc&) {
          flush_discards();  // the pages counted out go, as counted
          throw;
        }
        continue;
      }
      std::memcpy(segment.page(index) + in_page, source, chunk);
      segment.stored.set(index);
      ++stored_pages_;
      continue;
    }
    std::memcpy(segment.page(index) + in_page, source, chunk);
    if (zeros && all_zero(segment.page(index), kPageSize)) {
      if (discard_count > 0 && discard_first + discard_count != index) flush_discards();
      if (discard_count == 0) discard_first = index;
      ++discard_count;
      --stored_pages_;
    }
  }
  flush_discards();
}

uint64_t MemoryFileData::fill_missing(Segment& segment, uint64_t index, uint64_t in_page,
                                      std::span<const std::byte> chunk,
                                      std::span<const std::byte> rest) {
  if (chunk.size() < kPageSize) {
    // Part of a page: the rest of it reads as zero.
    alignas(64) std::byte page[kPageSize] = {};
    std::memcpy(page + in_page, chunk.data(), chunk.size());
    if (segment.fill(index, 1, page) == 0) throw std::bad_alloc();
    ++stored_pages_;
    return 0;
  }
  // A whole page, and the whole missing non-zero pages right after it.
  uint64_t more = 0;
  while ((more + 1) * kPageSize <= rest.size() && !segment.stored.test(index + 1 + more) &&
         !all_zero(rest.data() + more * kPageSize, kPageSize)) {
    ++more;
  }
  const uint64_t filled = segment.fill(index, 1 + more, chunk.data());
  stored_pages_ += filled;
  if (filled < 1 + more) throw std::bad_alloc();
  return more * kPageSize;
}

void MemoryFileData::write(uint64_t offset, std::span<const std::byte> data) {
  uint64_t done = 0;
  while (done < data.size()) {
    const uint64_t position = offset + done;
    const uint64_t index = position / kSegmentSize;
    const uint64_t in_segment = position % kSegmentSize;
    const uint64_t chunk = std::min<uint64_t>(kSegmentSize - in_segment, data.size() - done);
    const auto part = data.subspan(done, chunk);
    done += chunk;
    auto it = segments_.find(index);
    if (it == segments_.end()) {
      if (all_zero(part.data(), part.size())) continue;
      it = segments_.emplace(index, Segment(slots_)).first;
    }
    try {
      write_in(it->second, in_segment, part);
    } catch (const std::bad_alloc&) {
      if (it->second.stored.none()) segments_.erase(it);
      throw;
    }
    if (it->second.stored.none()) segments_.erase(it);
  }
}

const std::byte* MemoryFileData::stored_in_memory(uint64_t offset, uint64_t length) const {
  const uint64_t in_segment = offset % kSegmentSize;
  if (length == 0 || length > kSegmentSize - in_segment) return nullptr;
  const auto it = segments_.find(offset / kSegmentSize);
  if (it == segments_.end()) return nullptr;
  const Segment& segment = it->second;
  for (uint64_t page = in_segment / kPageSize; page * kPageSize < in_segment + length; ++page) {
    if (!segment.stored.test(page)) return nullptr;
  }
  return segment.page(0) + in_segment;
}

std::shared_ptr<std::byte[]> MemoryFileData::hand_over(uint64_t offset, uint64_t length) {
  if (offset % kSegmentSize != 0 || length != kSegmentSize) return nullptr;
  const auto it = segments_.find(offset / kSegmentSize);
  if (it == segments_.end() || !it->second.stored.all()) return nullptr;
  auto segment = std::make_shared<Segment>(std::move(it->second));
  segments_.erase(it);
  stored_pages_ -= kPagesPerSegment;
  std::byte* const pages = segment->page(0);
  return std::shared_ptr<std::byte[]>(std::move(segment), pages);
}

void MemoryFileData::read(uint64_t offset, std::span<std::byte> out) const {
  uint64_t done = 0;
  auto it = segments_.lower_bound(offset / kSegmentSize);
  while (done < out.size()) {
    const uint64_t position = offset + done;
    const uint64_t index = position / kSegmentSize;
    const uint64_t in_segment = position % kSegmentSize;
    const uint64_t chunk = std::min<uint64_t>(kSegmentSize - in_segment, out.size() - done);
    std::byte* target = out.data() + done;
    done += chunk;
    while (it != segments_.end() && it->first < index) ++it;
    if (it == segments_.end() || it->first != index) {
      std::memset(target, 0, chunk);
      continue;
    }
    // Stored pages are copied, the others filled with zeros without touching them
    // (a read fault would map the zero page into the segment for nothing).
    const Segment& segment = it->second;
    uint64_t at = in_segment;
    const uint64_t end = in_segment + chunk;
    while (at < end) {
      const uint64_t page = at / kPageSize;
      const bool stored = segment.stored.test(page);
      uint64_t run_end = std::min(end, (page + 1) * kPageSize);
      while (run_end < end && segment.stored.test(run_end / kPageSize) == stored) {
        run_end = std::min(end, run_end + kPageSize);
      }
      if (stored) {
        std::memcpy(target + (at - in_segment), segment.page(0) + at, run_end - at);
      } else {
        std::memset(target + (at - in_segment), 0, run_end - at);
      }
      at = run_end;
    }
  }
}

void MemoryFileData::zero_in(Segment& segment, uint64_t offset, uint64_t length) {
  const uint64_t end = offset + length;
  uint64_t at = offset;
  while (at < end) {
    const uint64_t page = at / kPageSize;
    const uint64_t page_end = std::min(end, (page + 1) * kPageSize);
    if (at % kPageSize == 0 && page_end - at == kPageSize) {
      // Whole pages: the stored ones of the run are handed back in one call.
      uint64_t last = page;
      while ((last + 2) * kPageSize <= end) ++last;
      uint64_t dropped = 0;
      for (uint64_t p = page; p <= last; ++p) dropped += segment.stored.test(p);
      if (dropped > 0) segment.discard(page, last - page + 1);
      stored_pages_ -= dropped;
      at = (last + 1) * kPageSize;
      continue;
    }
    if (segment.stored.test(page)) {
      std::memset(segment.page(0) + at, 0, page_end - at);
      if (all_zero(segment.page(page), kPageSize)) {
        segment.discard(page, 1);
        --stored_pages_;
      }
    }
    at = page_end;
  }
}

void MemoryFileData::zero(uint64_t offset, uint64_t length) {
  if (length == 0) return;
  const uint64_t end = offset + length;
  auto it = segments_.lower_bound(offset / kSegmentSize);
  while (it != segments_.end() && it->first * kSegmentSize < end) {
    const uint64_t start = it->first * kSegmentSize;
    const uint64_t from = std::max(offset, start);
    const uint64_t to = std::min(end, start + kSegmentSize);
    if (from == start && to == start + kSegmentSize) {
      stored_pages_ -= it->second.stored.count();
      it = segments_.erase(it);
      continue;
    }
    zero_in(it->second, from - start, to - from);
    it = it->second.stored.none() ? segments_.erase(it) : std::next(it);
  }
}

}  // namespace mimicfs
