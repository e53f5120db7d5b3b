#include "backends/allocation_policy.h"

namespace mimicfs {

uint64_t GoalPolicy::goal(const ExtentMap& file, uint64_t logical,
                          const Allocator& allocator) const {
  if (auto before = file.nearest_before(logical)) return before->physical_end();
  if (auto after = file.first_at_or_after(logical)) {
    const uint64_t gap = after->logical - logical;
    if (after->physical >= gap) return after->physical - gap;
  }
  return allocator.cursor();
}

std::unique_ptr<AllocationPolicy> make_allocation_policy(std::string_view name) {
  if (name == "goal") return std::make_unique<GoalPolicy>();
  return nullptr;
}

}  // namespace mimicfs
