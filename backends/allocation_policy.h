// AllocationPolicy: where on the device a file's new blocks should go.
//
// The Allocator owns free space; a policy only chooses the goal block, so swapping
// policies (a profile's allocation.policy key) changes placement, and with it the
// fragmentation that results, without touching the bookkeeping.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "backends/allocator.h"
#include "backends/extent_map.h"

namespace mimicfs {

class AllocationPolicy {
 public:
  virtual ~AllocationPolicy() = default;
  // The device block at which to start allocating file block `logical` of `file`.
  virtual uint64_t goal(const ExtentMap& file, uint64_t logical,
                        const Allocator& allocator) const = 0;
};

// "goal" (ext4-like, and how a NAS's filesystem places an NFS write): right after
// the nearest block the file already has before `logical`; failing that, just
// before its nearest block after; failing that, where the last allocation ended.
// Blocks are placed next to each other, not at the file's offset gap, so sparse
// one-byte writes (seed 000) land back to back and the gaps between them must be
// filled from elsewhere later.
class GoalPolicy final : public AllocationPolicy {
 public:
  uint64_t goal(const ExtentMap& file, uint64_t logical, const Allocator& allocator) const override;
};

// The policy a profile names; nullptr for an unknown name (profiles are validated
// before this is called).
std::unique_ptr<AllocationPolicy> make_allocation_policy(std::string_view name);

}  // namespace mimicfs
