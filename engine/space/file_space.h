// SPDX-License-Identifier: Apache-2.0
// FileSpace: the blocks of one file: its ExtentMap (mapped runs, written or
// unwritten), its delayed set (written blocks awaiting delayed allocation, each
// reserved on the device), its inode reservation (ext4's per-inode window), its
// preallocation stream state, and the xfs flags that decide the trim at close.
// Every allocation goes through the volume's DeviceSpace and its policies.
//
// Crash state: the first change to a block's mapping since the last sync saves
// the mapping it had then (a hole, or the extent), so a power cut can give the
// file back its allocation at the last sync exactly; a sync forgets them.
//
// Offsets here are in allocation-unit blocks; bytes stay with the Volume.
// Not thread-safe: the owning inode's mutex guards it.
#pragma once

#include <optional>
#include <vector>

#include "engine/fs/result.h"
#include "engine/fs/work.h"
#include "engine/space/block_range_set.h"
#include "engine/space/device_space.h"
#include "engine/space/extent_map.h"
#include "engine/stats/stats.h"

namespace mimicfs {

class FileSpace {
 public:
  // Every block of a file, as a count: what "to the end" means here.
  static constexpr uint64_t kAllBlocks = std::numeric_limits<uint64_t>::max() / 2;

  FileSpace(DeviceSpace& device, uint64_t group);
  ~FileSpace();
  FileSpace(const FileSpace&) = delete;
  FileSpace& operator=(const FileSpace&) = delete;

  const ExtentMap& extents() const { return extents_; }
  // Blocks the file holds or is promised (st_blocks): mapped and delayed.
  uint64_t blocks() const { return extents_.mapped_blocks() + delayed_.blocks(); }
  uint64_t delayed_blocks() const { return delayed_.blocks(); }
  // The device blocks its inode reservation window holds (length 0: none).
  BlockRange reservation_window() const { return {reservation_.physical, reservation_.length}; }
  // True when any block of [first, first+count) holds data: written, or delayed.
  bool has_data(uint64_t first, uint64_t count) const;
  // True when any block of [first, first+count) has written device blocks.
  bool has_written_blocks(uint64_t first, uint64_t count) const;
  // True when every block of [first, first+count) is mapped and written: an
  // overwrite there changes no allocation (copy-on-write aside).
  bool written_in_place(uint64_t first, uint64_t count) const;
  // SEEK_DATA and SEEK_HOLE in blocks: delayed blocks are data.
  std::optional<uint64_t> next_data(uint64_t block) const;
  uint64_t next_hole(uint64_t block) const;
  // Fills the allocation fields of `stats` for a file of `size_blocks` blocks.
  void describe(uint64_t size_blocks, FileStats& stats) const;
  // Runs of blocks in [0, size_blocks) with neither device blocks nor delayed
  // data: O(log n) with nothing delayed, O(d log n) for d delayed runs.
  uint64_t holes(uint64_t size_blocks) const;

  // A write of blocks [first, first+count) in a file that will be `size` bytes:
  // holes not awaiting allocation (and, copy-on-write, written blocks it
  // overwrites, which move) are reserved, then allocated now or added to the
  // delayed set; a file with writeback_blocks of delayed data is written back.
  // All or nothing: ENOSPC changes nothing.
  [[nodiscard]] Result<void> write(uint64_t first, uint64_t count, uint64_t size, Work& work);
  // fallocate's allocation: every hole among [first, first+count) not awaiting
  // delayed allocation gets unwritten blocks. All or nothing: ENOSPC changes nothing.
  [[nodiscard]] Result<void> allocate(uint64_t first, uint64_t count, uint64_t size, Work& work);
  // ZERO_RANGE, in two steps around the punch: reserve every block first (so
  // ENOSPC changes nothing), then map the holes as unwritten from the reservation.
  [[nodiscard]] Result<void> reserve(uint64_t count);
  void allocate_reserved(uint64_t first, uint64_t count, uint64_t size, Work& work);
  // Writeback: the delayed blocks among [first, first+count) are allocated.
  void flush_delayed(uint64_t first, uint64_t count, uint64_t size, Work& work);
  // The same with no preallocation: blocks that a crash restored were on the device.
  void allocate_delayed_exactly(Work& work);

