// SPDX-License-Identifier: Apache-2.0
// FileDurability: what of one file would survive a power cut, as RocksDB's
// FaultInjectionTestFS keeps it: the size at the last sync, the byte ranges
// written since, and the synced contents of every page changed since (saved
// before the first change), so `ctl crash` can put the file back as it was.
//
// A sync is fsync or fdatasync, an O_SYNC or O_DSYNC write (its range), and on
// NFS a close (close-to-open flushes and commits). O_DIRECT writes are not
// durable until a sync: the device has a volatile write cache.
//
// The saved contents are kept in memory (a truncate saves none at once: RegularFile
// keeps the bytes it cuts, regular_file.h), a run of pages (up to 16) in one
// run of PageRunMemory (page_run_memory.h), read from the file in one call
// (copied straight from the file's pages where they are in memory). A
// run goes with the last of its pages (at a sync, or when a range sync or a
// size sync drops them): kept warm for the next saves until the daemon's
// trimmer empties it. A truncate's cut tail hands whole segments of the
// memory store over instead, pages and all.
// Not thread-safe: the owning inode's mutex guards it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/data/data_store.h"
#include "engine/data/page_run_memory.h"
#include "engine/space/block_range_set.h"

namespace mimicfs {

class FileDurability {
 public:
  static constexpr uint64_t kPageBytes = 4096;

  // The file as it is now, as saving reads it.
  class FileView {
   public:
    virtual ~FileView() = default;
    // Whether [offset, offset+length) holds data blocks. A page without (a
    // hole, or unwritten) is saved as a hole, so a crash gives back the
    // allocation too.
    virtual bool has_data(uint64_t offset, uint64_t length) const = 0;
    // The file's bytes at `offset`.
    virtual void read(uint64_t offset, std::span<std::byte> out) const = 0;
    // The file's bytes of [offset, offset+length) in place, where they lie in
    // memory (FileData::stored_in_memory); else null.
    virtual const std::byte* in_memory(uint64_t /*offset*/, uint64_t /*length*/) const {
      return nullptr;
    }
  };

  // Before [offset, offset+length) changes (write, punch, zero range; the
  // bytes a truncate cut, when RegularFile settles them):
  // saves each synced page in it not saved since the last sync.
  void before_change(uint64_t offset, uint64_t length, const FileView& file);
  // Before [offset, offset+length) goes (a truncate's cut tail, settled):
  // saves the pieces `contents` can hand over (FileData::hand_over) that lie
  // whole in it, synced, unchanged since, not saved yet and data, by taking
  // their memory out of the file, without a copy. before_change saves the rest.
  void save_handed_over(uint64_t offset, uint64_t length, const FileView& file,
                        FileData& contents);
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
  // `current` is the file as it is now.
  void range_synced(uint64_t offset, uint64_t length, uint64_t size, const FileView& current);

  bool metadata_unsynced() const { return metadata_unsynced_; }
  bool unsynced() const { return metadata_unsynced_ || !unsynced_.empty() || !saved_.empty(); }
  uint64_t unsynced_bytes() const { return unsynced_.blocks(); }
  // The byte ranges written since the last sync: offset -> length (a change of
  // them invalidates every iterator and reference into them).
  const BlockRangeSet::Ranges& unsynced_ranges() const { return unsynced_.ranges(); }
  uint64_t synced_size() const { return synced_size_; }

  uint64_t saved_page_count() const { return saved_.size(); }
  bool saved(uint64_t page) const { return saved_.contains(page); }
  // The saved pages' offsets, in order.
  std::vector<uint64_t> saved_page_offsets() const;
  // A saved page's synced contents, clipped to the synced size; nullopt for a
  // page saved as a hole (or not saved).
  std::optional<std::string> saved_page(uint64_t page) const;
  // Bytes of memory the saved pages of every file in the process take.
  static uint64_t saved_memory_bytes();

 private:
  // Saves the pages of [start, start+length), none saved yet, all below the
  // synced size.
  void save(uint64_t start, uint64_t length, const FileView& file);
  // Saves the data pages [start, start+length) (at most kRunBytes).
  void save_data(uint64_t start, uint64_t length, const FileView& file);
  // The pages of [start, start+length) are saved in `block` (its memory).
  void keep_saved(uint64_t start, uint64_t length, const std::shared_ptr<std::byte[]>& block);
  static constexpr uint64_t kRunBytes = 16 * kPageBytes;  // saved per copy
  static_assert(kRunBytes <= PageRunMemory::kRunBytes);

  uint64_t synced_size_ = 0;
  bool metadata_unsynced_ = false;
  BlockRangeSet unsynced_;  // byte ranges
  BlockRangeSet zeroed_;    // byte ranges truncates and punches zeroed since the last commit
  // Saved page offset -> its synced contents, a whole page (zeros past the
  // synced size), in a block shared by its run (freed with the run's last
  // page: a sync, or a range synced or cut off); null for a page that was a hole.
  std::map<uint64_t, std::shared_ptr<std::byte>> saved_;
};

}  // namespace mimicfs
