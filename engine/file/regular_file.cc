// SPDX-License-Identifier: Apache-2.0
#include "engine/file/regular_file.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

namespace mimicfs {
namespace {

constexpr uint64_t kAllBlocks = FileSpace::kAllBlocks;

uint64_t div_up(uint64_t value, uint64_t unit) { return (value + unit - 1) / unit; }

RegularFile::TruncateWriteback truncate_writeback(const std::string& name) {
  if (name == "to_zero") return RegularFile::TruncateWriteback::kToZero;
  if (name == "down") return RegularFile::TruncateWriteback::kDown;
  return RegularFile::TruncateWriteback::kNever;
}

}  // namespace

RegularFile::RegularFile(const Profile& profile, DeviceSpace& device, HostDirtyPages& dirty,
                         uint64_t group, std::unique_ptr<FileData> contents)
    : unit_(profile.allocation_unit),
      max_request_bytes_(profile.max_request_bytes),
      flush_on_close_(profile.flush_on_close),
      truncate_writeback_(truncate_writeback(profile.write_back_on_close_after_truncate)),
      dirty_(dirty),
      space_(device, group),
      cache_(profile.dirty_unit),
      contents_(std::move(contents)) {}

RegularFile::~RegularFile() { dirty_.remove(cache_.dirty_bytes()); }

size_t RegularFile::read(uint64_t offset, std::span<std::byte> out, bool direct, Work& work) {
  if (offset >= size_) return 0;
  const size_t length = std::min<uint64_t>(out.size(), size_ - offset);
  contents_->read(offset, out.first(length));
  work.bytes = length;
  if (direct) {
    work.device_reads += device_work(offset, length);
  } else {
    ++work.cache_copies;
    work.cache_copy_bytes += length;
    for (const BlockRange& range : cache_.read(offset, length)) {
      work.device_reads += device_work(range.start, range.length);
    }
  }
  return length;
}

Result<size_t> RegularFile::write(uint64_t offset, std::span<const std::byte> data, int flags,
                                  Work& work) {
  if (flags & O_APPEND) offset = size_;
  if (data.empty()) return size_t{0};
  if (offset > kMaxFileSize || data.size() > kMaxFileSize - offset) return fail(EFBIG);
  const bool direct = (flags & O_DIRECT) != 0;
  const bool sync_after = (flags & O_DSYNC) != 0;  // O_SYNC includes the O_DSYNC bit
  // A store on a host filesystem that is full fails here, before anything changes.
  // The cut tail is settled first: its zeroing may give back host blocks
  // the reservation would take.
  if (offset + data.size() > size_) settle_cut_tail();
  if (auto room = contents_->reserve(offset, data); !room) return std::unexpected(room.error());
  prepare_change(offset, data.size());
  const uint64_t end = offset + data.size();
  const uint64_t first = offset / unit_;
  if (auto r = space_.write(first, div_up(end, unit_) - first, std::max(size_, end), work); !r) {
    contents_->unreserve(offset, data);
    return std::unexpected(r.error());
  }
  size_ = std::max(size_, end);
  contents_->write(offset, data);
  work.bytes = data.size();
  durability_.written(offset, data.size());
  if (direct) {
    dirty_.remove(cache_.written_through(offset, data.size()));
    // Direct I/O allocates at once, never delayed, and its completion moves
    // the disk size (ext4_handle_inode_extension, xfs_dio_write_end_io).
    space_.flush_delayed(0, kAllBlocks, size_, work);
    work.device_writes += device_work(offset, data.size());
    disk_size_ = std::max(disk_size_, end);
  } else {
    ++work.cache_copies;
    work.cache_copy_bytes += data.size();
    if (cache_.dirty_bytes() == 0) dirtied_ns_ = dirty_.flusher_ns();  // inode->dirtied_when
    dirty_.add(cache_.write(offset, data.size()));
  }
  if (sync_after) {
    // As generic_write_sync (iomap's direct I/O completion calls it too): the
    // range is written back and committed now. O_DSYNC (not O_SYNC) that left
    // only overwrites in place to make durable is fdatasync's flush alone; a
    // copy-on-write overwrite has moved its blocks by now, so it commits.
    const bool flush_only =
        (flags & O_SYNC) != O_SYNC && overwritten_in_place_only(offset, data.size());
    sync(offset, data.size(), work, flush_only);
  } else if (!direct && dirty_.over_limit()) {
    // As balance_dirty_pages: past the dirty limit the writer writes back.
    writeback(0, kMaxFileSize, work);
  }
  return data.size();
}

void RegularFile::truncate(uint64_t size) {
  // The tail of the last block stays allocated and is zeroed.
  durability_.metadata_changed();
  // ext4_truncate marks a file truncated to 0 (auto_da_alloc), btrfs_setsize
  // too; xfs_setattr_size any truncate down (XFS_ITRUNCATED).
  if ((truncate_writeback_ == TruncateWriteback::kToZero && size == 0) ||
      (truncate_writeback_ == TruncateWriteback::kDown && size <= size_)) {
    write_back_on_close_ = true;
  }
  if (size < size_) {
    if (durability_.synced_size() > size) {
      keep_cut_tail(size);
    } else {
      drop_cut_tail();  // past the synced size: nothing a crash brings back
      prepare_change(size, size_ - size);
      contents_->zero(size, size_ - size);
    }
    durability_.zeroed(size, size_ - size);
  } else if (size > size_) {
    settle_cut_tail();  // the file grows over it: it reads as zeros
  }
  if (size <= size_) {
    drop_cache(size, kMaxFileSize - size);
    space_.truncate(div_up(size, unit_), size == 0);
  }
  size_ = size;
  disk_size_ = size;  // the truncate's transaction logs the new size
}

void RegularFile::punch(uint64_t offset, uint64_t length) {
  const uint64_t end = offset + length;
  prepare_change(offset, length);
  durability_.metadata_changed();
  // ext4 and xfs write the range back before they punch it: its dirty data
  // moves the disk size as writeback would.
  if (const auto dirty = cache_.dirty_ranges(offset, length); !dirty.empty()) {
    disk_size_ = std::max(disk_size_, std::min(size_, dirty.back().start + dirty.back().length));
  }
  drop_cache(offset, length);
  if (offset < size_) durability_.zeroed(offset, std::min(end, size_) - offset);
  const uint64_t first_whole = div_up(offset, unit_);
  const uint64_t end_whole = end / unit_;
  space_.punch(first_whole, first_whole < end_whole ? end_whole - first_whole : 0);
  if (offset < size_) contents_->zero(offset, std::min(end, size_) - offset);
}

Result<void> RegularFile::fallocate(FallocateMode mode, bool keep_size, uint64_t offset,
                                    uint64_t length, Work& work) {
  if (length == 0) return fail(EINVAL);
  if (offset > kMaxFileSize || length > kMaxFileSize - offset) return fail(EFBIG);
  const uint64_t end = offset + length;
  const uint64_t first = offset / unit_;
  const uint64_t count = div_up(end, unit_) - first;
  switch (mode) {
    case FallocateMode::kAllocate:
    case FallocateMode::kKeepSize:
      prepare_change(offset, length);  // synced holes it fills come back at a crash
      if (auto r = space_.allocate(first, count, size_, work); !r) return r;
      break;
    case FallocateMode::kPunchHole:
      punch(offset, length);
      break;
    case FallocateMode::kZeroRange:
      // As ext4: whole blocks become unwritten extents, partial ones are zeroed in
      // place. Every block of the range is reserved first, so ENOSPC changes nothing.
      if (auto r = space_.reserve(count); !r) return r;
      punch(offset, length);
      space_.allocate_reserved(first, count, size_, work);
      break;
  }
  durability_.metadata_changed();
  if (!keep_size && mode != FallocateMode::kPunchHole && end > size_) {
    size_ = end;
    disk_size_ = end;  // ext4_update_inode_size, in the fallocate's transaction
  }
  return {};
}

Result<uint64_t> RegularFile::seek(uint64_t offset, int whence) const {
  if (offset >= size_) return fail(ENXIO);
  const uint64_t block = offset / unit_;
  // Delayed blocks are data: they hold written bytes not yet given device blocks.
  if (whence == SEEK_DATA) {
    const std::optional<uint64_t> data_block = space_.next_data(block);
    if (!data_block) return fail(ENXIO);
    const uint64_t position = std::max(offset, *data_block * unit_);
    if (position >= size_) return fail(ENXIO);
    return position;
  }
  const uint64_t position = std::max(offset, space_.next_hole(block) * unit_);
  return std::min(position, size_);  // EOF is a hole
}

void RegularFile::writeback(uint64_t offset, uint64_t length, Work& work) {
  const uint64_t first = offset / unit_;
  const uint64_t end =
      length >= kMaxFileSize - offset ? kAllBlocks : div_up(offset + length, unit_);
  space_.flush_delayed(first, end - first, size_, work);
  for (const BlockRange& range : cache_.take_dirty(offset, length)) {
    dirty_.remove(range.length);
    work.device_writes += device_work(range.start, range.length);
    // The write's completion moves the disk size (ext4's mpage_map_and_submit,
    // xfs_setfilesize, btrfs's ordered extents).
    disk_size_ = std::max(disk_size_, std::min(size_, range.start + range.length));
  }
}

bool RegularFile::sync(uint64_t offset, uint64_t length, Work& work, bool flush_only) {
  writeback(offset, length, work);
  const bool commit = durability_.unsynced();
  if (commit) ++(flush_only ? work.flushes : work.commits);
  if (offset == 0 && length >= kMaxFileSize) {
    durability_.synced(size_);
    drop_cut_tail();
    space_.synced();
    disk_size_ = size_;
  } else {
    if (offset + length > size_) settle_cut_tail();
    const uint64_t first = offset / unit_;
    space_.range_synced(first, div_up(offset + length, unit_) - first);
    durability_.range_synced(offset, length, size_, DurabilityView(*this));
  }
  return commit;
}

void RegularFile::commit_attributes(uint64_t allocated_end) {
  // After a client's writeback and commit nothing else is pending: the file is
  // durable as it is. An ALLOCATE sent with data unsynced leaves that data so.
  if (durability_.unsynced_bytes() == 0) {
    durability_.synced(size_);
    drop_cut_tail();
  } else {
    settle_cut_tail();
    durability_.size_synced(std::max(durability_.synced_size(), allocated_end));
  }
  space_.synced();
  disk_size_ = std::max(disk_size_, std::min(size_, durability_.synced_size()));
}

bool RegularFile::write_back_if_expired(uint64_t now_ns, uint64_t expire_ns, Work& work) {
  // dirtied_ns_ is the flusher's last wake before the first dirty page: a file
  // dirtied between two wakes is written back at the first wake more than
  // `expire_ns` after, as the kernel's is (its age is exact, its wakes are not).
  if (cache_.dirty_bytes() == 0 || now_ns < dirtied_ns_ || now_ns - dirtied_ns_ <= expire_ns) {
    return false;
  }
  writeback(0, kMaxFileSize, work);
  return true;
}

bool RegularFile::overwritten_in_place_only(uint64_t offset, uint64_t length) const {
  const auto in_place = [&](uint64_t from, uint64_t count) {
    const uint64_t first = from / unit_;
    return from + count <= size_ && space_.written_in_place(first, div_up(from + count, unit_) - first);
  };
  if (durability_.metadata_unsynced() || space_.changed_since_sync() ||
      space_.delayed_blocks() > 0 || durability_.synced_size() != size_) {
    return false;
  }
  if (length > 0 && !in_place(offset, length)) return false;
  for (const auto& [from, count] : durability_.unsynced_ranges()) {
    if (!in_place(from, count)) return false;
  }
  return true;
}

bool RegularFile::commit() {
  if (!unsynced()) return false;
  if (cache_.dirty_bytes() == 0) {
    durability_.synced(size_);
    drop_cut_tail();
    space_.synced();
    disk_size_ = size_;
    return true;
  }
  // The journal holds the file's allocation and its disk size; the data
  // written back is on the device (data=ordered waits for it). Every byte
  // below the disk size outside the dirty pages is durable as it is now.
  const bool changed = durability_.metadata_unsynced() ||
                       space_.changed_since_sync(0, div_up(disk_size_, unit_)) ||
                       durability_.synced_size() != disk_size_;
  const uint64_t unsynced_before = durability_.unsynced_bytes();
  // While a tail is kept the disk size is the size (a truncate set both, and
  // the size grows only once the tail is settled): the tail is past the
  // durable size now, and no crash brings it back.
  durability_.size_synced(disk_size_);
  drop_cut_tail();
  durability_.commit_zeroes();
  const DurabilityView current(*this);
  uint64_t clean = 0;  // the start of the clean bytes after the last dirty range
  const auto commit_clean = [&](uint64_t end) {
    if (end > clean) durability_.range_synced(clean, end - clean, disk_size_, current);
  };
  for (const BlockRange& dirty : cache_.dirty_ranges(0, disk_size_)) {
    commit_clean(dirty.start);
    clean = dirty.start + dirty.length;
  }
  commit_clean(disk_size_);
  // The allocation below the disk size: blocks past it (delayed ones a close
  // allocated, data still dirty) go back at a crash, with the data they were for.
  space_.synced_below(div_up(disk_size_, unit_));
  return changed || durability_.unsynced_bytes() != unsynced_before;
}

void RegularFile::flush(bool last_handle, Work& work, Work& untimed) {
  // NFS close-to-open: nfs_file_flush writes the dirty pages and commits them.
  if (flush_on_close_) sync(0, kMaxFileSize, work);
  // ext4_release_file's ext4_alloc_da_blocks, xfs_release's and
  // btrfs_release_file's filemap_flush: the rewrite of a truncated file is
  // written back, and the commit that carries the truncate may carry it too.
  if (std::exchange(write_back_on_close_, false)) writeback(0, kMaxFileSize, untimed);
  if (last_handle) {
    space_.close(size_, work);
  } else {
    space_.flush_delayed(0, kAllBlocks, size_, work);
  }
}

void RegularFile::close(Work& work) { space_.close(size_, work); }

void RegularFile::release() {
  drop_contents();
  space_.release();
}

void RegularFile::give_up_blocks() {
  drop_cache(0, kMaxFileSize);
  space_.truncate(0, /*emptied=*/true);
}

void RegularFile::drop_contents() {
  drop_cache(0, kMaxFileSize);
  durability_.synced(0);
  drop_cut_tail();
  contents_->zero(0, size_);
  size_ = 0;
  disk_size_ = 0;
}

bool RegularFile::power_cut() {
  // A power cut empties the host's page cache, of synced files too.
  drop_cache(0, kMaxFileSize);
  write_back_on_close_ = false;
  if (!unsynced()) return false;
  space_.lose_unsynced();
  return true;
}

void RegularFile::recover() {
  settle_cut_tail();
  // The allocation at the last sync; what holds no data there reads as zeros.
  for (const BlockRange& blocks : space_.take_back_synced()) {
    const uint64_t from = blocks.start * unit_;
    if (from >= size_) continue;
    contents_->zero(from, std::min(size_ - from, blocks.length * unit_));
  }
  // Bytes written since the last sync are lost; the size is the synced one, and
  // each page changed since has its synced contents again.
  for (const auto& [offset, length] : durability_.unsynced_ranges()) {
    if (offset < size_) contents_->zero(offset, std::min(length, size_ - offset));
  }
  const uint64_t synced_size = durability_.synced_size();
  if (size_ > synced_size) contents_->zero(synced_size, size_ - synced_size);
  size_ = synced_size;
  for (const uint64_t page : durability_.saved_page_offsets()) {
    if (page >= synced_size) break;
    const uint64_t length = std::min(FileDurability::kPageBytes, synced_size - page);
    const uint64_t first = page / unit_;
    const std::optional<std::string> page_contents = durability_.saved_page(page);
    if (page_contents && space_.has_data(first, div_up(page + length, unit_) - first)) {
      const auto synced = std::as_bytes(std::span(*page_contents));
      // A full host store cannot take the page back: it reads as zeros, and
      // the crash goes on for the other pages and files.
      if (auto room = contents_->reserve(page, synced); !room) {
        spdlog::error("crash recovery: the synced page at {} cannot be stored back ({}): it reads "
                      "as zeros",
                      page, errno_name(room.error().value));
        contents_->zero(page, length);
        continue;
      }
      contents_->write(page, synced);
    } else {
      contents_->zero(page, length);
    }
  }
  durability_.synced(size_);
  disk_size_ = size_;
}

uint64_t RegularFile::persist_some(double fraction, uint64_t unit, std::mt19937_64& random) {
  // An unsynced range the truncate cut stays in the unsynced ranges: made
  // durable, it must read as the zeros the truncate left.
  settle_cut_tail();
  std::uniform_real_distribution<double> draw(0.0, 1.0);
  const uint64_t synced_size = durability_.synced_size();
  std::vector<std::pair<uint64_t, uint64_t>> pieces;
  for (const auto& [offset, length] : durability_.unsynced_ranges()) {
    const uint64_t end = std::min(offset + length, synced_size);
    for (uint64_t piece = offset / unit * unit; piece < end; piece += unit) {
      const uint64_t from = std::max(piece, offset);
      const uint64_t to = std::min(piece + unit, end);
      const uint64_t first = from / unit_;
      const uint64_t count = div_up(to, unit_) - first;
      // A draw for every piece, so the same seed gives the same pieces whatever is skipped.
      const bool persisted = draw(random) < fraction;
      // Delayed blocks have no device blocks yet: nothing of them reached the disk.
      if (persisted && space_.has_written_blocks(first, count) &&
          !space_.changed_since_sync(first, count)) {
        pieces.emplace_back(from, to - from);
      }
    }
  }
  uint64_t bytes = 0;
  for (const auto& [from, length] : pieces) {
    durability_.range_synced(from, length, synced_size, DurabilityView(*this));
    bytes += length;
  }
  return bytes;
}

FileStats RegularFile::stats() const {
  FileStats f;
  f.size = size_;
  space_.describe(div_up(size_, unit_), f);
  f.dirty_bytes = cache_.dirty_bytes();
  f.unsynced_bytes = durability_.unsynced_bytes();
  return f;
}

void RegularFile::prepare_change(uint64_t offset, uint64_t length) {
  if (offset + length > size_) settle_cut_tail();
  durability_.before_change(offset, length, DurabilityView(*this));
}

void RegularFile::keep_cut_tail(uint64_t size) {
  // Past the synced size no crash brings anything back.
  const uint64_t kept = std::min(size_, durability_.synced_size());
  if (kept < size_) contents_->zero(kept, size_ - kept);
  const uint64_t end = div_up(kept, unit_);
  for (auto data = space_.next_data(size / unit_); data && *data < end;) {
    const uint64_t hole = std::min(space_.next_hole(*data), end);
    cut_data_.add(*data, hole - *data);
    data = space_.next_data(hole);
  }
  cut_end_ = std::max(cut_end_, kept);
}

void RegularFile::settle_cut_tail() {
  if (cut_end_ == 0) return;
  // The store's memory of whole pieces is taken as it is; the rest is copied.
  durability_.save_handed_over(size_, cut_end_ - size_, DurabilityView(*this), *contents_);
  durability_.before_change(size_, cut_end_ - size_, DurabilityView(*this));
  drop_cut_tail();
}

void RegularFile::drop_cut_tail() {
  if (cut_end_ == 0) return;
  contents_->zero(size_, cut_end_ - size_);
  cut_end_ = 0;
  cut_data_.clear();
}

bool RegularFile::DurabilityView::has_data(uint64_t offset, uint64_t length) const {
  // Data blocks, or delayed ones; not a hole or unwritten extent. Past the
  // size, the cut tail's blocks as they were when cut.
  const uint64_t first = offset / file_.unit_;
  const uint64_t count = div_up(offset + length, file_.unit_) - first;
  if (file_.space_.has_data(first, count)) return true;
  return offset + length > file_.size_ && file_.cut_data_.overlaps(first, count);
}

void RegularFile::DurabilityView::read(uint64_t offset, std::span<std::byte> out) const {
  file_.contents_->read(offset, out);
}

const std::byte* RegularFile::DurabilityView::in_memory(uint64_t offset, uint64_t length) const {
  return file_.contents_->stored_in_memory(offset, length);
}

DeviceWork RegularFile::device_work(uint64_t offset, uint64_t length) const {
  DeviceWork work;
  if (length == 0) return work;
  work.requests = device_requests(length, max_request_bytes_);
  work.bytes = length;
  const uint64_t first = offset / unit_;
  const uint64_t extents =
      space_.extents().find(first, div_up(offset + length, unit_) - first).size();
  if (extents > 1) work.extra_extents = extents - 1;
  return work;
}

void RegularFile::drop_cache(uint64_t offset, uint64_t length) {
  if (offset == 0 && length >= kMaxFileSize) {
    dirty_.remove(cache_.dirty_bytes());
    cache_.clear();
  } else {
    dirty_.remove(cache_.drop(offset, length));
  }
}

ImageJson RegularFile::save() const {
  if (durability_.unsynced()) throw ImageError("a file holds data written since its last sync");
  return ImageJson{{"size", size_}, {"space", space_.save()}, {"contents", contents_->key()}};
}

void RegularFile::load(const ImageJson& saved) {
  size_ = saved.at("size").get<uint64_t>();
  if (size_ > kMaxFileSize) throw ImageError("a file's size is past the largest offset");
  space_.load(saved.at("space"));
  durability_.synced(size_);
  disk_size_ = size_;
}

}  // namespace mimicfs
