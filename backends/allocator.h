// Allocator: the emulated device's free space, in allocation units ("blocks").
//
// It places blocks where it is asked to (a goal chosen by the AllocationPolicy)
// and keeps an exact free-extent map, so fragmentation is a consequence of where
// blocks went, never a formula. Thread-safe: mutex_ guards everything below it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "backends/extent_map.h"
#include "backends/result.h"

namespace mimicfs {

struct FreeSpaceSummary {
  uint64_t total_blocks = 0;
  uint64_t free_blocks = 0;
  uint64_t free_extents = 0;
  uint64_t largest_free_extent = 0;  // blocks
};

class Allocator {
 public:
  explicit Allocator(uint64_t total_blocks);

  // Allocates exactly `count` blocks: from `goal` onward while it is free, then from
  // the next free extent after it (wrapping to block 0). All or nothing: ENOSPC,
  // with nothing allocated, if fewer than `count` blocks are free. Runs are returned
  // in the order they were taken, adjacent ones merged.
  [[nodiscard]] Result<std::vector<BlockRange>> allocate(uint64_t goal, uint64_t count);

  // Returns blocks to free space. Releasing a block that is already free is a bug
  // (std::logic_error).
  void release(BlockRange range);

  // Where the most recent allocation ended: the default goal for a file with no blocks.
  uint64_t cursor() const;
  uint64_t free_blocks() const;
  FreeSpaceSummary summary() const;

 private:
  void add_free(uint64_t start, uint64_t length);               // requires mutex_
  void remove_free(std::map<uint64_t, uint64_t>::iterator it);  // requires mutex_

  mutable std::mutex mutex_;
  const uint64_t total_blocks_;
  std::map<uint64_t, uint64_t> free_by_start_;              // start -> length; guarded by mutex_
  std::set<std::pair<uint64_t, uint64_t>> free_by_length_;  // (length, start); guarded by mutex_
  uint64_t free_blocks_ = 0;                                // guarded by mutex_
  uint64_t cursor_ = 0;                                     // guarded by mutex_
};

}  // namespace mimicfs
