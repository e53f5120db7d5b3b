#include "backends/preallocation_policy.h"

#include <algorithm>
#include <bit>

namespace mimicfs {

uint64_t InodeWindows::extra_blocks(const AllocationRequest& request,
                                    PreallocationState& state) const {
  // Only a stream (an append past everything the file has) gets a window.
  if (request.logical < request.mapped_end) return 0;
  const uint64_t window =
      std::min(max_blocks_, std::max(request.count, state.next_window));
  state.next_window = std::min(max_blocks_, std::max(window, request.count) * 2);
  return window > request.count ? window - request.count : 0;
}

uint64_t SpeculativeEndOfFile::extra_blocks(const AllocationRequest& request,
                                            PreallocationState& /*state*/) const {
  const uint64_t end = request.logical + request.count;
  // Only an allocation that extends the file, at its end, is speculative.
  if (request.logical < request.mapped_end || end < request.size_blocks) return 0;
  return std::clamp(std::bit_floor(end), min_blocks_, max_blocks_);
}

std::unique_ptr<PreallocationPolicy> make_preallocation_policy(const Profile& profile) {
  const uint64_t unit = profile.allocation_unit;
  if (profile.speculative_preallocation) {
    return std::make_unique<SpeculativeEndOfFile>(
        std::max<uint64_t>(1, profile.speculative_preallocation_min_bytes / unit),
        std::max<uint64_t>(1, profile.speculative_preallocation_max_bytes / unit));
  }
  if (profile.inode_window_max_bytes > 0) {
    return std::make_unique<InodeWindows>(
        std::max<uint64_t>(1, profile.inode_window_max_bytes / unit));
  }
  return nullptr;
}

}  // namespace mimicfs
