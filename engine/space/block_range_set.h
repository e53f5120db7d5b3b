// SPDX-License-Identifier: Apache-2.0
// BlockRangeSet: a set of file blocks kept as merged, sorted ranges.
//
// A file's delayed allocation is one: blocks written to the page cache that have
// no device blocks yet. O(log n + k) per operation for n ranges, k touched, in
// a B-tree (absl::btree_map): every write looks up three or four of these sets
// and maps, and a red-black tree's search missed the cache at each of its ~14
// levels with 16k ranges (BlockRangeSet::add and ExtentMap's upper_bound,
// 12-17% of the daemon's samples under random 4 KiB writes). A change of the
// set invalidates every iterator and reference into ranges().
// Not thread-safe: the owning inode's mutex guards it.
#pragma once

#include <absl/container/btree_map.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/base/volume_image.h"
#include "engine/space/extent_map.h"

namespace mimicfs {

class BlockRangeSet {
 public:
  using Ranges = absl::btree_map<uint64_t, uint64_t>;  // start -> length

  // Adds [start, start+length); returns how many of those blocks were not in the set.
  uint64_t add(uint64_t start, uint64_t length);
  // Removes [start, start+length); returns how many of those blocks were in the set.
  uint64_t remove(uint64_t start, uint64_t length);

  // The parts of [start, start+length) in the set, in order.
  std::vector<BlockRange> overlapping(uint64_t start, uint64_t length) const;
  // Whether any of [start, start+length) is in the set: !overlapping().empty()
  // without the copy (so, as there, a length of 0 past a range's start counts).
  bool overlaps(uint64_t start, uint64_t length) const;
  // The parts of [start, start+length) not in the set, in order.
  std::vector<BlockRange> gaps(uint64_t start, uint64_t length) const;
  // The range containing `block`, else the first one after it.
  std::optional<BlockRange> at_or_after(uint64_t block) const;

  const Ranges& ranges() const { return ranges_; }
  uint64_t blocks() const { return blocks_; }
  // Its ranges for a volume image, and back (volume_image.h).
  ImageJson save() const;
  void load(const ImageJson& saved);
  bool empty() const { return ranges_.empty(); }
  void clear() {
    ranges_.clear();
    blocks_ = 0;
  }

 private:
  Ranges ranges_;  // disjoint, never adjacent
  uint64_t blocks_ = 0;
};

}  // namespace mimicfs
