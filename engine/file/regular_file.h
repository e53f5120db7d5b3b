// SPDX-License-Identifier: Apache-2.0
// RegularFile: the data path of one regular file: its size and contents
// (FileData), its blocks (FileSpace), its pages in the host's page cache
// (FilePageCache) and what a power cut would leave of it (FileDurability, and
// FileSpace's allocation at the last sync).
//
// A buffered write dirties the page cache and stays there until a sync of its
// range, the dirty limit or (NFS) close writes it back; O_DIRECT goes to the
// device at once. "Sync a range" is written once, in sync(): fsync, fdatasync,
// O_SYNC/O_DSYNC writes and NFS's close all use it. Every operation adds what it
// did to the caller's Work; none computes time.
//
// Not thread-safe: the owning inode's mutex guards it (the host's dirty-page
// count is shared and atomic).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "engine/data/data_store.h"
#include "engine/durability/durability.h"
#include "engine/durability/page_cache.h"
#include "engine/fs/result.h"
#include "engine/fs/work.h"
#include "engine/profile/profile.h"
#include "engine/space/block_range_set.h"
#include "engine/space/device_space.h"
#include "engine/space/file_space.h"
#include "engine/stats/stats.h"

namespace mimicfs {

class RegularFile {
 public:
  // Linux's largest file offset; the emulated backends share it.
  static constexpr uint64_t kMaxFileSize = std::numeric_limits<int64_t>::max();
  // Which truncate marks the file for writeback at its next close
  // (page_cache.write_back_on_close_after_truncate).
  enum class TruncateWriteback { kNever, kToZero, kDown };

  // `group`: the allocation group the file's blocks are placed in.
  RegularFile(const Profile& profile, DeviceSpace& device, HostDirtyPages& dirty, uint64_t group,
              std::unique_ptr<FileData> contents);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  uint64_t size() const { return size_; }
  const FileSpace& space() const { return space_; }

  // Reads up to out.size() bytes at `offset` (0 at or past EOF): through the page
  // cache, or from the device with `direct`.
  size_t read(uint64_t offset, std::span<std::byte> out, bool direct, Work& work);
  // Writes `data` at `offset` (at EOF with O_APPEND in `flags`); O_DIRECT goes to
  // the device, O_DSYNC (O_SYNC includes it) syncs the range after. EFBIG past
  // the largest offset, ENOSPC with nothing changed.
  Result<size_t> write(uint64_t offset, std::span<const std::byte> data, int flags, Work& work);
  // Sets the size. Whole blocks past it are freed, and blocks preallocated past
  // EOF even when the size does not change (as ext4 and xfs: truncating to the
  // current size is how a program drops its preallocation).
  void truncate(uint64_t size);
  // fallocate of a supported mode (the caller checks the profile): EINVAL for an
  // empty range, EFBIG past the largest offset, ENOSPC with nothing changed.
  Result<void> fallocate(FallocateMode mode, bool keep_size, uint64_t offset, uint64_t length,
                         Work& work);
  // SEEK_DATA or SEEK_HOLE from `offset`: ENXIO at or past EOF, or with no data after.
  Result<uint64_t> seek(uint64_t offset, int whence) const;

  // A sync of [offset, offset+length): the dirty data in it is written back (its
  // delayed blocks allocated first), one commit if anything was not durable,
  // then the range is durable (the whole file, size included, when it spans the
  // file). True when it committed. `flush_only`: the caller found only
  // overwrites in place to make durable (overwritten_in_place_only) and syncs
  // the data alone, so the commit is a cache flush, no journal transaction.
  bool sync(uint64_t offset, uint64_t length, Work& work, bool flush_only = false);
  // The size and allocation are durable now (an NFS server's synchronous
  // SETATTR, ALLOCATE or DEALLOCATE); data written since the last sync is not,
  // and the server's size is the synced one, or `allocated_end` (an ALLOCATE
  // that extends the file) when larger: appends not written back never reached it.
  void commit_attributes(uint64_t allocated_end);
  // The flusher: writes the whole file back when it has dirty data and became
  // dirty more than `expire_ns` before `now_ns` (emulated). True when it did.
  bool write_back_if_expired(uint64_t now_ns, uint64_t expire_ns, Work& work);
  // All of its dirty data goes to the device (its delayed blocks allocated), as
  // filemap_flush starts it; nothing becomes durable.
  void write_back_all(Work& work) { writeback(0, kMaxFileSize, work); }
  // A commit of the journal's (durability.commit_interval_ns, or a rename that
  // carries the file's written-back data): what the filesystem has of the
  // file becomes durable, as a sync would make it, except its dirty pages.
  // Those keep the contents of the last commit (zeros where they were not
  // durable then), and the size is the disk size: what writeback, O_DIRECT or
  // a truncate, fallocate or punch set, not an append still in the page cache.
  // True when something became durable.
  bool commit();
  // A writer's close (FUSE FLUSH): NFS writes back and commits (close-to-open);
  // a file truncated as page_cache.write_back_on_close_after_truncate says is
  // written back (in `untimed`: filemap_flush only starts the I/O);
  // delayed blocks are allocated; the last handle also ends the inode
  // reservation and trims preallocation (FileSpace::close).
  void flush(bool last_handle, Work& work, Work& untimed);
  // The last handle is gone (FUSE RELEASE).
  void close(Work& work);
  // Every block, byte and cached page goes back: the file is gone.
  void release();
  // Its cached pages go, dirty ones included (the inode is evicted).
  void drop_page_cache() { drop_cache(0, kMaxFileSize); }
  // Its blocks and cached pages go back, its contents and the state at its last
  // sync stay: an unlink a crash may undo (recover() takes the blocks back).
  void give_up_blocks();
  // Its contents, cached pages and durability state go (the size becomes 0);
  // its blocks stay until release(): a file whose blocks a background task frees.
  void drop_contents();
  // Its delayed blocks and inode reservation go back (FileSpace::drop_reservations).
  void drop_reservations() { space_.drop_reservations(); }

