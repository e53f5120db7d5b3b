// SPDX-License-Identifier: Apache-2.0
// FilePageCache: one file's pages in the host's page cache, as the cost model
// sees them: which byte ranges are dirty (written, not yet on the device) and
// which pages are cached (a buffered read of them costs memory, not the device).
//
// Dirty ranges are kept in `dirty_unit`s, what writeback writes whole: a page on
// a local filesystem; a byte on the NFS client, which tracks dirty byte ranges
// and sends each discontiguous one as its own WRITE. The cache never evicts (the
// emulated host has the memory); `ctl crash` empties it.
// Not thread-safe: the owning inode's mutex guards it.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/space/block_range_set.h"

namespace mimicfs {

class FilePageCache {
 public:
  static constexpr uint64_t kPageBytes = 4096;

  explicit FilePageCache(uint64_t dirty_unit) : dirty_unit_(dirty_unit) {}

  // A buffered write of [offset, offset+length): dirty, and cached.
  // Returns how many bytes became dirty that were not.
  uint64_t write(uint64_t offset, uint64_t length);
  // A write that went to the device (O_DIRECT): nothing in it is dirty any more.
  // Returns the dirty bytes dropped.
  uint64_t written_through(uint64_t offset, uint64_t length);
  // Removes and returns the dirty byte ranges inside [offset, offset+length), in order.
  std::vector<BlockRange> take_dirty(uint64_t offset, uint64_t length);
  // Marks the pages of [offset, offset+length) cached; returns the byte ranges
  // (page aligned) that were not, which a buffered read fetches from the device.
  std::vector<BlockRange> read(uint64_t offset, uint64_t length);
  // Forgets everything from `offset` on (truncate) or inside a range (punch).
  // Returns the dirty bytes dropped.
  uint64_t drop(uint64_t offset, uint64_t length);
  void clear();

  uint64_t dirty_bytes() const { return dirty_.blocks(); }
  // The dirty byte ranges inside [offset, offset+length), in order.
  std::vector<BlockRange> dirty_ranges(uint64_t offset, uint64_t length) const {
    return dirty_.overlapping(offset, length);
  }

 private:
  const uint64_t dirty_unit_;
  BlockRangeSet dirty_;   // byte ranges, dirty_unit aligned
  BlockRangeSet cached_;  // page numbers
};

// The dirty bytes in every file's page cache on the emulated host, the limit
// past which a writer writes back itself (vm.dirty_bytes, as
// balance_dirty_pages enforces it), and the emulated time the flusher last woke
// at, which a file that becomes dirty takes as its `dirtied_when`. Thread-safe.
class HostDirtyPages {
 public:
  // `limit_bytes`: 0 for none.
  explicit HostDirtyPages(uint64_t limit_bytes) : limit_(limit_bytes) {}

  void add(uint64_t bytes) { bytes_.fetch_add(bytes, std::memory_order_relaxed); }
  void remove(uint64_t bytes) { bytes_.fetch_sub(bytes, std::memory_order_relaxed); }
  bool over_limit() const { return limit_ > 0 && bytes_.load(std::memory_order_relaxed) > limit_; }

  uint64_t flusher_ns() const { return flusher_ns_.load(std::memory_order_relaxed); }
  // Never moves back (two wakes may run at once).
  void set_flusher_ns(uint64_t ns) {
    uint64_t seen = flusher_ns_.load(std::memory_order_relaxed);
    while (seen < ns && !flusher_ns_.compare_exchange_weak(seen, ns, std::memory_order_relaxed)) {
    }
  }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> flusher_ns_{0};
};

}  // namespace mimicfs
