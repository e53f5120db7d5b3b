// SPDX-License-Identifier: Apache-2.0
// PlacementPolicy: where on the device a file's new blocks should go.
//
// The Allocator owns free space; a placement policy only chooses the goal block,
// so swapping policies (a profile's allocation.placement key) changes where
// blocks land, and with it the fragmentation that results, without touching the
// bookkeeping.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "engine/space/allocator.h"
#include "engine/space/extent_map.h"

namespace mimicfs {

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  // The device block at which to start allocating file block `logical` of `file`,
  // a file that lives in allocation group `group`.
  virtual uint64_t goal(const ExtentMap& file, uint64_t logical, uint64_t group,
                        const Allocator& allocator) const = 0;
};

// "goal" (ext4-like, and how a NAS's filesystem places an NFS write): right after
// the nearest block the file already has before `logical`; failing that, just
// before its nearest block after; failing that, where the last allocation in the
// file's group ended. Blocks are placed next to each other, not at the file's
// offset gap, so sparse one-byte writes (seed 000) land back to back and the gaps
// between them must be filled from elsewhere later.
class GoalPlacement final : public PlacementPolicy {
 public:
  uint64_t goal(const ExtentMap& file, uint64_t logical, uint64_t group,
                const Allocator& allocator) const override;
};

// "shared_cursor" (xfs-like without speculative preallocation, and btrfs's data
// allocator): every allocation in a group starts where the group's previous one
// ended, whichever file it was for. One writer stays contiguous; writers
// extending different files of one group at the same time interleave.
class SharedCursorPlacement final : public PlacementPolicy {
 public:
  uint64_t goal(const ExtentMap& file, uint64_t logical, uint64_t group,
                const Allocator& allocator) const override;
};

// The policy a profile names; nullptr for an unknown name (profiles are validated
// before this is called).
std::unique_ptr<PlacementPolicy> make_placement_policy(std::string_view name);

}  // namespace mimicfs
