#include "backends/memory_data_store.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <set>

#include "backends/zero_bytes.h"

// Linux 5.14; Debian 12's headers may lack it.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace mimicfs {

// The address space segments live in: 2 MiB slots carved from 1 GiB private
// anonymous regions, so that the process has one mapping per region rather
// than one per segment (vm.max_map_count caps mappings at 65530: as many
// small files), and each slot is 2 MiB-aligned (one page-table page). A slot
// given back is emptied (MADV_DONTNEED: its memory goes back at once) and
// reused, the lowest first; a region whose slots are all free is unmapped,
// page tables and all. Thread-safe: files of several inodes take slots at once.
// One set of slots per PageFill: with kCopy every region is registered with the
// process's userfaultfd for missing pages.
class SegmentSlots {
 public:
  static constexpr uint64_t kSlot = MemoryFileData::kSegmentSize;
  static constexpr uint64_t kRegion = uint64_t{1} << 30;
  static constexpr uint64_t kSlotsPerRegion = kRegion / kSlot;

  static SegmentSlots& instance(PageFill fill) {
    static SegmentSlots faulting(PageFill::kFault);
    static SegmentSlots copying(PageFill::kCopy);
    return fill == PageFill::kCopy ? copying : faulting;
  }

  // A userfaultfd for this process's memory (it belongs to the process that
  // opens it: one opened before a fork would register the parent's), or -1
  // where the kernel or a seccomp filter refuses one, or it lacks UFFDIO_COPY.
  // Never read: a touch of a missing page raises SIGBUS rather than waiting for
  // a reader. UFFD_USER_MODE_ONLY needs no privilege (Linux 5.11).
  static int open_page_filler() {
    const int uffd =
        static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
    if (uffd < 0) return -1;
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = UFFD_FEATURE_SIGBUS;
    bool usable = ioctl(uffd, UFFDIO_API, &api) == 0;
    // The range ioctls are told at registration: register a probe.
    void* probe = usable ? mmap(nullptr, kSlot, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                         : MAP_FAILED;
    usable = probe != MAP_FAILED;
    if (usable) {
      constexpr uint64_t kCopyIoctl = uint64_t{1} << _UFFDIO_COPY;
      usable = (register_missing(uffd, static_cast<std::byte*>(probe), kSlot) & kCopyIoctl) != 0;
      munmap(probe, kSlot);
    }
    if (!usable) {
      close(uffd);
      return -1;
    }
    return uffd;
  }

  // Registers [start, start+length) for missing-page faults: the ioctls the
  // range then takes (a bit per _UFFDIO_*), 0 when refused.
  static uint64_t register_missing(int uffd, std::byte* start, uint64_t length) {
    uffdio_register range{};
    range.range.start = reinterpret_cast<uintptr_t>(start);
    range.range.len = length;
    range.mode = UFFDIO_REGISTER_MODE_MISSING;
    return ioctl(uffd, UFFDIO_REGISTER, &range) == 0 ? range.ioctls : 0;
  }

  // Whether pages are filled by UFFDIO_COPY: PageFill::kCopy, once its
  // userfaultfd is open (with the first region) and not forgotten in a child.
  bool copies() const { return uffd_.load(std::memory_order_relaxed) >= 0; }

  // Gives the missing pages at [target, target+length) memory holding
  // source's bytes. Only while copies(). Returns the bytes done: all, or fewer
  // when memory runs out.
  uint64_t copy_into(std::byte* target, const std::byte* source, uint64_t length) {
    const int uffd = uffd_.load(std::memory_order_relaxed);  // set before the slot was taken
    uint64_t done = 0;
    while (done < length) {
      uffdio_copy copy{};
      copy.dst = reinterpret_cast<uintptr_t>(target + done);
      copy.src = reinterpret_cast<uintptr_t>(source + done);
      copy.len = length - done;
      const int result = ioctl(uffd, UFFDIO_COPY, &copy);
      if (copy.copy > 0) done += static_cast<uint64_t>(copy.copy);
      if (result == 0) continue;
      // EAGAIN: a partial copy, or the mappings were changing: go on.
      if (errno == EAGAIN || errno == EINTR) continue;
      // A page already there can take a plain copy (none should be: the
      // store fills each page once, and nothing else touches a missing one).
      if (errno == EEXIST) {
        std::memcpy(target + done, source + done, MemoryFileData::kPageSize);
        done += MemoryFileData::kPageSize;
        continue;
      }
      break;  // ENOMEM, or the process is exiting
    }
    return done;
  }

  // A slot of zero pages; throws std::bad_alloc when no region can be mapped.
  std::byte* take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) add_region();
    std::byte* slot = *free_.begin();
    free_.erase(free_.begin());
    ++used_[region_of(slot)];
    return slot;
  }

  void give_back(std::byte* slot) {
    // Cannot fail on a private anonymous mapping of ours, with whole pages.
    madvise(slot, kSlot, MADV_DONTNEED);
    std::lock_guard lock(mutex_);
    std::byte* region = region_of(slot);
    free_.insert(slot);
    if (--used_[region] > 0 || used_.size() == 1) return;
    // A region with no segment left goes, unless it is the last one.
    for (uint64_t i = 0; i < kSlotsPerRegion; ++i) free_.erase(region + i * kSlot);
    used_.erase(region);
    munmap(region, kRegion);
  }

 private:
  explicit SegmentSlots(PageFill fill) : fill_(fill) {
    if (fill_ != PageFill::kCopy) return;
    copying_ = this;  // not instance(): a fork during its initialisation would wait on it
    pthread_atfork(nullptr, nullptr, &forget_page_filler);
  }

  // In a child of fork(): an open userfaultfd still works on the parent's
  // memory, and the child's copies of the regions are registered with
  // nothing: the child fills pages by faulting them in, in old regions and
  // new. One not opened yet (mount's fork) is opened by the child itself.
  static void forget_page_filler() {
    const int uffd = copying_->uffd_.load();
    if (uffd < 0) return;
    copying_->uffd_.store(-1);
    close(uffd);
  }

  static inline SegmentSlots* copying_ = nullptr;

  std::byte* region_of(std::byte* slot) const {
    auto it = used_.upper_bound(slot);
    return std::prev(it)->first;
  }

  void add_region() {
    // Aligned to a slot: map a slot more than needed and cut the ends off.
    void* mapped = mmap(nullptr, kRegion + kSlot, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
    auto* start = static_cast<std::byte*>(mapped);
    auto* region = reinterpret_cast<std::byte*>(
        (reinterpret_cast<uintptr_t>(start) + kSlot - 1) & ~(uintptr_t{kSlot} - 1));
    if (region > start) munmap(start, static_cast<size_t>(region - start));
    std::byte* end = start + kRegion + kSlot;
    if (end > region + kRegion) munmap(region + kRegion, static_cast<size_t>(end - (region + kRegion)));
    // Pages, not 2 MiB huge pages: a 4 KiB write must cost 4 KiB wherever the
    // system turns transparent huge pages on.
    madvise(region, kRegion, MADV_NOHUGEPAGE);
    if (fill_ == PageFill::kCopy && uffd_ == kNotOpened) uffd_ = open_page_filler();
    if (uffd_ >= 0 && register_missing(uffd_, region, kRegion) == 0) {
      munmap(region, kRegion);
      throw std::bad_alloc();
    }
    used_.emplace(region, 0);
    for (uint64_t i = 0; i < kSlotsPerRegion; ++i) free_.insert(region + i * kSlot);
  }

  static constexpr int kNotOpened = -2;
  const PageFill fill_;
  // kCopy: opened with the first region, so in the process that serves (after
  // mount's fork); -1 if refused then, or in a child of fork(). Set under
  // mutex_, or by the only thread of a new child.
  std::atomic<int> uffd_{kNotOpened};
  std::mutex mutex_;
  std::set<std::byte*> free_;             // guarded by mutex_
  std::map<std::byte*, uint64_t> used_;   // region -> slots taken; guarded by mutex_
};

PageFill best_page_fill() {
  static const PageFill best = [] {
    const int uffd = SegmentSlots::open_page_filler();
    if (uffd < 0) return PageFill::kFault;
    close(uffd);
    return PageFill::kCopy;
  }();
  return best;
}

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
