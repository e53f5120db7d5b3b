// FileDurability: what of one file would survive a power cut, as RocksDB's
// FaultInjectionTestFS keeps it: the size at the last sync, the byte ranges
// written since, and the synced contents of every page changed since (saved
// before the first change), so `ctl crash` can put the file back as it was.
//
// A sync is fsync or fdatasync, an O_SYNC or O_DSYNC write (its range), and on
// NFS a close (close-to-open flushes and commits). O_DIRECT writes are not
// durable until a sync: the device has a volatile write cache.
// Not thread-safe: the owning inode's mutex guards it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "backends/block_range_set.h"

namespace mimicfs {

class FileDurability {
 public:
  static constexpr uint64_t kPageBytes = 4096;

  // A synced page's contents (clipped to the synced size), or nullopt for a page
  // that had no data blocks (a hole, or unwritten).
  using PageReader = std::function<std::optional<std::string>(uint64_t offset, uint64_t length)>;

  // Before [offset, offset+length) changes (write, truncate, punch, zero range):
  // saves each synced page in it not saved since the last sync.
  void before_change(uint64_t offset, uint64_t length, const PageReader& read);
  // [offset, offset+length) was written and is not durable yet.
  void written(uint64_t offset, uint64_t length) {
    if (length > 0) unsynced_.add(offset, length);
  }
  // The file's size or allocation changed (truncate, fallocate, punch).
  void metadata_changed() { metadata_unsynced_ = true; }
  // [offset, offset+length) was zeroed by a truncate or a punch: a commit that
  // makes the change durable makes those bytes zeros on the device, under the
  // dirty pages too (commit_zeroes).
  void zeroed(uint64_t offset, uint64_t length) {
    if (length > 0) zeroed_.add(offset, length);
  }
  // A commit made the truncates and punches since the last sync durable: the
  // saved pages read as zeros where they zeroed.
  void commit_zeroes();
  // Everything is durable now, at `size`.
  void synced(uint64_t size);
  // The size (`size`) and allocation are durable now; the data written since
  // the last sync is not (a server's synchronous attribute change).
  void size_synced(uint64_t size);
  // Only [offset, offset+length) of the data is durable now (O_DSYNC writes);
  // `current` reads the file's bytes as they are now.
  void range_synced(uint64_t offset, uint64_t length, uint64_t size, const PageReader& current);

  bool metadata_unsynced() const { return metadata_unsynced_; }
  bool unsynced() const { return metadata_unsynced_ || !unsynced_.empty() || !saved_.empty(); }
  uint64_t unsynced_bytes() const { return unsynced_.blocks(); }
  // The byte ranges written since the last sync: offset -> length.
  const std::map<uint64_t, uint64_t>& unsynced_ranges() const { return unsynced_.ranges(); }
  uint64_t synced_size() const { return synced_size_; }
  // The saved pages: offset -> synced contents (nullopt: was a hole).
  const std::map<uint64_t, std::optional<std::string>>& saved_pages() const { return saved_; }

 private:
  uint64_t synced_size_ = 0;
  bool metadata_unsynced_ = false;
  BlockRangeSet unsynced_;                                // byte ranges
  BlockRangeSet zeroed_;  // byte ranges truncates and punches zeroed since the last commit
  std::map<uint64_t, std::optional<std::string>> saved_;  // page offset -> synced contents
};

}  // namespace mimicfs
