// SPDX-License-Identifier: Apache-2.0
#include "engine/space/device_space.h"

#include <fmt/format.h>

#include "engine/space/mkfs_geometry.h"

#include <limits>
#include <stdexcept>

namespace mimicfs {
namespace {

DeviceGeometry geometry_of(const Profile& profile) {
  auto geometry = device_geometry(profile);
  if (!geometry) throw std::invalid_argument(geometry_error(profile));
  return std::move(*geometry);
}

}  // namespace

DeviceSpace::DeviceSpace(const Profile& profile)
    : unit_(profile.allocation_unit),
      max_extent_blocks_(profile.max_extent_bytes / unit_),
      max_unwritten_blocks_(profile.max_unwritten_extent_bytes / unit_),
      unwritten_piece_blocks_(profile.max_unwritten_extent_bytes != 0
                                  ? profile.max_unwritten_extent_bytes / unit_
                                  : std::numeric_limits<uint64_t>::max() / 2),
      delayed_allocation_(profile.delayed_allocation),
      writeback_blocks_((profile.writeback_bytes + unit_ - 1) / unit_),
      placement_(make_placement_policy(profile.placement)),
      preallocation_(make_preallocation_policy(profile)),
      allocator_(geometry_of(profile),
                 ExtentRules{profile.extents_cross_groups, profile.cow_extent_max_bytes / unit_}),
      references_(profile.copy_on_write
                      ? std::make_unique<ExtentReferences>(profile.cow_extent_max_bytes / unit_)
                      : nullptr),
      group_locks_(profile.group_trylock ? std::make_unique<GroupLocks>(allocator_.group_count())
                                         : nullptr) {
  if (!placement_) {
    throw std::invalid_argument(
        fmt::format("unknown allocation placement \"{}\"", profile.placement));
  }
}

void DeviceSpace::referenced(const std::vector<BlockRange>& runs) {
  if (!references_) return;
  for (const BlockRange& run : runs) references_->add(run);
}

void DeviceSpace::free(const std::vector<BlockRange>& runs) {
  for (const BlockRange& run : runs) {
    if (!references_) {
      allocator_.release(run);
      continue;
    }
    for (const BlockRange& whole : references_->drop(run)) allocator_.release(whole);
  }
}

std::vector<BlockRange> DeviceSpace::take_back(BlockRange run) {
  std::vector<BlockRange> free_parts{run};
  if (references_) free_parts = references_->take_back(run);
  std::vector<BlockRange> taken_by_others;
  for (const BlockRange& part : free_parts) {
    if (allocator_.claim(part)) {
      referenced({part});
    } else {
      taken_by_others.push_back(part);
    }
  }
  return taken_by_others;
}

DeviceStats DeviceSpace::stats(uint64_t capacity_bytes) const {
  const FreeSpaceSummary space = allocator_.summary();
  DeviceStats d;
  d.allocation_unit = unit_;
  d.capacity_bytes = capacity_bytes;
  d.allocated_bytes = (space.total_blocks - space.free_blocks) * unit_;
  d.metadata_bytes = space.metadata_blocks * unit_;
  d.unreferenced_bytes = references_ ? references_->unreferenced_blocks() * unit_ : 0;
  d.reserved_bytes = space.reserved_blocks * unit_;
  d.free_bytes = space.free_blocks * unit_;
  d.free_extents = space.free_extents;
  d.largest_free_extent_bytes = space.largest_free_extent * unit_;
  return d;
}

ImageJson DeviceSpace::save() const {
  ImageJson saved{{"allocator", allocator_.save()}};
  if (references_) saved["references"] = references_->save();
  return saved;
}

void DeviceSpace::load(const ImageJson& saved) {
  allocator_.load(saved.at("allocator"));
  if (references_) references_->load(saved.at("references"));
}

}  // namespace mimicfs
