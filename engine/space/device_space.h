// SPDX-License-Identifier: Apache-2.0
// DeviceSpace: the emulated device's blocks and the policies that hand them
// out, shared by every file of a volume: the Allocator (free space, groups,
// reservations), the PlacementPolicy (where a file's next blocks go), the
// PreallocationPolicy (how many extra a growing file gets) and, on a
// copy-on-write profile, ExtentReferences (when freed blocks really are free).
// Each is chosen by profile keys when the volume is made.
//
// Thread-safety: the Allocator, ExtentReferences and GroupLocks lock themselves
// (leaf locks, in the order ExtentReferences -> Allocator); the policies are
// immutable. A file's own state is its FileSpace's, under the inode's mutex.
#pragma once

#include <memory>
#include <vector>

#include "engine/profile/profile.h"
#include "engine/space/allocator.h"
#include "engine/space/extent_references.h"
#include "engine/space/group_locks.h"
#include "engine/space/placement_policy.h"
#include "engine/space/preallocation_policy.h"
#include "engine/stats/stats.h"

namespace mimicfs {

class DeviceSpace {
 public:
  // Throws std::invalid_argument for a placement the profile names but no policy has.
  explicit DeviceSpace(const Profile& profile);

  uint64_t unit() const { return unit_; }  // the allocation unit, in bytes
  Allocator& allocator() { return allocator_; }
  const PlacementPolicy& placement() const { return *placement_; }
  const PreallocationPolicy* preallocation() const { return preallocation_.get(); }
  bool copy_on_write() const { return references_ != nullptr; }
  // xfs's AGF trylock (allocation.group_trylock); null when the profile has none.
  GroupLocks* group_locks() { return group_locks_.get(); }
  // Copy-on-write: the data extents, whole (none elsewhere).
  std::vector<BlockRange> data_extents() const {
    return references_ ? references_->data_extents() : std::vector<BlockRange>{};
  }
  // The allocator's and the copy-on-write references' state for a volume
  // image, and back into a DeviceSpace of the same profile.
  ImageJson save() const;
  void load(const ImageJson& saved);
  // Adds newly allocated runs to the copy-on-write references (no-op elsewhere).
  void referenced(const std::vector<BlockRange>& runs);
  // Gives blocks a file no longer maps back: at once, or on a copy-on-write
  // profile when no part of their data extent is referenced any more.
  void free(const std::vector<BlockRange>& runs);
  // Takes back blocks a file had at its last sync (a crash restoring its
  // mapping): from the copy-on-write references where their data extent is
  // still allocated, else from free space. Returns the parts it cannot take back
  // (another file holds some of their blocks now), which the caller replaces.
  std::vector<BlockRange> take_back(BlockRange run);

  // Limits of one file's extent records, in blocks (0: none).
  uint64_t max_extent_blocks() const { return max_extent_blocks_; }
  uint64_t max_unwritten_blocks() const { return max_unwritten_blocks_; }
  // fallocate allocates in pieces of this many blocks (as ext4_alloc_file_blocks).
  uint64_t unwritten_piece_blocks() const { return unwritten_piece_blocks_; }
  // A write's blocks wait for writeback (delayed allocation) instead of being allocated.
  bool delayed_allocation() const { return delayed_allocation_; }
  // A file's delayed blocks that start its writeback; 0: never.
  uint64_t writeback_blocks() const { return writeback_blocks_; }

  DeviceStats stats(uint64_t capacity_bytes) const;

 private:
  const uint64_t unit_;
  const uint64_t max_extent_blocks_;
  const uint64_t max_unwritten_blocks_;
  const uint64_t unwritten_piece_blocks_;
  const bool delayed_allocation_;
  const uint64_t writeback_blocks_;
  const std::unique_ptr<PlacementPolicy> placement_;
  const std::unique_ptr<PreallocationPolicy> preallocation_;  // null: none
  Allocator allocator_;
  const std::unique_ptr<ExtentReferences> references_;  // copy-on-write profiles only
  const std::unique_ptr<GroupLocks> group_locks_;       // allocation.group_trylock only
};

}  // namespace mimicfs
