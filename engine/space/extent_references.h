// SPDX-License-Identifier: Apache-2.0
// ExtentReferences: copy-on-write data extents and the blocks that still use them.
//
// On btrfs a write allocates a data extent (at most 128 MiB); files refer to
// parts of it. Overwriting or punching part of it only drops those references:
// the whole data extent stays allocated, as a "bookend", until no part of it is
// referenced. This table is that bookkeeping. Files never share blocks here (no
// reflinks), so each data extent keeps which of its blocks nobody refers to.
//
// Thread-safe: mutex_ guards everything below it. Lock order: after the inode's
// mutex, before the Allocator's.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "engine/base/thread_annotations.h"
#include "engine/space/block_range_set.h"
#include "engine/space/extent_map.h"

namespace mimicfs {

class ExtentReferences {
 public:
  // `max_extent_blocks`: the longest data extent; 0 for no limit.
  explicit ExtentReferences(uint64_t max_extent_blocks) : max_extent_blocks_(max_extent_blocks) {}

  // Newly allocated device blocks: new data extents, every block referenced.
  void add(BlockRange allocated);
  // Blocks a file no longer refers to. Returns the data extents that are now
  // unreferenced as a whole, which the caller frees; the rest stay allocated.
  // Dropping a block that is not in a data extent is a bug (std::logic_error).
  [[nodiscard]] std::vector<BlockRange> drop(BlockRange unreferenced);
  // Blocks a file refers to again (a crash restoring its last synced mapping):
  // those of a still-allocated data extent that nobody refers to are referenced
  // again; returns the rest (outside any data extent, or referenced by another
  // file now), which the caller claims from the allocator (and add()s) or replaces.
  [[nodiscard]] std::vector<BlockRange> take_back(BlockRange range);

  // Blocks that stay allocated although no file refers to them.
  uint64_t unreferenced_blocks() const;
  uint64_t data_extent_count() const;
  std::vector<BlockRange> data_extents() const;

  // Its data extents for a volume image, and back into an empty one.
  ImageJson save() const;
  void load(const ImageJson& saved);

 private:
  struct DataExtent {
    uint64_t length = 0;
    BlockRangeSet unreferenced;  // device blocks of it no file refers to
  };

  const uint64_t max_extent_blocks_;
  mutable std::mutex mutex_;
  std::map<uint64_t, DataExtent> extents_ GUARDED_BY(mutex_);  // first device block -> extent
  uint64_t unreferenced_blocks_ GUARDED_BY(mutex_) = 0;
};

}  // namespace mimicfs
