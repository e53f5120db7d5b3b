// SPDX-License-Identifier: Apache-2.0
// Allocator: the emulated device's free space, in allocation units ("blocks").
//
// It places blocks where it is asked to (a goal chosen by the AllocationPolicy)
// and keeps an exact free-extent map, so fragmentation is a consequence of where
// blocks went, never a formula. Thread-safe: mutex_ guards everything below it.
#pragma once

#include <absl/container/btree_map.h>
#include <absl/container/btree_set.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/base/thread_annotations.h"
#include "engine/base/volume_image.h"
#include "engine/fs/result.h"
#include "engine/space/extent_map.h"

namespace mimicfs {

struct FreeSpaceSummary {
  uint64_t total_blocks = 0;
  uint64_t metadata_blocks = 0;  // the groups' own headers: never free
  uint64_t free_blocks = 0;      // including reserved ones
  uint64_t reserved_blocks = 0;  // free, but promised to delayed allocations
  uint64_t free_extents = 0;
  uint64_t largest_free_extent = 0;  // blocks
};

// The device is divided into allocation groups (ext4's flex groups, xfs's
// allocation groups, btrfs's block groups) and holds the filesystem's own
// structures (group headers, inode tables, a log: mkfs_geometry.h), which are
// never free: a file that grows across one is split there.
// Each allocation group is an entry in the allocator's maps, and a mkfs
// geometry lays out each one: bound the memory a profile can ask for.
constexpr uint64_t kMaxAllocationGroups = uint64_t{1} << 20;

struct DeviceGeometry {
  uint64_t total_blocks = 0;
  uint64_t group_blocks = 0;  // 0: the whole device is one group
  // Where each group starts, when they are not all `group_blocks` long (btrfs's
  // chunks after mkfs's own): sorted, the first 0. Empty: one every group_blocks.
  std::vector<uint64_t> group_starts;
  std::vector<BlockRange> metadata;  // sorted, apart, inside the device
};

// How an allocation lies over the groups. By default a run may cross a group's
// end (ext4's extents span block groups of a flex group). btrfs's extents live
// in one block group: each extent of a request (at most `max_blocks`) is
// placed on its own, whole, in the first group from the goal whose free space
// holds it (find_free_extent moves on to a new chunk when the current one's
// tail is too short), and is split only when no group near can hold it.
struct ExtentRules {
  bool cross_groups = true;
  uint64_t max_blocks = 0;  // with cross_groups false; 0: the whole request is one extent
};

class Allocator {
 public:
  explicit Allocator(DeviceGeometry geometry, ExtentRules rules = {});

  // Sets `count` free blocks aside for a later allocate(): ENOSPC, with nothing
  // reserved, if fewer unreserved blocks are free. This is how a delayed
  // allocation (or a write that must not fail half-way) keeps its promise.
  [[nodiscard]] Result<void> reserve(uint64_t count);
  void unreserve(uint64_t count);

  // Allocates exactly `count` blocks, `reserved` of which (at most `count`) come
  // out of the caller's reservation: from `goal` onward while it is free, then from
  // the next free extent after it (wrapping to block 0). All or nothing: ENOSPC,
  // with nothing allocated, if the unreserved free blocks cannot cover the rest.
  // Runs are returned in the order they were taken, adjacent ones merged.
  [[nodiscard]] Result<std::vector<BlockRange>> allocate(uint64_t goal, uint64_t count,
                                                         uint64_t reserved = 0);

  // Returns blocks to free space. Releasing a block that is already free is a bug
  // (std::logic_error).
  void release(BlockRange range);
  // Takes exactly the blocks of `range` (a crash giving a file back the blocks it
  // had at its last sync): EBUSY, with nothing taken, unless all are free and
  // taking them leaves the reservations covered (ENOSPC otherwise).
  [[nodiscard]] Result<void> claim(BlockRange range);

  // Where the most recent allocation that started in `group` ended (the group's
  // shared cursor); the group's first data block when it has had none.
  uint64_t cursor(uint64_t group) const;
  uint64_t group_count() const { return group_starts_.size(); }
  uint64_t group_blocks() const { return group_blocks_; }
  uint64_t group_of(uint64_t block) const;
  uint64_t group_start(uint64_t group) const { return group_starts_[group]; }
  uint64_t group_end(uint64_t group) const;
  uint64_t free_blocks() const;
  FreeSpaceSummary summary() const;
  std::vector<BlockRange> free_ranges() const;
  // The filesystem's own structures: never free, never a file's.
  const std::vector<BlockRange>& metadata_ranges() const { return metadata_; }

  // Its free space, reservations and cursors for a volume image, and back into
  // an Allocator of the same geometry.
  ImageJson save() const;
  void load(const ImageJson& saved);

 private:
  uint64_t whole_fit_near(uint64_t position, uint64_t count) const REQUIRES(mutex_);
  uint64_t whole_fit_in_a_group(uint64_t position, uint64_t count) const REQUIRES(mutex_);
  void add_free(uint64_t start, uint64_t length) REQUIRES(mutex_);
  // The free extents by start (start -> length): a B-tree (block_range_set.h
  // says why), whose inserts and erases invalidate every iterator into it but
  // the returned one; free_by_length_ likewise.
  using FreeByStart = absl::btree_map<uint64_t, uint64_t>;

  // Removes the free extent at `it`; returns the one after it (the only
  // iterator into free_by_start_ still valid).
  FreeByStart::iterator remove_free(FreeByStart::iterator it) REQUIRES(mutex_);

  mutable std::mutex mutex_;
  const uint64_t total_blocks_;
  const uint64_t group_blocks_;
  const ExtentRules rules_;
  std::vector<uint64_t> group_starts_;  // set once, by the constructor
  const std::vector<BlockRange> metadata_;
  uint64_t metadata_blocks_ = 0;
  uint64_t reserved_blocks_ GUARDED_BY(mutex_) = 0;
  std::map<uint64_t, uint64_t> group_cursors_ GUARDED_BY(mutex_);              // group -> block
  FreeByStart free_by_start_ GUARDED_BY(mutex_);
  absl::btree_set<std::pair<uint64_t, uint64_t>> free_by_length_ GUARDED_BY(mutex_);  // (length, start)
  uint64_t free_blocks_ GUARDED_BY(mutex_) = 0;
};

}  // namespace mimicfs