  // A power cut, in two steps (a volume runs the first on every file, then the
  // second on those that need it, so that blocks given up by one file are free
  // before another takes back its own): power_cut() drops the page cache and,
  // for a file changed since its last sync, what the cut loses of its
  // allocation; true when the file needs recover(), which puts back its size,
  // contents and allocation at the last sync.
  bool power_cut();
  void recover();
  bool unsynced() const { return durability_.unsynced() || space_.changed_since_sync(); }
  // True when the file's size and allocation are durable and all it has not
  // made durable overwrote written blocks in place, and so would [offset,
  // offset+length): ext4's fdatasync (i_datasync_tid) and xfs's
  // (ili_datasync_seq) then flush the data and commit no transaction.
  bool overwritten_in_place_only(uint64_t offset = 0, uint64_t length = 0) const;
  // Before a power cut, the device or the flusher wrote back part of the data
  // written since the last sync: each `unit`-byte piece of it that overwrote
  // durable data in place (below the synced size, in a block mapped as at the
  // sync) is durable with probability `fraction`, drawn from `random`. Pages
  // persist out of order, and a page larger than the unit may persist in part
  // (torn). Appends and allocations are not: their metadata was not committed.
  // Returns the bytes made durable.
  uint64_t persist_some(double fraction, uint64_t unit, std::mt19937_64& random);

  // The size, allocation, dirty and unsynced figures (FileStats::inode unset).
  FileStats stats() const;

  // Its size, blocks and where its contents are (FileData::key) for a volume
  // image, and back into a new RegularFile made with that FileData: durable,
  // with a cold page cache. Only a synced file is saved (ImageError otherwise).
  ImageJson save() const;
  void load(const ImageJson& saved);

 private:
  // Saves the synced contents [offset, offset+length) is about to lose.
  void prepare_change(uint64_t offset, uint64_t length);
  // The cut tail: a truncate down that cuts synced data leaves the bytes it
  // cut below the synced size in the store, past the size, instead of saving
  // each synced page of them for a crash and zeroing them: truncating a
  // synced file of N GiB took N GiB more memory and a copy of it. Nothing can
  // change those bytes there, so saving a page of them later saves what the
  // truncate would have (zeros past the synced size and where bytes were
  // written since the sync, as any save). A sync or journal commit that makes
  // the truncate durable only zeroes them (the store gives the memory back;
  // a host store keeps their blocks until then). Anything else that would
  // read or change them, or that the saved pages must be complete for (the
  // size growing over them, a range made durable past the size, a crash, a
  // partial persist, a size commit that leaves data unsynced), first settles
  // the tail: saves its synced pages as the truncate would have, and zeroes it.
  // Keeps the synced part of [size, size_) as the cut tail, with the blocks
  // of it holding data, and zeroes the rest.
  void keep_cut_tail(uint64_t size);
  // Saves the synced pages of the cut tail and zeroes it.
  void settle_cut_tail();
  // Zeroes the cut tail, none of which a crash can bring back any more.
  void drop_cut_tail();
  // Writes the dirty data inside [offset, offset+length) back, as writeback does.
  void writeback(uint64_t offset, uint64_t length, Work& work);
  // Frees whole blocks inside [offset, offset+length) and zeroes the rest.
  void punch(uint64_t offset, uint64_t length);
  // The file as it is now, as its durability saves and patches pages.
  class DurabilityView final : public FileDurability::FileView {
   public:
    explicit DurabilityView(const RegularFile& file) : file_(file) {}
    bool has_data(uint64_t offset, uint64_t length) const override;
    void read(uint64_t offset, std::span<std::byte> out) const override;
    const std::byte* in_memory(uint64_t offset, uint64_t length) const override;

   private:
    const RegularFile& file_;
  };
  // The device requests for [offset, offset+length).
  DeviceWork device_work(uint64_t offset, uint64_t length) const;
  // Forgets the cached pages of [offset, offset+length), dirty ones included.
  void drop_cache(uint64_t offset, uint64_t length);

  const uint64_t unit_;  // the allocation unit, in bytes
  const uint64_t max_request_bytes_;
  const bool flush_on_close_;
  const TruncateWriteback truncate_writeback_;
  bool write_back_on_close_ = false;  // marked by a truncate (EXT4_STATE_DA_ALLOC_CLOSE)
  HostDirtyPages& dirty_;
  uint64_t size_ = 0;
  // The size a commit makes durable while the file has dirty pages (ext4's
  // i_disksize, xfs's di_size, btrfs's disk_i_size): a truncate or fallocate
  // sets it, writeback and O_DIRECT move it up to the end of the data they
  // wrote; an append still in the page cache does not. With nothing dirty it
  // is the size.
  uint64_t disk_size_ = 0;
  uint64_t dirtied_ns_ = 0;  // the flusher's time when the page cache last went from clean to dirty
  // The cut tail [size_, cut_end_) (none when cut_end_ is 0), and its blocks
  // that held data when cut: what the saves see when it is settled.
  uint64_t cut_end_ = 0;
  BlockRangeSet cut_data_;
  FileSpace space_;
  FilePageCache cache_;
  FileDurability durability_;
  std::unique_ptr<FileData> contents_;
};

}  // namespace mimicfs
