// SPDX-License-Identifier: Apache-2.0
#include "engine/data/segment_slots.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>

namespace mimicfs {

SegmentSlots& SegmentSlots::instance(PageFill fill) {
  // Never destroyed: memory may be given back during static destruction.
  static SegmentSlots* const faulting = new SegmentSlots(PageFill::kFault);
  static SegmentSlots* const copying = new SegmentSlots(PageFill::kCopy);
  return fill == PageFill::kCopy ? *copying : *faulting;
}

int SegmentSlots::open_page_filler() {
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

uint64_t SegmentSlots::register_missing(int uffd, std::byte* start, uint64_t length) {
  uffdio_register range{};
  range.range.start = reinterpret_cast<uintptr_t>(start);
  range.range.len = length;
  range.mode = UFFDIO_REGISTER_MODE_MISSING;
  return ioctl(uffd, UFFDIO_REGISTER, &range) == 0 ? range.ioctls : 0;
}

uint64_t SegmentSlots::copy_into(std::byte* target, const std::byte* source, uint64_t length) {
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
    // A page already there takes a plain copy: PageRunMemory counts a run's
    // pages an UFFDIO_COPY made before it failed as missing, and fills them
    // again through here.
    if (errno == EEXIST) {
      std::memcpy(target + done, source + done, kPage);
      done += kPage;
      continue;
    }
    break;  // ENOMEM, or the process is exiting
  }
  return done;
}

std::byte* SegmentSlots::take() {
  std::lock_guard lock(mutex_);
  auto region = regions_.begin();
  while (region != regions_.end() && region->second.count == kSlotsPerRegion) ++region;
  if (region == regions_.end()) region = add_region();
  Region& slots = region->second;
  for (uint64_t word = 0; word < slots.taken.size(); ++word) {
    const int bit = std::countr_one(slots.taken[word]);
    if (bit == 64) continue;
    slots.taken[word] |= uint64_t{1} << bit;
    ++slots.count;
    return region->first + (word * 64 + static_cast<uint64_t>(bit)) * kSlot;
  }
  std::abort();  // count said a slot was free
}

void SegmentSlots::give_back(std::byte* slot) {
  // Cannot fail on a private anonymous mapping of ours, with whole pages.
  madvise(slot, kSlot, MADV_DONTNEED);
  std::lock_guard lock(mutex_);
  const auto region = std::prev(regions_.upper_bound(slot));
  const auto index = static_cast<uint64_t>(slot - region->first) / kSlot;
  Region& slots = region->second;
  slots.taken[index / 64] &= ~(uint64_t{1} << (index % 64));
  if (--slots.count > 0 || regions_.size() == 1) return;
  // A region with no segment left goes, unless it is the last one.
  munmap(region->first, kRegion);
  regions_.erase(region);
}

SegmentSlots::SegmentSlots(PageFill fill) : fill_(fill) {
  if (fill_ != PageFill::kCopy) return;
  copying_ = this;  // not instance(): a fork during its initialisation would wait on it
  pthread_atfork(nullptr, nullptr, &forget_page_filler);
}

// In a child of fork(): an open userfaultfd still works on the parent's
// memory, and the child's copies of the regions are registered with
// nothing: the child fills pages by faulting them in, in old regions and
// new. One not opened yet (mount's fork) is opened by the child itself.
void SegmentSlots::forget_page_filler() {
  const int uffd = copying_->uffd_.load();
  if (uffd < 0) return;
  copying_->uffd_.store(-1);
  close(uffd);
}

std::map<std::byte*, SegmentSlots::Region>::iterator SegmentSlots::add_region() {
  // Aligned to a slot: map a slot more than needed and cut the ends off.
  void* mapped = mmap(nullptr, kRegion + kSlot, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  auto* start = static_cast<std::byte*>(mapped);
  auto* region = reinterpret_cast<std::byte*>(
      (reinterpret_cast<uintptr_t>(start) + kSlot - 1) & ~(uintptr_t{kSlot} - 1));
  if (region > start) munmap(start, static_cast<size_t>(region - start));
  std::byte* end = start + kRegion + kSlot;
  if (end > region + kRegion) {
    munmap(region + kRegion, static_cast<size_t>(end - (region + kRegion)));
  }
  // Pages, not 2 MiB huge pages: a 4 KiB write must cost 4 KiB wherever the
  // system turns transparent huge pages on.
  madvise(region, kRegion, MADV_NOHUGEPAGE);
  if (fill_ == PageFill::kCopy && uffd_ == kNotOpened) uffd_ = open_page_filler();
  if (uffd_ >= 0 && register_missing(uffd_, region, kRegion) == 0) {
    munmap(region, kRegion);
    throw std::bad_alloc();
  }
  return regions_.emplace(region, Region{}).first;
}

PageFill best_page_fill() {
  static const PageFill best = [] {
    const int uffd = SegmentSlots::open_page_filler();
    if (uffd < 0) return PageFill::kFault;
    close(uffd);
    return PageFill::kCopy;
  }();
  return best;
}

}  // namespace mimicfs
