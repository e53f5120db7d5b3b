// SPDX-License-Identifier: Apache-2.0
#include "engine/space/file_space.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

namespace mimicfs {
namespace {

uint64_t div_up(uint64_t value, uint64_t unit) { return (value + unit - 1) / unit; }

// One past the file's last mapped block; 0 when it has none.
uint64_t mapped_end(const ExtentMap& extents) {
  auto last = extents.nearest_before(FileSpace::kAllBlocks);
  return last ? last->logical_end() : 0;
}

uint64_t blocks_in(const std::vector<BlockRange>& runs) {
  uint64_t total = 0;
  for (const BlockRange& run : runs) total += run.length;
  return total;
}

}  // namespace

FileSpace::FileSpace(DeviceSpace& device, uint64_t group)
    : device_(device),
      home_group_(group),
      group_(group),
      created_stamp_(device.group_locks() ? device.group_locks()->stamp() : 0),
      extents_(device.max_extent_blocks(), device.max_unwritten_blocks()) {}

FileSpace::~FileSpace() {
  if (GroupLocks* locks = device_.group_locks()) locks->released(this);
}

bool FileSpace::has_data(uint64_t first, uint64_t count) const {
  return extents_.has_written(first, count) || delayed_.overlaps(first, count);
}

bool FileSpace::has_written_blocks(uint64_t first, uint64_t count) const {
  return extents_.has_written(first, count);
}

bool FileSpace::written_in_place(uint64_t first, uint64_t count) const {
  uint64_t covered = 0;
  for (const Extent& e : extents_.find(first, count)) {
    if (e.unwritten) return false;
    covered += e.length;
  }
  return covered == count;
}

std::optional<uint64_t> FileSpace::next_data(uint64_t block) const {
  std::optional<uint64_t> data = extents_.next_data(block);
  if (auto pending = delayed_.at_or_after(block)) {
    const uint64_t pending_block = std::max(block, pending->start);
    if (!data || pending_block < *data) data = pending_block;
  }
  return data;
}

uint64_t FileSpace::next_hole(uint64_t block) const {
  uint64_t hole = extents_.next_hole(block);
  while (auto pending = delayed_.at_or_after(hole)) {
    if (pending->start > hole) break;
    hole = extents_.next_hole(pending->start + pending->length);
  }
  return hole;
}

uint64_t FileSpace::holes(uint64_t size_blocks) const {
  int64_t holes = static_cast<int64_t>(extents_.count_holes(size_blocks));
  // Delayed blocks lie in holes of the mapping (they have no device blocks yet)
  // and split them: each run of them in a hole adds a piece, one fewer where it
  // touches the hole's start or end. O(d log n) for d runs, n extents.
  const auto& runs = delayed_.ranges();
  for (auto run = runs.begin(); run != runs.end() && run->first < size_blocks;) {
    const uint64_t start = run->first;
    const auto before = extents_.nearest_before(start);
    const auto after = extents_.first_at_or_after(start);
    const uint64_t hole_start = before ? before->logical_end() : 0;
    const uint64_t hole_end = std::min(size_blocks, after ? after->logical : size_blocks);
    int64_t pieces = 1;
    if (start <= hole_start) --pieces;  // the run starts the hole
    uint64_t end = hole_start;
    for (; run != runs.end() && run->first < hole_end; ++run) {
      end = std::min(hole_end, run->first + run->second);
      ++pieces;
    }
    if (end >= hole_end) --pieces;  // the last run ends it
    holes += pieces - 1;            // the hole itself was counted once
  }
  return static_cast<uint64_t>(holes);
}

void FileSpace::describe(uint64_t size_blocks, FileStats& f) const {
  const uint64_t unit = device_.unit();
  const ExtentSummary summary = extents_.summarize();
  f.allocated_bytes = summary.mapped_blocks * unit;
  f.extents = summary.extents;
  f.fragments = summary.fragments;
  f.unwritten_extents = summary.unwritten_extents;
  f.holes = holes(size_blocks);
  f.delayed_bytes = delayed_.blocks() * unit;
  uint64_t mapped_past_eof = 0;
  for (const Extent& e : extents_.find(size_blocks, kAllBlocks - size_blocks)) {
    mapped_past_eof += e.length;
  }
  f.preallocated_bytes = (mapped_past_eof + reservation_.length) * unit;
  if (auto first = extents_.first_at_or_after(0)) {
    f.first_group = device_.allocator().group_of(first->physical);
  }
  for (const auto& [blocks, count] : summary.length_histogram) {
    f.extent_size_histogram[blocks * unit] = count;
  }
}

std::vector<BlockRange> FileSpace::unpromised_holes(uint64_t first, uint64_t count) const {
  std::vector<BlockRange> holes;
  for (const BlockRange& hole : extents_.holes(first, count)) {
    for (const BlockRange& gap : delayed_.gaps(hole.start, hole.length)) holes.push_back(gap);
  }
  return holes;
}

Result<void> FileSpace::write(uint64_t first, uint64_t count, uint64_t size, Work& work) {
  // The blocks this write needs: holes not already awaiting allocation and, on
  // a copy-on-write profile, written blocks it overwrites (they move).
  const std::vector<BlockRange> holes = unpromised_holes(first, count);
  std::vector<Extent> overwritten;
  if (device_.copy_on_write()) {
    for (const Extent& e : extents_.find(first, count)) {
      if (!e.unwritten) overwritten.push_back(e);  // btrfs writes prealloc extents in place
    }
  }
  uint64_t needed = blocks_in(holes);
  for (const Extent& e : overwritten) needed += e.length;
  if (auto reserved = device_.allocator().reserve(needed); !reserved) return reserved;

  for (const Extent& e : overwritten) {
    device_.free(unmap(e.logical, e.length));
    allocate_range(e.logical, e.length, /*unwritten=*/false, /*preallocate=*/false, size, work);
  }
  for (const BlockRange& hole : holes) {
    if (device_.delayed_allocation()) {
      delayed_.add(hole.start, hole.length);
    } else {
      allocate_range(hole.start, hole.length, /*unwritten=*/false, /*preallocate=*/true, size,
                     work);
    }
  }
  mark_written(first, count);
  // Background writeback of a file with much delayed data.
  if (device_.writeback_blocks() > 0 && delayed_.blocks() >= device_.writeback_blocks()) {
    flush_delayed(0, kAllBlocks, size, work);
  }
  return {};
}

Result<void> FileSpace::allocate(uint64_t first, uint64_t count, uint64_t size, Work& work) {
  const std::vector<BlockRange> needed = unpromised_holes(first, count);
  if (auto reserved = device_.allocator().reserve(blocks_in(needed)); !reserved) return reserved;
  // As ext4_alloc_file_blocks: one allocation per longest unwritten record, so
  // files fallocated at the same time interleave in such pieces.
  const uint64_t piece = device_.unwritten_piece_blocks();
  for (const BlockRange& range : needed) {
    for (uint64_t done = 0; done < range.length;) {
      const uint64_t length = std::min(piece, range.length - done);
      allocate_range(range.start + done, length, /*unwritten=*/true, /*preallocate=*/false, size,
                     work);
      done += length;
    }
  }
  fallocated_ = true;
  return {};
}

Result<void> FileSpace::reserve(uint64_t count) { return device_.allocator().reserve(count); }

void FileSpace::allocate_reserved(uint64_t first, uint64_t count, uint64_t size, Work& work) {
  uint64_t used = 0;
  for (const BlockRange& hole : unpromised_holes(first, count)) {
    allocate_range(hole.start, hole.length, /*unwritten=*/true, /*preallocate=*/false, size, work);
    used += hole.length;
  }
  device_.allocator().unreserve(count - used);
  fallocated_ = true;
}

void FileSpace::flush_delayed(uint64_t first, uint64_t count, uint64_t size, Work& work) {
  if (delayed_.empty()) return;
  // A copy: the loop removes from the set.
  for (const BlockRange& range : delayed_.overlapping(first, count)) {
    const uint64_t start = std::max(range.start, first);
    const uint64_t end = std::min(range.start + range.length, first + count);
    delayed_.remove(start, end - start);
    allocate_range(start, end - start, /*unwritten=*/false, /*preallocate=*/true, size, work);
  }
}

void FileSpace::allocate_delayed_exactly(Work& work) {
  const auto delayed = delayed_.ranges();  // a copy: the loop removes from the set
  for (const auto& [start, length] : delayed) {
    delayed_.remove(start, length);
    allocate_range(start, length, /*unwritten=*/false, /*preallocate=*/false, 0, work);
  }
}

void FileSpace::punch(uint64_t first, uint64_t count) {
  if (count > 0) {
    device_.allocator().unreserve(delayed_.remove(first, count));
    device_.free(unmap(first, count));
  }
  discard_reservation();
}

void FileSpace::truncate(uint64_t keep_blocks, bool emptied) {
  device_.allocator().unreserve(delayed_.remove(keep_blocks, kAllBlocks - keep_blocks));
  discard_reservation();
  device_.free(unmap(keep_blocks, kAllBlocks - keep_blocks));
  if (emptied) preallocation_ = {};
  eof_trimmed_ = false;  // as xfs: a truncated file is trimmed on close again
}

void FileSpace::close(uint64_t size, Work& work) {
  flush_delayed(0, kAllBlocks, size, work);
  discard_reservation();
  if (GroupLocks* locks = device_.group_locks()) locks->released(this);
  const PreallocationPolicy* policy = device_.preallocation();
  if (policy && policy->kind() == PreallocationKind::kBeyondEndOfFile && !fallocated_ &&
      !eof_trimmed_) {
    const uint64_t keep = div_up(size, device_.unit());
    // Not remembered: a crash keeps the trim (xfs logs it in a transaction of
    // its own); blocks changed since the sync still go back to their mapping then.
    const auto trimmed = extents_.unmap(keep, kAllBlocks - keep);
    if (!trimmed.empty()) eof_trimmed_ = true;
    device_.free(trimmed);
  }
}

void FileSpace::release() {
  if (GroupLocks* locks = device_.group_locks()) locks->released(this);
  device_.allocator().unreserve(delayed_.blocks());
  delayed_.clear();
  discard_reservation();
  device_.free(extents_.unmap(0, kAllBlocks));
  synced();
}

void FileSpace::discard_reservation() {
  if (reservation_.length > 0) {
    device_.free({BlockRange{reservation_.physical, reservation_.length}});
  }
  reservation_ = {};
}

void FileSpace::allocate_range(uint64_t logical, uint64_t count, bool unwritten, bool preallocate,
                               uint64_t size, Work& work) {
  // Seed 000's "unsparsing": blocks allocated into a hole with allocated blocks
  // on both sides cost the device more than blocks appended after the last.
  if (extents_.nearest_before(logical) && logical < mapped_end(extents_)) {
    ++work.device_writes.gap_fills;
  }
  Allocator& allocator = device_.allocator();
  // A stream continues from the file's own reservation; one elsewhere ends it.
  InodeReservation& r = reservation_;
  if (r.length > 0 && r.logical == logical) {
    if (GroupLocks* locks = device_.group_locks()) locks->end_hold();
    const uint64_t take = std::min(count, r.length);
    map(logical, r.physical, take, unwritten);
    allocator.unreserve(take);  // these blocks were allocated with the window
    r.logical += take;
    r.physical += take;
    r.length -= take;
    logical += take;
    count -= take;
    if (count == 0) return;
  }
  discard_reservation();

  const PreallocationPolicy* policy = device_.preallocation();
  uint64_t extra = 0;
  if (preallocate && policy) {
    const AllocationRequest request{logical, count, mapped_end(extents_),
                                    div_up(size, device_.unit())};
    extra = policy->extra_blocks(request, preallocation_);
    // Never over blocks the file has, or is about to get from its delayed set.
    const uint64_t end = logical + count;
    if (auto next = extents_.first_at_or_after(end)) {
      extra = std::min(extra, next->logical - end);
    }
    if (auto pending = delayed_.at_or_after(end)) {
      extra = std::min(extra, pending->start > end ? pending->start - end : 0);
    }
  }
  if (GroupLocks* locks = device_.group_locks()) {
    if (extents_.empty()) {
      group_ = locks->first_allocation(this, home_group_, created_stamp_);
    } else {
      locks->end_hold();
    }
  }
  const uint64_t goal = device_.placement().goal(extents_, logical, group_, allocator);
  auto runs = allocator.allocate(goal, count + extra, count);
  if (!runs) {  // no room for the extra: exactly what was reserved
    extra = 0;
    runs = allocator.allocate(goal, count, count);
  }
  if (!runs) throw std::logic_error("FileSpace::allocate_range: reserved blocks are gone");
  device_.referenced(*runs);

  const bool beyond_eof = policy && policy->kind() == PreallocationKind::kBeyondEndOfFile;
  uint64_t position = logical;
  uint64_t needed = count;
  for (const BlockRange& run : *runs) {
    const uint64_t used = std::min(run.length, needed);
    map(position, run.start, used, unwritten);
    position += used;
    needed -= used;
    const BlockRange rest{run.start + used, run.length - used};
    if (rest.length == 0) continue;
    if (beyond_eof) {
      // Mapped past EOF as ordinary blocks: later writes land in them in place.
      map(position, rest.start, rest.length, /*unwritten=*/false);
    } else if (r.length == 0 && position == logical + count) {
      r = InodeReservation{position, rest.start, rest.length};
    } else {
      device_.free({rest});  // a window split by used space keeps only its first part
    }
    position += rest.length;
  }
}

void FileSpace::map(uint64_t logical, uint64_t physical, uint64_t length, bool unwritten) {
  remember(logical, length);
  extents_.map(logical, physical, length, unwritten);
}

std::vector<BlockRange> FileSpace::unmap(uint64_t first, uint64_t count) {
  for (const Extent& e : extents_.find(first, count)) remember(e.logical, e.length);
  return extents_.unmap(first, count);
}

void FileSpace::mark_written(uint64_t first, uint64_t count) {
  for (const Extent& e : extents_.find(first, count)) {
    if (e.unwritten) remember(e.logical, e.length);
  }
  extents_.mark_written(first, count);
}

void FileSpace::remember(uint64_t first, uint64_t count) {
  for (const BlockRange& gap : changed_.gaps(first, count)) {
    for (const Extent& e : extents_.find(gap.start, gap.length)) {
      synced_mapping_.map(e.logical, e.physical, e.length, e.unwritten);
    }
    changed_.add(gap.start, gap.length);
  }
}

void FileSpace::synced() {
  changed_.clear();
  synced_mapping_ = ExtentMap();
}

void FileSpace::synced_below(uint64_t end) {
  // A block past `end` changed since the last sync (allocated, or freed by a
  // truncate or punch this commit makes durable) is a hole at the commit.
  (void)synced_mapping_.unmap(end, kAllBlocks - end);
  range_synced(0, end);
}

void FileSpace::range_synced(uint64_t first, uint64_t count) {
  changed_.remove(first, count);
  (void)synced_mapping_.unmap(first, count);
}

void FileSpace::drop_reservations() {
  // A crash that undoes the removal finds them holes, as lose_unsynced() leaves them.
  for (const auto& [start, length] : delayed_.ranges()) remember(start, length);
  device_.allocator().unreserve(delayed_.blocks());
  delayed_.clear();
  discard_reservation();
}

void FileSpace::lose_unsynced() {
  // What was only in memory is gone: delayed blocks (their reservation too) and
  // the inode reservation. A delayed block was a hole at the sync unless a
  // change since, remembered already, says otherwise.
  for (const auto& [start, length] : delayed_.ranges()) remember(start, length);
  device_.allocator().unreserve(delayed_.blocks());
  delayed_.clear();
  discard_reservation();
  for (const auto& [start, length] : changed_.ranges()) device_.free(extents_.unmap(start, length));
}

std::vector<BlockRange> FileSpace::take_back_synced() {
  for (const Extent& e : synced_mapping_.all()) {
    uint64_t position = e.physical;
    for (const BlockRange& taken : device_.take_back({e.physical, e.length})) {
      // Blocks given to another file since: the restored data gets new ones.
      if (taken.start > position) {
        extents_.map(e.logical + (position - e.physical), position, taken.start - position,
                     e.unwritten);
      }
      position = taken.start + taken.length;
      const uint64_t logical = e.logical + (taken.start - e.physical);
      auto runs = device_.allocator().allocate(
          device_.placement().goal(extents_, logical, group_, device_.allocator()), taken.length);
      if (!runs) {
        spdlog::warn("crash: no space to restore {} blocks at file block {}", taken.length,
                     logical);
        continue;
      }
      device_.referenced(*runs);
      uint64_t at = logical;
      for (const BlockRange& run : *runs) {
        extents_.map(at, run.start, run.length, e.unwritten);
        at += run.length;
      }
    }
    if (position < e.physical_end()) {
      extents_.map(e.logical + (position - e.physical), position, e.physical_end() - position,
                   e.unwritten);
    }
  }
  std::vector<BlockRange> no_data;
  for (const auto& [start, length] : changed_.ranges()) {
    for (const BlockRange& hole : extents_.holes(start, length)) no_data.push_back(hole);
    for (const Extent& e : extents_.find(start, length)) {
      if (e.unwritten) no_data.push_back({e.logical, e.length});
    }
  }
  synced();
  return no_data;
}

std::vector<BlockRange> FileSpace::restore_synced() {
  lose_unsynced();
  return take_back_synced();
}

ImageJson FileSpace::save() const {
  if (!changed_.empty()) throw ImageError("a file's blocks changed since its last sync");
  return ImageJson{
      {"extents", extents_.save()},
      {"delayed", delayed_.save()},
      {"reservation", {reservation_.logical, reservation_.physical, reservation_.length}},
      {"preallocation_next_window", preallocation_.next_window},
      {"fallocated", fallocated_},
      {"eof_trimmed", eof_trimmed_},
      {"group", group_},
  };
}

void FileSpace::load(const ImageJson& saved) {
  extents_.load(saved.at("extents"));
  delayed_.load(saved.at("delayed"));
  const ImageJson& reservation = saved.at("reservation");
  reservation_ = {reservation.at(0).get<uint64_t>(), reservation.at(1).get<uint64_t>(),
                  reservation.at(2).get<uint64_t>()};
  preallocation_.next_window = saved.at("preallocation_next_window").get<uint64_t>();
  fallocated_ = saved.at("fallocated").get<bool>();
  eof_trimmed_ = saved.at("eof_trimmed").get<bool>();
  group_ = saved.value("group", group_);  // images before GroupLocks: the inode's group
  if (group_ >= device_.allocator().group_count()) {
    throw ImageError(fmt::format("a file's group {} is past the device's {} groups", group_,
                                 device_.allocator().group_count()));
  }
}

}  // namespace mimicfs
