// SPDX-License-Identifier: Apache-2.0
#include "engine/space/preallocation_policy.h"

#include <algorithm>
#include <bit>

namespace mimicfs {

uint64_t InodeWindows::extra_blocks(const AllocationRequest& request,
                                    PreallocationState& state) const {
  // Only a stream (an append past everything the file has) gets a window.
  if (request.logical < request.mapped_end) return 0;
  const uint64_t window = std::min(max_blocks_, std::max(request.count, state.next_window));
  state.next_window = std::min(max_blocks_, std::max(window, request.count) * 2);
  return window > request.count ? window - request.count : 0;
}

uint64_t SpeculativeEndOfFile::extra_blocks(const AllocationRequest& request,
                                            PreallocationState& /*state*/) const {
  const uint64_t end = request.logical + request.count;
  // Only an allocation that extends the file, at its end, is speculative, and a
  // file smaller than the minimum (xfs's allocsize) gets none.
  if (request.logical < request.mapped_end || end < request.size_blocks) return 0;
  if (end < min_blocks_) return 0;
  // The allocation reaches the next power of two of the file's size; past twice
  // the minimum, strictly beyond it, so the file doubles: O_SYNC appends get
  // chunks of 32 KiB, 32 KiB, 64 KiB, 128 KiB ..., as xfs gives them.
  const uint64_t target = std::bit_ceil(end + (end >= 2 * min_blocks_ ? 1 : 0));
  return std::min(target - end, max_blocks_);
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