  // Frees the whole blocks [first, first+count) and ends the inode reservation
  // (as ext4: a punch ends the file's preallocation).
  void punch(uint64_t first, uint64_t count);
  // Frees every block from `keep_blocks` on, preallocation past EOF included;
  // `emptied` when the file is now empty (its preallocation stream restarts).
  void truncate(uint64_t keep_blocks, bool emptied);
  // The file's last handle closed: delayed allocation happens, the inode
  // reservation goes back, and speculative preallocation past EOF is trimmed,
  // as xfs does on the first close only (since Linux 6.12) and never for a
  // fallocated file.
  void close(uint64_t size, Work& work);
  // The file is gone: every block and reservation goes back.
  void release();
  // The file is gone and a background task will free its blocks: what was only
  // promised in memory (delayed blocks, the inode reservation) goes back now,
  // as the kernel's eviction cancels delayed allocation before inactivation.
  void drop_reservations();

  // Crash state. The current mapping is durable (a sync), of every block or of
  // blocks [first, first+count) only (O_DSYNC).
  void synced();
  void range_synced(uint64_t first, uint64_t count);
  // A commit at a disk size of `end` blocks: the mapping below is durable;
  // past it the commit made truncates and punches durable but no allocation
  // (its data is not written), so a crash leaves holes where the mapping
  // changed since the last sync.
  void synced_below(uint64_t end);
  // True when some block's mapping changed since the last sync (of blocks
  // [first, first+count) only, with a range).
  bool changed_since_sync() const { return !changed_.empty(); }
  bool changed_since_sync(uint64_t first, uint64_t count) const {
    return changed_.overlaps(first, count);
  }
  // A power cut, in two steps so that no file takes back blocks another file
  // has not given up yet (a volume calls the first on every file, then the
  // second): lose_unsynced() drops delayed blocks and the inode reservation
  // and frees every block whose mapping changed since the last sync;
  // take_back_synced() maps those blocks as they were at the sync (their
  // device blocks taken back; new ones, and a warning, where another file
  // holds them now) and returns the block ranges among them that hold no data
  // (holes and unwritten extents): their bytes must read as zeros.
  void lose_unsynced();
  std::vector<BlockRange> take_back_synced();
  // Both steps, for one file alone.
  std::vector<BlockRange> restore_synced();

  // Its blocks for a volume image, and back into a new FileSpace (whose
  // device's blocks are loaded from the same image). Only a synced file is
  // saved (ImageError otherwise): the image holds no crash state.
  ImageJson save() const;
  void load(const ImageJson& saved);

 private:
  // A file's blocks set aside by an inode preallocation window: device blocks
  // [physical, physical+length), for file blocks from `logical` on.
  struct InodeReservation {
    uint64_t logical = 0;
    uint64_t physical = 0;
    uint64_t length = 0;
  };

  // Maps blocks [logical, logical+count), which must be unmapped, from the
  // reservation or new blocks; the caller has reserved `count` blocks. With
  // `preallocate`, the PreallocationPolicy may add blocks. An allocation into a
  // hole between allocated blocks is a gap fill in `work`.
  void allocate_range(uint64_t logical, uint64_t count, bool unwritten, bool preallocate,
                      uint64_t size, Work& work);
  void discard_reservation();
  // The mapping of the file, changed here and only here, saving the mapping at
  // the last sync of each block first (crash state).
  void map(uint64_t logical, uint64_t physical, uint64_t length, bool unwritten);
  [[nodiscard]] std::vector<BlockRange> unmap(uint64_t first, uint64_t count);
  void mark_written(uint64_t first, uint64_t count);
  // Saves the mapping of blocks [first, first+count) not saved since the last sync.
  void remember(uint64_t first, uint64_t count);
  // Holes among [first, first+count) not awaiting delayed allocation.
  std::vector<BlockRange> unpromised_holes(uint64_t first, uint64_t count) const;

  DeviceSpace& device_;
  const uint64_t home_group_;  // its inode's group, where a first allocation starts from
  uint64_t group_;  // the group its blocks are placed in: home_group_, or where GroupLocks put it
  const uint64_t created_stamp_;  // GroupLocks::stamp() when it was made
  ExtentMap extents_;
  BlockRangeSet delayed_;  // written blocks awaiting delayed allocation (each reserved)
  InodeReservation reservation_;
  PreallocationState preallocation_;
  bool fallocated_ = false;   // as xfs's PREALLOC flag: blocks past EOF survive close
  bool eof_trimmed_ = false;  // as xfs's IDIRTY_RELEASE: trimmed once, kept after
  BlockRangeSet changed_;     // blocks whose mapping changed since the last sync
  ExtentMap synced_mapping_;  // their mapping at the last sync (a hole: none)
};

}  // namespace mimicfs
