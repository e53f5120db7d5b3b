// SPDX-License-Identifier: Apache-2.0
#include "engine/space/placement_policy.h"

namespace mimicfs {

uint64_t GoalPlacement::goal(const ExtentMap& file, uint64_t logical, uint64_t group,
                             const Allocator& allocator) const {
  if (auto before = file.nearest_before(logical)) return before->physical_end();
  if (auto after = file.first_at_or_after(logical)) {
    const uint64_t gap = after->logical - logical;
    if (after->physical >= gap) return after->physical - gap;
  }
  return allocator.cursor(group);
}

uint64_t SharedCursorPlacement::goal(const ExtentMap& /*file*/, uint64_t /*logical*/,
                                     uint64_t group, const Allocator& allocator) const {
  return allocator.cursor(group);
}

std::unique_ptr<PlacementPolicy> make_placement_policy(std::string_view name) {
  if (name == "goal") return std::make_unique<GoalPlacement>();
  if (name == "shared_cursor") return std::make_unique<SharedCursorPlacement>();
  return nullptr;
}

}  // namespace mimicfs
